/* SPDX-License-Identifier: BSD-3-Clause */
/* Usage texts: the overview and one text per command. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char overview[] =
    "usage: redlock [GLOBAL OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Distributed locks on Redis (RedLock over N nodes, MultiLock with -q all).\n"
    "\n"
    "Commands:\n"
    "  exec NAME [OPTIONS] -- CMD [ARG...]   run CMD while holding the lock NAME\n"
    "  exec NAME [OPTIONS] -c STRING         run /bin/sh -c STRING while holding it\n"
    "  exec NAME --shared -- CMD [ARG...]    run CMD holding a read hold of NAME (any\n"
    "                                        number at once; a plain exec NAME waits)\n"
    "  exec NAME --permits K -- CMD [ARG...] run CMD holding one of K permits of NAME\n"
    "  status NAME                           show the lock on every node\n"
    "  status [NAME] --metrics               statistics in the Prometheus text format\n"
    "  unlock NAME --force                   delete the lock on every node\n"
    "  rig start|stop|status|env [OPTIONS]   the local redis-server rig\n"
    "  demo [OPTIONS]                        a live mutual-exclusion demonstration\n"
    "  version                               print the version (also -V, --version)\n"
    "  help [COMMAND]                        print this or a command's help\n"
    "\n"
    "Global options (accepted before or after the command):\n"
    "  -n, --nodes URI[,URI...]   the nodes (else $REDLOCK_NODES, else 'nodes' in the\n"
    "                             config file; there is no default). Repeatable;\n"
    "                             lists split only at a ',' before a scheme\n"
    "  -q, --quorum N|all         nodes that must agree (default N/2+1; all = MultiLock)\n"
    "      --config FILE          config file (else $REDLOCK_CONFIG, else\n"
    "                             $XDG_CONFIG_HOME/redlock/config or\n"
    "                             ~/.config/redlock/config, else /etc/redlock/config)\n"
    "      --user NAME            ACL user\n"
    "      --password-file FILE   the password, from a file only you can read\n"
    "                             (else $REDLOCK_PASSWORD, else password_file)\n"
    "      --tls-ca FILE          CA certificates for rediss:// nodes\n"
    "      --tls-cert FILE        client certificate (mutual TLS)\n"
    "      --tls-key FILE         client key (mutual TLS)\n"
    "      --tls-server-name NAME name to verify instead of the URI's host\n"
    "      --tls-insecure         do NOT verify server certificates (tests only)\n"
    "      --connect-timeout DURATION  connect + TLS + AUTH deadline per node\n"
    "      --timeout DURATION     deadline of one request to one node\n"
    "      --watchdog-lease DURATION  lease renewed by the watchdog (default 30s); a\n"
    "                             lost lock is noticed within about a third of it\n"
    "  -v, --verbose              more messages on stderr (-vv: debug)\n"
    "      --json                 machine-readable output\n"
    "\n"
    "A DURATION is 250ms, 5s, 1.5s, 2m or 1h; a bare number is milliseconds.\n"
    "The command line beats the environment, which beats the config file.\n"
    "Never put a password in --nodes: other users see it in ps.\n"
    "\n"
    "Exit status: the command's own for exec; 64 usage error (also: no nodes\n"
    "configured), 69 no quorum of nodes reachable, 70 internal error, 75 lock\n"
    "not acquired in time, 76 lock lost while the command ran, 77 credentials\n"
    "refused (AUTH, TLS), 78 a node refuses the lock for good (WRONGTYPE, bad\n"
    "db), 128+N signal N while waiting. See redlock(1).\n";

static const char exec_help[] =
    "usage: redlock [GLOBAL OPTIONS] exec NAME [OPTIONS] [--] CMD [ARG...]\n"
    "       redlock [GLOBAL OPTIONS] exec NAME [OPTIONS] -c STRING\n"
    "       redlock [GLOBAL OPTIONS] exec NAME --shared|--write [OPTIONS] -- CMD...\n"
    "       redlock [GLOBAL OPTIONS] exec NAME --permits K [OPTIONS] -- CMD...\n"
    "\n"
    "Acquires the lock NAME, runs CMD while holding it and releases it when CMD\n"
    "exits. CMD sees REDLOCK_NAME, REDLOCK_VALIDITY_MS, REDLOCK_HELD=1 and, with\n"
    "--fencing, REDLOCK_TOKEN in its environment, but not REDLOCK_PASSWORD nor a\n"
    "REDLOCK_NODES with user info in it (unless --keep-secret-env). CMD runs in\n"
    "a process group of its own; a lost lock, a forwarded signal and the death\n"
    "of redlock (even by SIGKILL) signal the whole group. INT/TERM/HUP while\n"
    "waiting end the wait (128+N). The hold records who holds it (host,\n"
    "redlock's pid, CMD, start time) for `redlock status`; a read hold\n"
    "(--shared) and permits (--permits) record nothing of the kind, since they\n"
    "have many holders (status lists them by their fields).\n"
    "\n"
    "What is held (one of):\n"
    "      (default)              the lock NAME: one holder at a time\n"
    "      --shared               a read hold of the read-write lock NAME: any\n"
    "                             number of --shared commands run at once, while\n"
    "                             exec NAME (or --write) waits until none holds\n"
    "                             it. No --fencing (a read hold is shared)\n"
    "      --write                the write hold of the read-write lock NAME\n"
    "                             (Redisson's RReadWriteLock layout): excludes\n"
    "                             readers and writers, as the default does, and\n"
    "                             while it waits new readers wait behind it (the\n"
    "                             default lock does not hold them back)\n"
    "      --permits K            one of K permits of the semaphore NAME\n"
    "                             (Redisson's RPermitExpirableSemaphore layout):\n"
    "                             at most K commands hold one at once. Every user\n"
    "                             of NAME must give the same K. The default quorum\n"
    "                             grows with K (5 nodes: 3 for K=1, 4 for K=2..3,\n"
    "                             5 from K=4); a smaller --quorum is refused. A\n"
    "                             permit of a redlock that died returns when its\n"
    "                             lease ends (--watchdog-lease, or --lease)\n"
    "      --permit-count P       with --permits: hold P of the K permits at once\n"
    "                             (default 1)\n"
    "A loss of any of them is handled alike (--on-lost, exit status 76).\n"
    "\n"
    "  -c, --command STRING       run STRING with /bin/sh -c (instead of CMD)\n"
    "  -w, --wait DURATION|forever  give up after DURATION (0: one attempt;\n"
    "                             default: forever, or 'wait' in the config file);\n"
    "                             a bare number is milliseconds, not flock's seconds\n"
    "  -N, --nonblock             one attempt, the same as --wait 0 (flock's -n;\n"
    "                             here -n is --nodes)\n"
    "  -E, --conflict-exit-code N exit status when the lock was not acquired in\n"
    "                             time (0..255, default 75)\n"
    "      --unavailable-timeout DURATION  give up (69) once no quorum of nodes\n"
    "                             has been reachable for DURATION, even with no\n"
    "                             --wait (default 10s)\n"
    "      --lease DURATION|watchdog  fixed lease, not renewed; CMD is treated as\n"
    "                             having lost the lock when it runs past the lease\n"
    "                             (default: a watchdog lease, renewed while CMD\n"
    "                             runs, or 'lease' in the config file)\n"
    "      --on-lost term|kill|ignore  what to do if the lock is lost while CMD\n"
    "                             runs: term (default) sends SIGTERM, then SIGKILL\n"
    "                             after --grace; kill sends SIGKILL; ignore warns\n"
    "      --grace DURATION       SIGTERM to SIGKILL delay (default 5s)\n"
    "      --fencing              obtain a fencing token (REDLOCK_TOKEN; the\n"
    "                             default lock and --write only)\n"
    "      --keep-secret-env      leave REDLOCK_PASSWORD and REDLOCK_NODES in CMD's\n"
    "                             environment (a wrapper that runs redlock again)\n"
    "      --replica-acks K       a node's grant (and each renewal) counts only once\n"
    "                             K of its replicas have it (WAIT; 0..64, default 0\n"
    "                             or 'replica_acks' in the config file): for nodes\n"
    "                             that fail over, e.g. redis-sentinel:// groups\n"
    "      --replica-timeout DURATION  how long to wait for those replicas (default:\n"
    "                             the node --timeout, or 'replica_timeout')\n"
    "\n"
    "With -v, says how long the wait took and which nodes granted the lock (with\n"
    "--replica-acks, how many replicas acknowledged each grant).\n"
    "\n"
    "Exit status: CMD's own (128+N if it died of signal N); 75 (or -E N) not\n"
    "acquired in time; 69 no quorum of nodes reachable (or of replicas\n"
    "acknowledging, with --replica-acks); 76 lock lost while CMD\n"
    "ran; 77 credentials refused (AUTH, TLS); 78 a node refuses the lock for\n"
    "good (WRONGTYPE, bad db); 128+N signal N while waiting; 64 usage error;\n"
    "70 internal error; 126/127 CMD could not be run.\n";

static const char status_help[] =
    "usage: redlock [GLOBAL OPTIONS] status NAME [--permits K] [--json]\n"
    "                                     [--watch [INTERVAL]] [--count N]\n"
    "       redlock [GLOBAL OPTIONS] status [NAME] --metrics\n"
    "\n"
    "Shows, for every node, whether it answered, the holder field(s), the hold\n"
    "count, the remaining lease (PTTL) and the stored fencing token, then whether\n"
    "one holder holds the lock on a quorum of nodes. For a holder that recorded\n"
    "its facts (redlock exec always does): its host, pid (for exec, redlock's\n"
    "own; the command is its child), command line and since when it holds the\n"
    "lock. Last, how many more nodes may fail before no lock can be taken.\n"
    "A read-write lock (exec --shared/--write) also shows its writer, or its\n"
    "readers with their hold counts and on how many nodes each holds (a node\n"
    "names its first holder field; the others are counted, not named).\n"
    "A semaphore (exec --permits K) shows, per node, the permits available and\n"
    "taken and their holders; then each holder's permits, on how many nodes, the\n"
    "lease left on a quorum of them, and the permits a quorum has available.\n"
    "  --permits K  NAME is a semaphore of K permits (its quorum is the one a\n"
    "             holder of K uses); without it, a semaphore is recognised by\n"
    "             its keys and K estimated as available + taken\n"
    "  --watch [INTERVAL]  show it again every INTERVAL (default 1s; 250ms, 2s,\n"
    "             1m...) until interrupted (INT or TERM: exit 0); a terminal\n"
    "             is cleared for each view\n"
    "  --count N  with --watch: stop after N views\n"
    "  --metrics  instead, after reading NAME (or a key nobody locks) on every\n"
    "             node, print the client's counters and histograms in the\n"
    "             Prometheus text format 0.0.4 (a one-shot scrape; node\n"
    "             failures show which nodes did not answer)\n"
    "Exit status: 0; 69 if fewer than a quorum of nodes answered (with --watch:\n"
    "the last view's).\n";

static const char unlock_help[] =
    "usage: redlock [GLOBAL OPTIONS] unlock NAME --force\n"
    "\n"
    "Deletes the lock on every node, whoever holds it, and wakes its waiters.\n"
    "The holder loses the lock. --force is required because of that.\n"
    "Exit status: 0 if the lock was released or was free; 69 if fewer than a\n"
    "quorum of nodes answered.\n";

static const char rig_help[] =
    "usage: redlock rig start|stop|status|env [--nodes-count N] [--base-port P] [--tls]\n"
    "                                         [--aof] [--dir D]\n"
    "       redlock rig start --sentinel G [--base-port P] [--aof] [--dir D]\n"
    "\n"
    "Starts, stops or lists the local rig of redis-server processes (from PATH)\n"
    "on 127.0.0.1, ports P..P+N-1 (default 7001..7005), without persistence\n"
    "unless --aof (appendfsync always); --tls generates a test CA and serves TLS.\n"
    "State lives in --dir (default $REDLOCK_RIG_DIR, else /tmp/redlock-rig-P).\n"
    "status prints one line per node: index, port, pid, up|frozen|down (--json).\n"
    "--sentinel G starts G groups of a master and a replica (ports P..P+2G-1) and\n"
    "3 sentinels watching them as group1..groupG (P+2G..P+2G+2); status adds each\n"
    "node's role and group and a line per sentinel. env prints the rig's settings;\n"
    "its RIG_URIS is the node list (one redis-sentinel:// URI per group).\n"
    "The work is done by scripts/rig:\n"
    "$REDLOCK_RIG_SCRIPT, else ../scripts/rig next to this program, else the\n"
    "installed copy in share/redlock, else the source tree it was built from.\n";

static const char demo_help[] =
    "usage: redlock demo [--workers W] [--seconds S] [--base-port P] [--nodes-count N]\n"
    "       redlock demo --sentinel [--groups G] [--workers W] [--seconds S] [--base-port P]\n"
    "\n"
    "Starts an N-node rig (default 5) on ports P.. (default 7001) unless one runs\n"
    "there, runs W (default 6) concurrent 'redlock exec' workers that record their\n"
    "critical sections on CLOCK_MONOTONIC and increment a shared counter file,\n"
    "freezes a minority of the nodes (SIGSTOP; two of five) for the middle third\n"
    "and thaws them (SIGCONT), prints a live timeline, then checks every pair of\n"
    "critical sections for overlap and the counter for lost updates. Runs about S\n"
    "(default 15) seconds; stops the rig afterwards if it started it.\n"
    "\n"
    "--sentinel: instead, starts G (default 3) Sentinel groups (a master and a\n"
    "replica each; never on a rig it did not start), runs the workers with\n"
    "--replica-acks 1, SIGKILLs group 1's master a third of the way in, waits for\n"
    "the sentinels' failover, restarts the killed node as the new replica, and\n"
    "reports the time from the kill to the failover and to the first acquire\n"
    "after it; the workers must go on.\n"
    "Exit status 0 only if no two critical sections overlapped (--sentinel: and\n"
    "the workers acquired the lock after the kill).\n";

int cli_usage(const char *cmd, int to_stderr)
{
    FILE *f = to_stderr ? stderr : stdout;
    const char *text = overview;

    if (cmd && strcmp(cmd, "exec") == 0)
        text = exec_help;
    else if (cmd && strcmp(cmd, "status") == 0)
        text = status_help;
    else if (cmd && strcmp(cmd, "unlock") == 0)
        text = unlock_help;
    else if (cmd && strcmp(cmd, "rig") == 0)
        text = rig_help;
    else if (cmd && strcmp(cmd, "demo") == 0)
        text = demo_help;
    else if (cmd && strcmp(cmd, "version") == 0)
        text = "usage: redlock version [--json]\n";
    else if (cmd && strcmp(cmd, "help") == 0)
        text = "usage: redlock help [COMMAND]\n";
    else if (cmd)
        return -1;
    fputs(text, f);
    return 0;
}
