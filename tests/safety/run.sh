#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Safety harness driver: one nemesis case.
#
# Starts a private 5-node rig and a storage node on free ports in a work
# directory, runs W contending safety_worker processes for a bounded time
# while one nemesis injects faults, stops everything it started (also on
# failure), runs the checker and prints its one-line summary.
#
#   run.sh --nemesis NAME --worker PATH [--fastclock LIB] [--work-dir D]
#          [--seconds S] [--workers W] [--keep]
#
# Nemeses: none freeze1 freeze2 freeze3 kill_aof aof_freeze kill_nopersist
# netem clock clock_far pause_holder soak failover_acks failover_noacks, and
# rw_freeze rw_kill_aof sem_freeze sem_kill_aof fair_freeze fair_kill_aof
# (read-write lock, semaphore and fair lock workers under the freeze2,
# freeze1 and kill_aof faults).
# The failover cases run on Sentinel-managed groups (scripts/rig start
# --sentinel G) instead of 5 plain nodes. REDLOCK_SAFETY_SECONDS overrides
# the duration (default 14 s; none 10 s; kill_nopersist and pause_holder
# 20 s; soak 30 s, failover_acks 40 s, failover_noacks 30 s; the rw_, sem_
# and fair_ cases 12 s). Exit status:
# 0 pass, 1 violation or failed check, 77 skipped (netem without
# CAP_NET_ADMIN), 2 harness error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rig="$here/../../scripts/rig"
checker="$here/checker.py"

nemesis="" worker_bin="" fastclock="" work="" seconds="" workers=${SAFETY_WORKERS:-8} keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nemesis) nemesis=$2; shift 2;;
    --worker) worker_bin=$2; shift 2;;
    --fastclock) fastclock=$2; shift 2;;
    --work-dir) work=$2; shift 2;;
    --seconds) seconds=$2; shift 2;;
    --workers) workers=$2; shift 2;;
    --keep) keep=1; shift;;
    *) echo "run.sh: unknown option $1" >&2; exit 2;;
  esac
done
case "$nemesis" in
  none|freeze1|freeze2|freeze3|kill_aof|aof_freeze|kill_nopersist|netem|clock|clock_far|pause_holder|soak) ;;
  failover_acks|failover_noacks) ;;
  rw_freeze|rw_kill_aof|sem_freeze|sem_kill_aof|fair_freeze|fair_kill_aof) ;;
  *) echo "run.sh: --nemesis must be one of none freeze1 freeze2 freeze3 kill_aof aof_freeze" \
       "kill_nopersist netem clock clock_far pause_holder soak failover_acks failover_noacks" \
       "rw_freeze rw_kill_aof sem_freeze sem_kill_aof fair_freeze fair_kill_aof" >&2; exit 2;;
esac
[ -x "$worker_bin" ] || { echo "run.sh: --worker must name the safety_worker binary" >&2; exit 2; }
if [[ "$nemesis" = clock* ]] && [ ! -f "$fastclock" ]; then
  echo "run.sh: the clock case needs --fastclock (the safety_fastclock library)" >&2; exit 2
fi
if [ -z "$seconds" ]; then
  case "$nemesis" in
    soak) default=30;; failover_acks) default=40;; failover_noacks) default=30;;
    # These two need time for a forced race or several pause rounds.
    kill_nopersist|pause_holder) default=20;;
    none) default=10;;
    rw_*|sem_*|fair_*) default=12;;
    *) default=14;;
  esac
  seconds=${REDLOCK_SAFETY_SECONDS:-$default}
fi
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 5 ]] || { echo "run.sh: seconds must be >= 5" >&2; exit 2; }
[[ "$workers" =~ ^[0-9]+$ && "$workers" -ge 1 ]] || { echo "run.sh: bad --workers" >&2; exit 2; }

