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
    "  status NAME                           show the lock on every node\n"
    "  unlock NAME --force                   delete the lock on every node\n"
    "  rig start|stop|status [OPTIONS]       the local redis-server rig\n"
    "  demo [OPTIONS]                        a live mutual-exclusion demonstration\n"
    "  version                               print the version\n"
    "  help [COMMAND]                        print this or a command's help\n"
    "\n"
    "Global options (accepted before or after the command):\n"
    "  -n, --nodes URI[,URI...]   nodes (default: $REDLOCK_NODES, else\n"
    "                             redis://127.0.0.1:7001 ... :7005)\n"
    "  -q, --quorum N|all         nodes that must agree (default N/2+1; all = MultiLock)\n"
    "      --tls-ca FILE          CA certificates for rediss:// nodes\n"
    "      --tls-cert FILE        client certificate (mutual TLS)\n"
    "      --tls-key FILE         client key (mutual TLS)\n"
    "      --tls-server-name NAME name to verify instead of the URI's host\n"
    "      --tls-insecure         do NOT verify server certificates (tests only)\n"
    "      --connect-timeout MS   connect + TLS + AUTH deadline per node\n"
    "      --timeout MS           deadline of one request to one node\n"
    "      --watchdog-lease MS    lease renewed by the watchdog (default 30000); a\n"
    "                             lost lock is noticed within about a third of it\n"
    "      --user NAME            ACL user; the password comes from $REDLOCK_PASSWORD\n"
    "  -v, --verbose              more messages on stderr (-vv: debug)\n"
    "      --json                 machine-readable output\n"
    "\n"
    "Exit status: the command's own for exec; 64 usage error, 69 no quorum of\n"
    "nodes reachable, 70 internal error, 75 lock not acquired in time, 76 lock\n"
    "lost while the command ran, 77 credentials refused (AUTH, TLS), 78 a node\n"
    "refuses the lock for good (WRONGTYPE, bad db), 128+N signal N while\n"
    "waiting. See redlock(1).\n";

static const char exec_help[] =
    "usage: redlock [GLOBAL OPTIONS] exec NAME [OPTIONS] [--] CMD [ARG...]\n"
    "\n"
    "Acquires the lock NAME, runs CMD while holding it and releases it when CMD\n"
    "exits. CMD sees REDLOCK_NAME, REDLOCK_VALIDITY_MS and, with --fencing,\n"
    "REDLOCK_TOKEN in its environment. CMD runs in a process group of its own;\n"
    "a lost lock, a forwarded signal and the death of redlock (even by SIGKILL)\n"
    "signal the whole group. INT/TERM/HUP while waiting end the wait (128+N).\n"
    "\n"
    "  --wait MS                  give up after MS (0: one attempt; default: forever)\n"
    "  --unavailable-timeout MS   give up (69) once no quorum of nodes has been\n"
    "                             reachable for MS, even with no --wait (default\n"
    "                             10000)\n"
    "  --lease MS                 fixed lease, not renewed; CMD is treated as having\n"
    "                             lost the lock when it runs past the lease\n"
    "                             (default: a watchdog lease, renewed while CMD runs)\n"
    "  --on-lost term|kill|ignore what to do if the lock is lost while CMD runs:\n"
    "                             term (default) sends SIGTERM, then SIGKILL after\n"
    "                             --grace; kill sends SIGKILL; ignore only warns\n"
    "  --grace MS                 SIGTERM to SIGKILL delay (default 5000)\n"
    "  --fencing                  obtain a fencing token (REDLOCK_TOKEN)\n"
    "\n"
    "Exit status: CMD's own (128+N if it died of signal N); 75 not acquired in\n"
    "time; 69 no quorum of nodes reachable; 76 lock lost while CMD ran; 77\n"
    "credentials refused (AUTH, TLS); 78 a node refuses the lock for good\n"
    "(WRONGTYPE, bad db); 128+N signal N while waiting; 64 usage error; 70\n"
    "internal error; 126/127 CMD could not be run.\n";

static const char status_help[] =
    "usage: redlock [GLOBAL OPTIONS] status NAME [--json]\n"
    "\n"
    "Shows, for every node, whether it answered, the holder field(s), the hold\n"
    "count, the remaining lease (PTTL) and the stored fencing token, then whether\n"
    "one holder holds the lock on a quorum of nodes.\n"
    "Exit status: 0; 69 if fewer than a quorum of nodes answered.\n";

static const char unlock_help[] =
    "usage: redlock [GLOBAL OPTIONS] unlock NAME --force\n"
    "\n"
    "Deletes the lock on every node, whoever holds it, and wakes its waiters.\n"
    "The holder loses the lock. --force is required because of that.\n"
    "Exit status: 0 if the lock was released or was free; 69 if fewer than a\n"
    "quorum of nodes answered.\n";

static const char rig_help[] =
    "usage: redlock rig start|stop|status [--nodes-count N] [--base-port P] [--tls]\n"
    "                                     [--aof] [--dir D]\n"
    "\n"
    "Starts, stops or lists the local rig of redis-server processes (from PATH)\n"
    "on 127.0.0.1, ports P..P+N-1 (default 7001..7005), without persistence\n"
    "unless --aof (appendfsync always); --tls generates a test CA and serves TLS.\n"
    "State lives in --dir (default $REDLOCK_RIG_DIR, else /tmp/redlock-rig-P).\n"
    "status prints one line per node: index, port, pid, up|frozen|down (--json).\n"
    "The work is done by scripts/rig:\n"
    "$REDLOCK_RIG_SCRIPT, else ../scripts/rig next to this program, else the\n"
    "installed copy in share/redlock, else the source tree it was built from.\n";

static const char demo_help[] =
    "usage: redlock demo [--workers W] [--seconds S] [--base-port P] [--nodes-count N]\n"
    "\n"
    "Starts an N-node rig (default 5) on ports P.. (default 7001) unless one runs\n"
    "there, runs W (default 6) concurrent 'redlock exec' workers that record their\n"
    "critical sections on CLOCK_MONOTONIC and increment a shared counter file,\n"
    "freezes a minority of the nodes (SIGSTOP; two of five) for the middle third\n"
    "and thaws them (SIGCONT), prints a live timeline, then checks every pair of\n"
    "critical sections for overlap and the counter for lost updates. Runs about S\n"
    "(default 15) seconds; stops the rig afterwards if it started it.\n"
    "Exit status 0 only if no two critical sections overlapped.\n";

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