if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-safety-$nemesis.XXXXXX"); fi
# Only ever a directory this script made or was given for its own use.
if [ -d "$work" ]; then
  for d in "$work"/rig "$work"/storage; do [ -f "$d/rig.conf" ] && "$rig" stop --dir "$d" || true; done
  rm -rf "${work:?}"/*
fi
mkdir -p "$work/logs"
events="$work/logs/nemesis.log"
: >"$events"

worker_pids=()
netns_names=()
netns_pids=()
host_links=()

now() { "$worker_bin" --now; }
event() { echo "$(now) $*" >>"$events"; }
note() { echo "# $nemesis: $*"; }

# Stops every process this run started, thawing first so nothing stays frozen.
cleanup() {
  local rc=$? pid i
  trap - EXIT INT TERM
  for pid in "${worker_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${worker_pids[@]}"; do
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  for d in "$work"/rig "$work"/storage; do
    [ -f "$d/rig.conf" ] && "$rig" stop --dir "$d" >/dev/null 2>&1 || true
  done
  for pid in "${netns_pids[@]}"; do
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q redis-server; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for i in "${host_links[@]}"; do ip link del "$i" 2>/dev/null || true; done
  for i in "${netns_names[@]}"; do ip netns del "$i" 2>/dev/null || true; done
  if [ "$keep" = 0 ] && [ "$rc" = 0 ]; then
    rm -rf "$work"/rig "$work"/storage "$work"/netns
  else
    echo "# $nemesis: records kept in $work/logs" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "run.sh: line $LINENO: a command failed (status $?)" >&2' ERR

# shellcheck source=../fixture/ports.sh
. "$here/../fixture/ports.sh"

rand_ms() { echo $(( $1 + RANDOM % ($2 - $1 + 1) )); }
# A stray signal to a sleep must not end the run early.
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))" || true; }
deadline=0
time_left() { echo $(( deadline - SECONDS )); }
# scripts/rig reads /proc/<pid>/cmdline of a server that may just have been
# reaped; that one message is noise here, everything else is shown.
rig_do() {
  "$rig" "$1" "$2" --dir "$work/rig" 2>&1 >/dev/null | { grep -v '/cmdline: No such file' || true; } >&2
  return "${PIPESTATUS[0]}"
}

# ---------------------------------------------------------------------------
# The rig: 5 lock nodes (3 for netem, whose other 2 live in namespaces) and
# a storage node for the fenced writes, which no nemesis touches.
# The failover cases: G Sentinel-managed groups (a master and a replica
# each, nodes 2g-1 and 2g) and 3 sentinels, ports base..base+2G+2, and the
# storage node after them.
rig_nodes=5 rig_opts=() groups=0
case "$nemesis" in
  kill_aof|aof_freeze|soak|rw_kill_aof|sem_kill_aof|fair_kill_aof) rig_opts+=(--aof);;
  netem) rig_nodes=3;;
  failover_acks) groups=3;;
  failover_noacks) groups=1;;
esac
if [ "$groups" -gt 0 ]; then
  rig_nodes=$((2 * groups)) rig_opts=(--sentinel "$groups") storage_off=$((2 * groups + 3))
else
  rig_opts+=(--nodes "$rig_nodes") storage_off=5
fi
started=0
for attempt in 1 2 3 4 5; do
  base=$(free_base $((storage_off + 1))) || { echo "run.sh: no free ports" >&2; exit 2; }
  if "$rig" start --base-port "$base" --dir "$work/rig" "${rig_opts[@]}" >/dev/null &&
     "$rig" start --nodes 1 --base-port $((base + storage_off)) --dir "$work/storage" >/dev/null; then
    started=1; break
  fi
  for d in "$work"/rig "$work"/storage; do [ -f "$d/rig.conf" ] && "$rig" stop --dir "$d" || true; done
  rm -rf "$work"/rig "$work"/storage
  : "$attempt"
done
[ $started = 1 ] || { echo "run.sh: could not start the rig" >&2; exit 2; }
# clock, clock_far: node 3 runs with a fast clock, within the drift bound
# (1.005: its keys expire 0.5 % early, less than drift_factor's 1 %) or far
# outside it (4x). Its server is replaced by one
# started with the fastclock shim (libfaketime deadlocks with the jemalloc
# of Debian's redis-server), with the same config, pidfile and port, so
# scripts/rig still stops it.
if [[ "$nemesis" = clock* ]]; then
  if [ "$nemesis" = clock ]; then clock_rate=${SAFETY_CLOCK_RATE:-1.005}; else clock_rate=${SAFETY_CLOCK_FAR_RATE:-4}; fi
  fastclock=$(cd "$(dirname "$fastclock")" && pwd)/$(basename "$fastclock")
  rig_do kill 3
  (cd "$work/rig/node3" && FASTCLOCK_RATE=$clock_rate LD_PRELOAD=$fastclock redis-server "$work/rig/node3/redis.conf")
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p $((base + 2)) PING 2>/dev/null)" = PONG ] && break; sleep 0.1
  done
  [ "$(redis-cli -p $((base + 2)) PING 2>/dev/null)" = PONG ] || { echo "run.sh: fast-clock node did not start" >&2; exit 2; }
  node_us() { redis-cli -p $((base + 2)) TIME | tr '\n' ' ' | awk '{ printf "%.0f", $1 * 1000000 + $2 }'; }
  l1=$(now); n1=$(node_us); sleep 2; l2=$(now); n2=$(node_us)
  measured=$(awk -v a="$n1" -v b="$n2" -v c="$l1" -v d="$l2" 'BEGIN { printf "%.3f", (b - a) * 1000 / (d - c) }')
  note "node 3 runs its clock at ${clock_rate}x (measured ${measured}x over 2 s)"
  if [ "$(awk -v m="$measured" -v r="$clock_rate" 'BEGIN { print (r >= 1.5 && m < 1 + (r - 1) * 0.5) ? 1 : 0 }')" = 1 ]; then
    echo "run.sh: the fast clock is not in effect on node 3" >&2; exit 2
  fi
fi
uris=""
if [ "$groups" -gt 0 ]; then
  # One redis-sentinel:// URI per group, in group order (member g-1 is
  # group g); the list is split only before a scheme.
  uris=$("$rig" env --dir "$work/rig" | sed -n 's/^RIG_URIS=//p')
  [ -n "$uris" ] || { echo "run.sh: rig env gave no RIG_URIS" >&2; exit 2; }
else
  for i in $(seq 1 "$rig_nodes"); do uris="$uris${uris:+,}redis://127.0.0.1:$((base + i - 1))"; done
fi
storage_port=$((base + storage_off))
storage_uri="redis://127.0.0.1:$storage_port"

# netem: two more nodes, each in its own network namespace joined to the
# host by a veth pair, with delay, jitter and loss on both ends of the link.
netem_mode=""
start_netns_node() {
  local j=$1 tag ns hl nl sub ip port d
  tag=$(( $$ % 100000 ))
  ns="rlsafe${tag}n$j"; hl="rls${tag}h$j"; nl="rls${tag}n$j"
  sub=$(( ($$ / 7) % 200 + 20 ))
  ip="10.$sub.$j.2"; port=$(( base + 5 + j ))
  d="$work/netns/node$j"; mkdir -p "$d"
  ip netns add "$ns" || return 1
  netns_names+=("$ns")
  ip link add "$hl" type veth peer name "$nl" || return 1
  host_links+=("$hl")
  ip link set "$nl" netns "$ns"
  ip addr add "10.$sub.$j.1/30" dev "$hl"
  ip link set "$hl" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$ip/30" dev "$nl"
  ip netns exec "$ns" ip link set "$nl" up
  printf 'bind %s\nport %s\nprotected-mode no\ndaemonize yes\npidfile %s/redis.pid\nlogfile %s/redis.log\ndir %s\nsave ""\nappendonly no\n' \
    "$ip" "$port" "$d" "$d" "$d" >"$d/redis.conf"
  ip netns exec "$ns" redis-server "$d/redis.conf"
  for _ in $(seq 1 100); do [ -s "$d/redis.pid" ] && break; sleep 0.05; done
  [ -s "$d/redis.pid" ] || return 1
  netns_pids+=("$(cat "$d/redis.pid")")
  for _ in $(seq 1 100); do
    [ "$(redis-cli -h "$ip" -p "$port" PING 2>/dev/null)" = PONG ] && break; sleep 0.05
  done
  [ "$(redis-cli -h "$ip" -p "$port" PING 2>/dev/null)" = PONG ] || return 1
  uris="$uris,redis://$ip:$port"
  # Delay, jitter and loss on both directions of the link.
  if tc qdisc add dev "$hl" root netem delay 40ms 30ms distribution normal loss 3% 2>"$work/netns/tc.err" &&
     ip netns exec "$ns" tc qdisc add dev "$nl" root netem delay 40ms 30ms distribution normal loss 3% \
       2>>"$work/netns/tc.err"; then
    netem_mode=netem
  elif grep -q "qdisc kind is unknown" "$work/netns/tc.err"; then
    # This kernel has no sch_netem. A token bucket on the link (htb) is
    # what it offers: a slow link whose queue delays every reply; the
    # nemesis loop varies its rate to add jitter. No packet loss.
    tc qdisc add dev "$hl" root handle 1: htb default 10
    tc class add dev "$hl" parent 1: classid 1:10 htb rate 512kbit burst 2k quantum 1514
    ip netns exec "$ns" tc qdisc add dev "$nl" root handle 1: htb default 10
    ip netns exec "$ns" tc class add dev "$nl" parent 1: classid 1:10 htb rate 512kbit burst 2k quantum 1514
    netem_mode=htb
  else
    cat "$work/netns/tc.err" >&2
    return 1
  fi
}
if [ "$nemesis" = netem ]; then
  if ! ip netns add "rlsafe-probe-$$" 2>/dev/null; then
    echo "nemesis=netem skipped: needs CAP_NET_ADMIN (ip netns add was refused)"
    exit 77
  fi
  ip netns del "rlsafe-probe-$$"
  for j in 1 2; do
    start_netns_node "$j" || { echo "run.sh: could not set up namespace node $j" >&2; exit 2; }
  done
  if [ "$netem_mode" = htb ]; then
    note "kernel refuses tc netem (no sch_netem); impairing the 2 namespaced links with htb rate limits instead (delay and jitter from queueing, no loss)"
  fi
fi

# ---------------------------------------------------------------------------
# Workers.
names="safety-a,safety-b,safety-c"
wargs=(--uris "$uris" --storage "$storage_uri" --duration-ms $((seconds * 1000)))
case "$nemesis" in
  soak) names="soak-a,soak-b,soak-c,soak-d"
        wargs+=(--mode watchdog --watchdog-lease-ms 1500 --hold-min-ms 0 --hold-max-ms 20
                --wait-max-ms 300 --step-ms 10);;
  kill_nopersist) wargs+=(--mode mixed --lease-ms 3000 --hold-min-ms 50 --hold-max-ms 800
                          --wait-max-ms 400);;
  netem) wargs+=(--mode mixed --lease-ms 3000 --watchdog-lease-ms 3000 --node-timeout-ms 150
                 --hold-max-ms 300 --long-hold-ms 3000 --wait-max-ms 1000);;
  # Workers keep wanting a name until they get it (--stick), so that the
  # lockout around each majority freeze is measured from the first attempt.
  # Leases (5 s) outlast the freezes (1-2 s): a release that the frozen
  # nodes missed must be delivered after the thaw, not hidden by expiry.
  aof_freeze) wargs+=(--mode mixed --lease-ms 5000 --watchdog-lease-ms 5000 --hold-min-ms 5
                      --hold-max-ms 300 --long-hold-ms 2500 --wait-max-ms 600 --stick);;
  # Every grant acknowledged by the group's replica (WAIT 1, 250 ms). Some
  # holds last 1.5-3 s, so that a master dies under holders, not only
  # under waiters.
  failover_acks) wargs+=(--mode mixed --lease-ms 3000 --watchdog-lease-ms 3000 --hold-min-ms 5
                         --hold-max-ms 300 --long-hold-ms 3000 --wait-max-ms 800
                         --replica-acks 1 --replica-timeout-ms 250);;
  failover_noacks) wargs+=(--mode mixed --lease-ms 3000 --watchdog-lease-ms 3000 --hold-min-ms 5
                           --hold-max-ms 300 --long-hold-ms 2000 --wait-max-ms 800
                           --replica-acks 0);;
  # Shorter holds than the plain lock's cases, so that these shorter cases
  # still take a few hundred holds; one in eight still lasts up to 1.5 s,
  # through a few watchdog renewals.
  rw_*|sem_*|fair_*) wargs+=(--mode mixed --lease-ms 2000 --hold-min-ms 5 --hold-max-ms 120
                             --long-hold-ms 1500 --wait-max-ms 600);;
  *) wargs+=(--mode mixed --lease-ms 2000 --hold-min-ms 5 --hold-max-ms 300 --long-hold-ms 2500
             --wait-max-ms 600);;
esac
# Read-write locks: each hold a read or a write hold at random, on three
# names as the plain lock's cases (readers still meet: up to 4-6 at once).
# Semaphores: one of 2 permits per hold, on two names, so that four
# workers compete for each name's two permits. Their names differ from
# the plain lock's: a semaphore's key is a string, a lock's a hash.
# Fair locks: the plain lock's hash plus the queue, on three names of
# their own (eight workers, so waiters queue behind each other).
case "$nemesis" in
  rw_*) names="rw-a,rw-b,rw-c"; wargs+=(--kind mixed);;
  fair_*) names="fair-a,fair-b,fair-c"; wargs+=(--kind fair);;
  sem_*) names="sem-a,sem-b"; wargs+=(--permits 2);;
esac

start_worker() {
  local id=$1; shift
  "$worker_bin" --id "$id" --out "$work/logs/worker-$id.log" "$@" \
    2>>"$work/logs/worker-$id.err" &
  worker_pids+=($!)
  echo "$id $!" >>"$work/logs/pids"
}

deadline=$((SECONDS + seconds))
event start "$nemesis"
for id in $(seq 1 "$workers"); do start_worker "$id" "${wargs[@]}" --names "$names"; done

# ---------------------------------------------------------------------------
# Nemeses. Each loop is bounded by the deadline and an iteration cap, and
# leaves every node running and thawed when it ends.

# SIGKILL + immediate restart. The killed server stays a zombie until the
# init process reaps it, which can take seconds here; a zombie holds no
# socket, so the restart need not wait for the reaping.
crash_restart() {
  local pid n st
  pid=$("$rig" pid "$1" --dir "$work/rig" 2>/dev/null) || pid=""
  if [ -n "$pid" ]; then
    kill -KILL "$pid" 2>/dev/null || true
    for n in $(seq 1 300); do
      st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
      case "$st" in Z|X|gone) break;; esac
      sleep 0.01
    done
  fi
  rig_do restart "$1"
}

pick_nodes() { shuf -i "1-5" -n "$1" | tr '\n' ' '; }

freeze_loop() {
  local k=$1 on_lo=$2 on_hi=$3 off_lo=$4 off_hi=$5 n=0 set i
  while [ "$(time_left)" -gt $(( on_hi / 1000 + 2 )) ] && [ $n -lt 1000 ]; do
    n=$((n + 1))
    set=$(pick_nodes "$k")
    event freeze_begin $set
    for i in $set; do rig_do freeze "$i"; done
    event freeze_done $set
    sleep_ms "$(rand_ms "$on_lo" "$on_hi")"
    event thaw_begin $set
    for i in $set; do rig_do thaw "$i"; event thawed "$i"; done
    event thaw_done $set
    sleep_ms "$(rand_ms "$off_lo" "$off_hi")"
  done
}

restart_loop() {
  local k=$1 lo=$2 hi=$3 n=0 set i
  while [ "$(time_left)" -gt 4 ] && [ $n -lt 1000 ]; do
    n=$((n + 1))
    sleep_ms "$(rand_ms "$lo" "$hi")"
    set=$(pick_nodes "$k")
    event restart_begin $set
    for i in $set; do crash_restart "$i" & done
    wait_for_jobs
    event restart_done $set
  done
}

# Waits for the background rig commands only, never for the workers.
wait_for_jobs() {
  local j
  for j in $(jobs -p); do
    case " ${worker_pids[*]} " in *" $j "*) continue;; esac
    wait "$j" || true
  done
}

# A holder paused (SIGSTOP) far past its validity, then resumed: the lock
# must have passed to someone else only after the holder's validity ended,
# the holder learns of the loss on resume, and its stale write is rejected.
pause_round() {
  local vid=$1 ready="$work/logs/ready-$1" stop="$work/logs/stop-$1" vpid i pause_ms=4500
  start_worker "$vid" --uris "$uris" --storage "$storage_uri" --names safety-a --role victim \
    --mode watchdog --watchdog-lease-ms 1500 --duration-ms 30000 --wait-max-ms 10000 \
    --unchecked --ready-file "$ready" --stop-file "$stop"
  vpid=${worker_pids[-1]}
  for i in $(seq 1 300); do [ -f "$ready" ] && break; sleep 0.05; done
  [ -f "$ready" ] || { note "victim $vid never got the lock"; event victim_not_ready "$vid"; return 0; }
  sleep_ms "$(rand_ms 100 400)"
  event pause "$vid"
  kill -STOP "$vpid"
  sleep_ms "$pause_ms"
  event resume "$vid"
  kill -CONT "$vpid"
  sleep 1
  touch "$stop"
  for i in $(seq 1 100); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
}

# Restarting a majority without persistence while a lock is held: a second
# client gets it at once. The probe makes that happen on purpose once; the
# random restarts after it may or may not.
nopersist_probe() {
  local ready="$work/logs/ready-200" stop="$work/logs/stop-200" vpid i
  start_worker 200 --uris "$uris" --storage "$storage_uri" --names safety-det --role victim \
    --mode lease --lease-ms 8000 --duration-ms 6000 --wait-max-ms 5000 \
    --ready-file "$ready" --stop-file "$stop"
  vpid=${worker_pids[-1]}
  for i in $(seq 1 200); do [ -f "$ready" ] && break; sleep 0.05; done
  [ -f "$ready" ] || { note "probe victim never got the lock"; event victim_not_ready 200; return 0; }
  event restart_begin 1 2 3
  for i in 1 2 3; do crash_restart "$i" & done
  wait_for_jobs
  event restart_done 1 2 3
  "$worker_bin" --id 201 --out "$work/logs/worker-201.log" --uris "$uris" --storage "$storage_uri" \
    --names safety-det --role probe --mode lease --lease-ms 3000 --wait-max-ms 5000 \
    --hold-max-ms 300 2>>"$work/logs/worker-201.err" || true
  touch "$stop"
  for i in $(seq 1 100); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
}

# The quorum is decided by the first three answers, so two slow links
# alone never matter: one of the three plain nodes is frozen at times, and
# then every decision and renewal needs a node behind a slow link.
vary_links() {
  local rate ns j tag
  tag=$(( $$ % 100000 ))
  rate=$(rand_ms 256 2048)kbit
  for j in 1 2; do
    ns="rlsafe${tag}n$j"
    tc class change dev "rls${tag}h$j" parent 1: classid 1:10 htb rate "$rate" burst 2k quantum 1514 || true
    ip netns exec "$ns" tc class change dev "rls${tag}n$j" parent 1: classid 1:10 htb rate "$rate" \
      burst 2k quantum 1514 || true
  done
  event link_rate "$rate"
}

# Crash + restart (with AOF) of 1 or 2 nodes, then a majority frozen for
# 1-2 s and thawed, then a pause: the holds that survived the restart on
# disk must still exclude, and after each thaw the waiters must get the
# lock back within about a node timeout plus a retry delay.
aof_freeze_loop() {
  local n=0 set i
  while [ "$(time_left)" -gt 5 ] && [ $n -lt 1000 ]; do
    n=$((n + 1))
    sleep_ms "$(rand_ms 300 1000)"
    set=$(pick_nodes "$(rand_ms 1 2)")
    event restart_begin $set
    for i in $set; do crash_restart "$i" & done
    wait_for_jobs
    event restart_done $set
    sleep_ms "$(rand_ms 300 1000)"
    set=$(pick_nodes 3)
    # The three in parallel, so that the freeze starts and ends sharply.
    event freeze_begin $set
    for i in $set; do rig_do freeze "$i" & done
    wait_for_jobs
    event freeze_done $set
    sleep_ms "$(rand_ms 1000 2000)"
    event thaw_begin $set
    for i in $set; do { rig_do thaw "$i"; event thawed "$i"; } & done
    wait_for_jobs
    event thaw_done $set
    sleep_ms "$(rand_ms 1000 2000)"
  done
}

netem_loop() {
  local n=0 i
  while [ "$(time_left)" -gt 5 ] && [ $n -lt 1000 ]; do
    n=$((n + 1))
    [ "$netem_mode" = htb ] && vary_links
    sleep_ms "$(rand_ms 700 1500)"
    i=$(shuf -i 1-3 -n 1)
    event freeze_begin "$i"
    rig_do freeze "$i"
    event freeze_done "$i"
    [ "$netem_mode" = htb ] && vary_links
    sleep_ms "$(rand_ms 800 1500)"
    event thaw_begin "$i"
    rig_do thaw "$i"
    event thaw_done "$i"
  done
}

soak_loop() {
  local round=0 seg
  while [ "$(time_left)" -gt 6 ] && [ $round -lt 100 ]; do
    seg=$(( $(time_left) < 12 ? $(time_left) - 4 : 8 ))
    case $((round % 4)) in
      0) event phase freeze1; freeze_segment 1 "$seg";;
      1) event phase kill_aof; restart_segment "$seg";;
      2) event phase freeze2; freeze_segment 2 "$seg";;
      3) event phase none; sleep "$seg";;
    esac
    round=$((round + 1))
  done
}
freeze_segment() {
  local saved=$deadline
  deadline=$((SECONDS + $2 + 2))
  freeze_loop "$1" 200 800 200 600
  deadline=$saved
}
restart_segment() {
  local saved=$deadline
  deadline=$((SECONDS + $1 + 4))
  restart_loop 1 1000 2000
  deadline=$saved
}

# ---------------------------------------------------------------------------
# Failover nemeses (Sentinel rigs). Every wait is bounded; nodes are only
# signalled through scripts/rig (by node number, checked against its
# pidfile and /proc), never by name.

rcli() { timeout 5 redis-cli -p "$1" "${@:2}" 2>/dev/null; }
node_of_port() { echo $(( $1 - base + 1 )); }

# Whether the server on port $1 is a replica whose link to its master is up.
replica_synced() {
  local info
  info=$(rcli "$1" INFO replication | tr -d '\r') || return 1
  grep -q '^role:slave$' <<<"$info" && grep -q '^master_link_status:up$' <<<"$info"
}
wait_replica_synced() {
  local i
  for i in $(seq 1 150); do replica_synced "$1" && return 0; sleep 0.1; done
  return 1
}

# The killed master of group $1 (port $2) comes back, empty, and rejoins
# as a replica of the new master (port $3). scripts/rig restarts it as a
# master, and Sentinel would demote it only about 8 s later (it waits 4
# publish periods before it reconfigures a node that claims to be a
# master); an operator's restart script would make it a replica at once,
# and so does this. Nothing reaches it as a master in between: the clients
# find masters through the sentinels, which name the new one.
rejoin() {
  local g=$1 old=$2 new=$3
  rig_do restart "$(node_of_port "$old")" || { note "group $g: restart of port $old failed"; return 1; }
  rcli "$old" REPLICAOF 127.0.0.1 "$new" >/dev/null || true
  event restarted "$g" "$old"
  if wait_replica_synced "$old"; then
    event rejoined "$g" "$old" "$new"
  else
    note "group $g: port $old did not resync with $new within 15 s"
    event rejoin_timeout "$g" "$old"
  fi
}

# SIGKILL the master of group $1 (once one of the workers' names is held
# on it, waiting at most 2 s for that), wait (at most 30 s) until the
# sentinels agree on a promoted replica that answers as a master, and
# bring the old master back as a replica. Prints nothing; events record it.
failover_round() {
  local g=$1 m old new i r
  # A group whose replica is not in sync (a failover that went on after
  # ours, see sentinel_failovers) gets up to 15 s more first.
  r=$("$rig" replica-of "$g" --dir "$work/rig") || r=""
  [ -n "$r" ] && ! wait_replica_synced "$r" && note "group $g: replica $r not in sync before the kill"
  m=$("$rig" master-of "$g" --dir "$work/rig") || { note "group $g: no master known"; return 1; }
  for i in $(seq 1 20); do
    [ "$(rcli "$m" EXISTS ${names//,/ })" -gt 0 ] 2>/dev/null && break
    sleep 0.1
  done
  event kill_master "$g" "$m" "held=$(rcli "$m" EXISTS ${names//,/ })"
  old=$("$rig" kill-master "$g" --dir "$work/rig") || { note "group $g: kill-master failed"; return 1; }
  event killed "$g" "$old"
  if ! new=$("$rig" wait-failover "$g" "$old" 30 --dir "$work/rig"); then
    event failover_timeout "$g" "$old"
    note "group $g: no failover from port $old within 30 s"
    return 1
  fi
  event failover_done "$g" "$new"
  rejoin "$g" "$old" "$new"
}

# failover_acks: the master of each group in turn (group 1, 2, 3, 1, ...),
# the next one only after the last one's old master rejoined as a replica:
# with replica_acks = 1 a group without a replica cannot grant, so two
# groups down at once would leave no quorum (unavailable, not unsafe).
failover_loop() {
  local n=0 g
  sleep_ms 3000
  while [ "$(time_left)" -gt 12 ] && [ $n -lt 100 ]; do
    g=$(( n % groups + 1 )); n=$((n + 1))
    failover_round "$g" || break
    sleep_ms "$(rand_ms 1000 2000)"
  done
  [ $n -ge "$groups" ] || note "only $n of $groups groups lost their master (too little time)"
}

# failover_noacks: the forced race on one group. $1: replica_acks of the
# victim and the probe; $2, $3: their worker ids; $4: the lock name.
#  1. the replica is frozen (SIGSTOP) and the master drops its replication
#     link (CLIENT KILL TYPE replica). Freezing alone is not enough: what
#     the master sends to a frozen replica waits in the replica's socket
#     buffer, and it reads it all when it runs again, before it notices
#     that the master is gone, so it would be promoted with the hold.
#  2. the victim acquires on the master (a lease of 15 s, writing through
#     fencing all the while);
#     with replica_acks = 0 it is granted at once. Then the master is
#     SIGKILLed, the replica thawed: Sentinel promotes it without the hold,
#     and the probe (a fresh client) acquires what the victim still holds.
#     With replica_acks = 1 the grant cannot be acknowledged while the
#     replica is frozen: the victim must keep waiting (its attempts fail
#     with REDLOCK_EREPLICAS) until the replica is thawed 2 s later and
#     resynchronised from the master's backlog; then the master is killed
#     the same way, and the promoted replica must still refuse the probe.
forced_race() {
  local acks=$1 vid=$2 pid=$3 name=$4 m r ready stop vpid i new
  ready="$work/logs/ready-$vid" stop="$work/logs/stop-$vid"
  m=$("$rig" master-of 1 --dir "$work/rig") || { note "race $vid: no master known"; return 1; }
  r=$("$rig" replica-of 1 --dir "$work/rig")
  wait_replica_synced "$r" || { note "race $vid: replica $r not in sync"; return 1; }
  event race_begin "$vid" "acks=$acks" "master=$m" "replica=$r"
  rig_do freeze "$(node_of_port "$r")"
  event replica_frozen "$vid" "$r"
  rcli "$m" CLIENT KILL TYPE replica >/dev/null || true
  event link_cut "$vid" "$m"
  start_worker "$vid" --uris "$uris" --storage "$storage_uri" --names "$name" --role victim \
    --mode lease --lease-ms 15000 --duration-ms 14000 --wait-max-ms 8000 \
    --replica-acks "$acks" --replica-timeout-ms 200 --ready-file "$ready" --stop-file "$stop"
  vpid=${worker_pids[-1]}
  if [ "$acks" -gt 0 ]; then
    # The victim must not get the lock while the replica cannot hear of it.
    sleep_ms 2000
    [ -f "$ready" ] && event granted_while_frozen "$vid"
    event replica_thaw "$vid" "$r"
    rig_do thaw "$(node_of_port "$r")"
    for i in $(seq 1 200); do [ -f "$ready" ] && break; sleep 0.05; done
  else
    for i in $(seq 1 200); do [ -f "$ready" ] && break; sleep 0.05; done
  fi
  if [ ! -f "$ready" ]; then
    note "race $vid: the victim never got the lock"; event victim_not_ready "$vid"
    [ "$acks" -gt 0 ] || { event replica_thaw "$vid" "$r"; rig_do thaw "$(node_of_port "$r")"; }
    touch "$stop"
    return 0
  fi
  [ "$acks" -gt 0 ] && { wait_replica_synced "$r" || note "race $vid: replica $r did not resync"; }
  event kill_master 1 "$m" "race=$vid"
  "$rig" kill-master 1 --dir "$work/rig" >/dev/null || { note "race $vid: kill-master failed"; return 1; }
  event killed 1 "$m"
  if [ "$acks" = 0 ]; then
    event replica_thaw "$vid" "$r"
    rig_do thaw "$(node_of_port "$r")"
  fi
  if ! new=$("$rig" wait-failover 1 "$m" 30 --dir "$work/rig"); then
    event failover_timeout 1 "$m"; note "race $vid: no failover from port $m within 30 s"
    touch "$stop"; return 1
  fi
  event failover_done 1 "$new"
  # A fresh client: it finds the new master through the sentinels. It asks
  # for no acknowledgement (the new master has no replica yet): it only
  # tests whether the promoted replica still has the victim's hold.
  event probe_begin "$pid"
  timeout 30 "$worker_bin" --id "$pid" --out "$work/logs/worker-$pid.log" --uris "$uris" \
    --storage "$storage_uri" --names "$name" --role probe --mode lease --lease-ms 3000 \
    --wait-max-ms 3000 --hold-max-ms 300 --replica-acks 0 \
    2>>"$work/logs/worker-$pid.err" || true
  event probe_end "$pid"
  touch "$stop"
  for i in $(seq 1 100); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
  rejoin 1 "$m" "$new"
}

# How many failovers the sentinels made per group, for the kills the nemesis
# made: a loaded machine can make a sentinel see a just promoted master as
# down for down-after-milliseconds (1 s) and fail over again, to the old
# master that is still resynchronising. Read from the sentinels' logs.
sentinel_failovers() {
  local g out="" k s c n
  for g in $(seq 1 "$groups"); do
    k=$(awk '$2 == "killed" && $3 == '"$g"'' "$events" | wc -l)
    c=0
    for s in 1 2 3; do
      n=$(grep -c "+switch-master group$g " "$work/rig/sentinel$s/sentinel.log" 2>/dev/null) || n=0
      [ "$n" -gt "$c" ] && c=$n
    done
    out="$out${out:+, }group $g: $c for $k kills"
  done
  echo "sentinel failovers: $out"
}

noacks_races() {
  sleep_ms 2000
  if [ "$(time_left)" -gt 12 ]; then forced_race 0 200 201 safety-det || true; fi
  sleep_ms 1000
  if [ "$(time_left)" -gt 12 ]; then
    forced_race 1 300 301 safety-det2 || true
  else
    note "no time left for the race with replica_acks = 1"
  fi
  [ "$(time_left)" -le 0 ] || sleep "$(time_left)"
}

case "$nemesis" in
  none) sleep "$seconds";;
  failover_acks) failover_loop;;
  failover_noacks) noacks_races;;
  freeze1) freeze_loop 1 300 1500 300 1000;;
  freeze2) freeze_loop 2 300 1500 300 1000;;
  freeze3) freeze_loop 3 1500 3000 1000 2000;;
  kill_aof) restart_loop 1 1500 3000;;
  # A read-write or fair lock needs a majority, as the plain lock: 2 of 5
  # frozen leave exactly one. A semaphore of 2 permits on 5 nodes needs 4 grants
  # (q > K*N/(K+1)): 1 frozen node leaves exactly that, 2 would leave it
  # unavailable and only test refusals.
  rw_freeze|fair_freeze) freeze_loop 2 300 1500 300 1000;;
  sem_freeze) freeze_loop 1 300 1500 300 1000;;
  rw_kill_aof|sem_kill_aof|fair_kill_aof) restart_loop 1 1500 3000;;
  aof_freeze) aof_freeze_loop;;
  kill_nopersist)
    sleep_ms "$(rand_ms 2000 4000)"
    nopersist_probe
    restart_loop 3 2000 3500;;
  netem) netem_loop;;
  clock|clock_far) sleep "$seconds";;
  pause_holder)
    vid=100
    sleep_ms 2000
    while [ "$(time_left)" -gt 9 ] && [ $vid -lt 110 ]; do
      pause_round "$vid"
      vid=$((vid + 1))
      sleep 1
    done;;
  soak) soak_loop;;
esac
event nemesis_end

# Every worker ends at its duration; give them a bounded grace period.
for pid in "${worker_pids[@]}"; do
  for _ in $(seq 1 $(( (seconds + 60) * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
status=0
for pid in "${worker_pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null; then
    echo "run.sh: worker $pid did not finish" >&2; status=2
  elif ! wait "$pid"; then
    echo "run.sh: worker $pid failed:" >&2; status=2
  fi
done
event end
for f in "$work"/logs/worker-*.err; do
  [ -s "$f" ] && { echo "run.sh: stderr of $(basename "$f"):" >&2; head -n 20 "$f" >&2; }
done

# What the storage finally holds, to compare with what the writers saw.
for n in ${names//,/ } safety-det safety-det2; do
  printf '%s %s\n' "$n" "$(redis-cli -p "$storage_port" HMGET "res:{$n}" fence_token value | tr '\n' ' ')"
done >"$work/logs/storage.final"

[ "$status" = 0 ] || exit "$status"
extra=()
[ "$netem_mode" = htb ] && extra+=(--note "netem=htb-fallback")
[ "$groups" -gt 0 ] && extra+=(--note "$(sentinel_failovers)")
# The summary line also stays in the work directory, for tables.
verdict=0
python3 "$checker" --nemesis "$nemesis" --dir "$work/logs" "${extra[@]}" >"$work/checker.out" || verdict=$?
cat "$work/checker.out"
grep '^nemesis=' "$work/checker.out" >"$work/summary.txt" || true
exit "$verdict"
