#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Conditions in single quotes are expanded by wait_until, when it evaluates them.
# shellcheck disable=SC2016
# redlock exec and status for read-write locks (--shared, --write) and
# semaphores (--permits K), against a private five-node rig.
#   cli_kinds_test.sh CASE REDLOCK_BINARY RIG_SCRIPT
# Each CASE is one CTest test (cli_CASE); see tests/cli/CMakeLists.txt.
# Overlap is proven with marker files the commands write while they hold,
# never with timings; every wait is bounded.
set -euo pipefail

CASE=${1:?usage: cli_kinds_test.sh CASE REDLOCK RIG}
REDLOCK=${2:?}
RIG=${3:?}
export REDLOCK_RIG_SCRIPT=$RIG
unset REDLOCK_NODES REDLOCK_PASSWORD XDG_CONFIG_HOME
export REDLOCK_CONFIG=/dev/null
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# Waits up to $2 seconds for the shell condition $1 to hold.
wait_until() {
  local end=$(($(now_ms) + $2 * 1000))
  until eval "$1"; do
    [ "$(now_ms)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# A reader command: marks that it runs (TAG.in), waits until its partner
# runs too (PARTNER.in) - only possible if both hold at once - and then
# for the file "go", marks that it is about to end (TAG.out) and exits 0;
# 3 if the partner never came, 4 if "go" never came (20 s each).
write_reader() {
  cat >"$WORK/reader.sh" <<'EOF'
#!/usr/bin/env bash
dir=$1 tag=$2 partner=$3 i=0
touch "$dir/$tag.in"
while [ ! -e "$dir/$partner.in" ]; do
  i=$((i + 1)); [ $i -le 400 ] || exit 3; sleep 0.05
done
i=0
while [ ! -e "$dir/go" ]; do
  i=$((i + 1)); [ $i -le 400 ] || exit 4; sleep 0.05
done
touch "$dir/$tag.out"
EOF
  chmod +x "$WORK/reader.sh"
}

# A writer command: records whether any reader was still inside when it
# started (a reader that marked TAG.in but not yet TAG.out), then marks
# that it ran.
write_writer() {
  cat >"$WORK/writer.sh" <<'EOF'
#!/usr/bin/env bash
dir=$1 tag=$2
for f in "$dir"/*.in; do
  [ -e "$f" ] || continue
  [ -e "${f%.in}.out" ] || echo "$tag started while ${f##*/} was inside" >>"$dir/overlap"
done
touch "$dir/$tag.ran"
EOF
  chmod +x "$WORK/writer.sh"
}

# Starts `redlock exec ARGS...` in the background under track.py (TAG's
# status in $WORK/TAG.status, its stderr in $WORK/TAG.err).
start_exec() {
  local tag=$1
  shift
  track "$tag" "$REDLOCK" "$@" 2>"$WORK/$tag.err"
}

# The tracked exec TAG ended (within 30 s) with exit status $2.
expect_tracked() {
  wait_tracked "$1" 30 || fail "$1 did not end: $(cat "$WORK/$1.err")"
  [ "$TRACK_STATUS" = "exit $2" ] || fail "$1: $TRACK_STATUS, expected exit $2: $(cat "$WORK/$1.err")"
}

# Two --shared commands hold the lock at once; the plain lock and --write
# are refused while they do; a plain exec that waits runs only after both
# readers ended; a waiting --write keeps new readers out; a lost read hold
# ends the command like a lost lock.
case_shared() {
  rig_up
  write_reader
  write_writer
  start_exec r1 exec rw --shared -- "$WORK/reader.sh" "$WORK" r1 r2
  start_exec r2 exec rw --shared -- "$WORK/reader.sh" "$WORK" r2 r1
  wait_until '[ -e "$WORK/r1.in" ] && [ -e "$WORK/r2.in" ]' 20 || fail "the readers did not both start"
  note "two exec --shared run their commands at the same time"

  run exec rw --wait 0 -- touch "$WORK/plain.ran"
  expect_rc 75 "plain exec while two readers hold"
  run exec rw --write --wait 0 -- touch "$WORK/write.ran"
  expect_rc 75 "exec --write while two readers hold"
  if [ -e "$WORK/plain.ran" ] || [ -e "$WORK/write.ran" ]; then fail "a writer ran beside the readers"; fi
  run exec rw --shared --wait 0 -- true
  expect_rc 0 "a third reader beside two"
  note "plain lock and --write refused (75) while readers hold; a third reader gets in"

  # A plain exec that waits: it must start only after both readers ended.
  start_exec w exec rw -- "$WORK/writer.sh" "$WORK" w
  # Waiting, it listens for the readers' release on the lock's channel.
  wait_until '[ "$(redis-cli -p "$BASE" PUBSUB NUMSUB "redisson_lock__channel:{rw}" | sed -n 2p)" -ge 1 ]' 10 ||
    fail "the plain exec is not waiting: $(cat "$WORK/w.err")"
  [ ! -e "$WORK/w.ran" ] || fail "the plain exec ran while the readers held"
  touch "$WORK/go"
  expect_tracked r1 0
  expect_tracked r2 0
  expect_tracked w 0
  [ -e "$WORK/w.ran" ] || fail "the waiting writer never ran"
  [ ! -e "$WORK/overlap" ] || fail "$(cat "$WORK/overlap")"
  # Releases return at a quorum; the other nodes follow within moments.
  wait_until '[ "$(keys_on_nodes rw)" = 0 ]' 5 || fail "keys left after the readers and the writer"
  note "a waiting plain exec ran after both readers ended, never beside them"

  # A waiting --write keeps new readers out: with one reader inside and a
  # writer waiting (its mark set for its long wait), a new reader times out.
  rm -f "$WORK"/*.in "$WORK"/*.out "$WORK/go"
  start_exec r3 exec rw2 --shared -- "$WORK/reader.sh" "$WORK" r3 r3
  wait_file "$WORK/r3.in" 20 || fail "reader r3 did not start"
  start_exec w2 exec rw2 --write -- "$WORK/writer.sh" "$WORK" w2
  wait_until '[ "$(redis-cli -p "$BASE" PTTL "redlock_rwwait:{rw2}")" -gt 5000 ]' 15 ||
    fail "the waiting writer set no waiting-writer mark"
  run exec rw2 --shared --wait 1s -- touch "$WORK/late-reader.ran"
  expect_rc 75 "a new reader while a --write waits"
  [ ! -e "$WORK/late-reader.ran" ] || fail "a new reader got in before the waiting writer"
  touch "$WORK/go"
  expect_tracked r3 0
  expect_tracked w2 0
  [ -e "$WORK/w2.ran" ] || fail "the waiting --write never ran"
  [ ! -e "$WORK/overlap" ] || fail "$(cat "$WORK/overlap")"
  note "a waiting --write keeps new readers out (75), then runs alone"

  # A read hold lost while the command runs: SIGTERM, exit 76.
  "$REDLOCK" --watchdog-lease 900 exec rw3 --shared -- sleep 30 2>"$WORK/lost.err" &
  pid=$!
  bg_add "$pid"
  wait_until '[ "$(keys_on_nodes rw3)" -ge 3 ]' 20 || fail "the read hold was not taken"
  del_everywhere rw3
  wait_pid "$pid" 20 || fail "exec --shared did not end after its read hold was lost"
  [ "$WAIT_RC" = 76 ] || fail "exit $WAIT_RC after a lost read hold, expected 76: $(cat "$WORK/lost.err")"
  grep -q "read hold lost" "$WORK/lost.err" || fail "no loss message: $(cat "$WORK/lost.err")"
  note "a lost read hold: exit 76"
}

# At most K of many concurrent commands hold a permit, and K of them did
# run at once; --permit-count takes several; a fixed --lease and a
# vanished permit are losses.
case_permits() {
  rig_up
  cat >"$WORK/job.sh" <<'EOF'
#!/usr/bin/env bash
# Appends "start I NS" and "end I NS"; in between waits (up to 2 s) until
# two other jobs run too: holders overlap as much as the permits let them,
# so one permit too many would show.
log=$1 i=$2 n=0
running() { echo $(($(grep -c '^start' "$log") - $(grep -c '^end' "$log"))); }
echo "start $i $(date +%s%N)" >>"$log"
while [ "$(running)" -lt 3 ] && [ $n -lt 40 ]; do n=$((n + 1)); sleep 0.05; done
echo "end $i $(date +%s%N)" >>"$log"
EOF
  chmod +x "$WORK/job.sh"
  for i in 1 2 3 4; do
    start_exec "j$i" exec sem --permits 2 -- "$WORK/job.sh" "$WORK/jobs.log" "$i"
  done
  for i in 1 2 3 4; do expect_tracked "j$i" 0; done
  python3 - "$WORK/jobs.log" <<'EOF' || fail "permits: $(cat "$WORK/jobs.log")"
import sys
events = []
for line in open(sys.argv[1]):
    kind, job, ns = line.split()
    events.append((int(ns), 0 if kind == "end" else 1, kind, job))
jobs = {e[3] for e in events}
assert len(jobs) == 4 and len(events) == 8, "not every job ran once: %s" % events
running = peak = 0
# Ends sort before starts at the same nanosecond: those did not overlap.
for _, _, kind, _ in sorted(events):
    running += 1 if kind == "start" else -1
    peak = max(peak, running)
assert peak <= 2, "%d commands held a permit at once, limit 2" % peak
assert peak == 2, "no two commands ever held a permit at once"
print("peak", peak)
EOF
  wait_until '[ "$(redis-cli -p "$BASE" ZCARD "{sem}:timeout")" = 0 ] && [ "$(redis-cli -p "$BASE" GET sem)" = 2 ]' 5 ||
    fail "permits left taken after the jobs: $(redis-cli -p "$BASE" GET sem)"
  note "4 jobs, 2 permits: at most 2 ran at once, and 2 did"

  # --permit-count 2 takes both permits: a second holder is refused.
  run exec sem --permits 2 --permit-count 2 -- sh -c "$REDLOCK exec sem --permits 2 --wait 0 -- true; echo \$?"
  expect_rc 0 "--permit-count 2"
  [ "$(cat "$WORK/out")" = 75 ] || fail "a permit was free beside --permit-count 2: $(cat "$WORK/out") $(cat "$WORK/err")"
  note "--permit-count 2 holds both permits"

  # A fixed lease that runs out is a loss of the permit.
  run exec sem --permits 2 --lease 800 --on-lost kill -- sleep 20
  expect_rc 76 "a permit's fixed lease ran out"
  grep -q "permit lost" "$WORK/err" || fail "no loss message: $(cat "$WORK/err")"
  # The permit vanishing from the nodes while the command runs, too.
  "$REDLOCK" --watchdog-lease 900 exec sem2 --permits 1 -- sleep 30 2>"$WORK/lost.err" &
  pid=$!
  bg_add "$pid"
  wait_until '[ "$(keys_on_nodes "{sem2}:timeout")" -ge 3 ]' 20 || fail "the permit was not taken"
  del_everywhere "{sem2}:timeout"
  wait_pid "$pid" 20 || fail "exec --permits did not end after its permit vanished"
  [ "$WAIT_RC" = 76 ] || fail "exit $WAIT_RC after a lost permit, expected 76: $(cat "$WORK/lost.err")"
  grep -q "permit lost" "$WORK/lost.err" || fail "no loss message: $(cat "$WORK/lost.err")"
  note "a lost permit (fixed lease, vanished entry): exit 76"

  # The smallest safe quorum for K permits, and a smaller one refused.
  run exec sem3 --permits 2 -v -- true
  expect_rc 0 "exec --permits 2"
  grep -q "quorum 4" "$WORK/err" || fail "2 permits over 5 nodes should need 4: $(cat "$WORK/err")"
  run -q 3 exec sem3 --permits 2 -- true
  expect_rc 64 "exec --permits 2 with --quorum 3"
  expect_one_error_line "exec --permits 2 with --quorum 3"
  grep -q "needs at least 4" "$WORK/err" || fail "unsafe quorum: $(cat "$WORK/err")"
  note "2 permits on 5 nodes: quorum 4; --quorum 3 refused (64)"
}

# Runs `status --json ARGS...` into $WORK/status.json (exit status in RC,
# which expect_rc reads).
status_json() {
  # shellcheck disable=SC2034
  RC=0
  "$REDLOCK" status --json "$@" >"$WORK/status.json" 2>"$WORK/err" || RC=$?
}

# Whether status shows the semaphore sm of 3 permits with none taken.
sm_released() {
  status_json sm --permits 3
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["holder_list"] == [] and s["available_on_quorum"] == 3, s' \
    "$WORK/status.json" 2>/dev/null
}

# status shows the readers of a read-write lock, its writer, and a
# semaphore's permits with their holders. A hold is granted once a quorum
# of nodes (3 of 5; 4 for 3 permits) has it: the others may follow later.
case_status_kinds() {
  rig_up
  write_reader
  start_exec r1 exec st --shared -- "$WORK/reader.sh" "$WORK" r1 r2
  start_exec r2 exec st --shared -- "$WORK/reader.sh" "$WORK" r2 r1
  wait_until '[ -e "$WORK/r1.in" ] && [ -e "$WORK/r2.in" ]' 20 || fail "the readers did not both start"
  # mode, two readers and their :gen fields, on the first node.
  wait_until '[ "$(redis-cli -p "$BASE" HLEN st)" = 5 ]' 5 || fail "the first node lacks a reader"
  redis-cli -p "$BASE" HKEYS st >"$WORK/fields"
  status_json st
  expect_rc 0 "status of a read-held lock"
  python3 - "$WORK/status.json" "$WORK/fields" <<'EOF' || fail "readers: $(cat "$WORK/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
fields = [f.strip() for f in open(sys.argv[2])]
readers = [f for f in fields if f != "mode" and not f.endswith(":gen")]
assert len(readers) == 2 and not any(r.endswith(":write") for r in readers), fields
assert s["type"] == "lock" and s["mode"] == "read", s
assert s["holders_on_quorum"] == 2, s
assert all(n["reachable"] and n["holders"] <= 2 for n in s["nodes"]), s
assert s["holder_list"], s
for h in s["holder_list"]:
    assert h["field"] in readers and not h["writer"] and h["count"] == 1, h
assert any(h["nodes"] >= 3 and h["held_by_quorum"] for h in s["holder_list"]), s
# Read holds record no holder facts.
assert s["host"] is None and s["command"] is None, s
EOF
  run status st
  expect_rc 0 "status (text) of a read-held lock"
  grep -q "^read-write lock, read holds: 2 holder(s) on a quorum$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  grep -Eq "^  reader .*: count 1 on [345] of 5 node\(s\)$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  touch "$WORK/go"
  expect_tracked r1 0
  expect_tracked r2 0
  note "status lists the read holds"

  run exec st --write -- sh -c "$REDLOCK status --json st"
  expect_rc 0 "status inside exec --write"
  python3 - "$WORK/out" <<'EOF' || fail "writer: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["mode"] == "write" and s["held_by_quorum"], s
w = [h for h in s["holder_list"] if h["writer"]]
assert len(w) == 1 and w[0]["field"].endswith(":write") and w[0]["nodes"] >= 3, s
assert s["holder"] == w[0]["field"], s
# The write hold records its holder facts.
assert s["command"].startswith("sh -c ") and s["pid"] > 0, s
EOF
  run exec st --write -- "$REDLOCK" status st
  grep -q "^read-write lock, write hold:$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  grep -Eq "^  writer .*:write: count 1 on [345] of 5 node\(s\)$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  run exec st -- "$REDLOCK" status --json st
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["mode"] is None and s["held_by_quorum"], s' \
    "$WORK/out" || fail "plain lock: $(cat "$WORK/out")"
  note "status shows the writer; a plain lock has no mode"

  # A semaphore of 3 permits: one holder of 2, one of 1.
  cat >"$WORK/hold.sh" <<'EOF'
#!/usr/bin/env bash
touch "$1.in"
i=0
while [ ! -e "$1.stop" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
EOF
  chmod +x "$WORK/hold.sh"
  start_exec p2 exec sm --permits 3 --permit-count 2 -- "$WORK/hold.sh" "$WORK/p2"
  start_exec p1 exec sm --permits 3 -- "$WORK/hold.sh" "$WORK/p1"
  wait_until '[ -e "$WORK/p1.in" ] && [ -e "$WORK/p2.in" ]' 20 || fail "the permit holders did not start"
  wait_until '[ "$(redis-cli -p "$BASE" ZCARD "{sm}:timeout")" = 3 ]' 5 || fail "the first node lacks a permit"
  redis-cli -p "$BASE" ZRANGE "{sm}:timeout" 0 -1 >"$WORK/permits"
  for args in "--permits 3" ""; do
    # shellcheck disable=SC2086
    status_json sm $args
    expect_rc 0 "status $args of a semaphore"
    python3 - "$WORK/status.json" "$WORK/permits" "$args" <<'EOF' || fail "status $args: $(cat "$WORK/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
members = [m.strip() for m in open(sys.argv[2]) if m.strip()]
given = sys.argv[3] != ""
assert s["type"] == "semaphore" and s["quorum"] == 4, s
assert (s["limit"], s["limit_estimate"]) == ((3, None) if given else (None, 3)), s
assert len(members) == 3, members
full = [n for n in s["nodes"] if n["available"] == 0 and n["permits_taken"] == 3 and n["holders"] == 2]
assert all(n["reachable"] for n in s["nodes"]) and len(full) >= 4, s
held = sorted(h["permits"] for h in s["holder_list"])
assert held == [1, 2], s
for h in s["holder_list"]:
    # Each holder's id starts the ids of the permits it took.
    mine = [m for m in members if m.startswith(h["id"] + ":")]
    assert len(mine) == h["permits"], (h, members)
    assert h["nodes"] >= 4 and h["held_by_quorum"] and 0 < h["ms_left"] <= 30000, h
assert s["permits_held_by_quorum"] == 3 and s["available_on_quorum"] == 0, s
EOF
  done
  run status sm --permits 3
  expect_rc 0 "status --permits (text)"
  grep -q "^semaphore 'sm' on 5 node(s), 3 permits, quorum 4$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  grep -q "^permits held on a quorum: 3 of 3; available on a quorum: 0$" "$WORK/out" || fail "text: $(cat "$WORK/out")"
  touch "$WORK/p1.stop" "$WORK/p2.stop"
  expect_tracked p1 0
  expect_tracked p2 0
  wait_until sm_released 5 || fail "released semaphore: $(cat "$WORK/status.json")"
  note "status shows a semaphore's permits and holders, with or without --permits"
}

# The permit of a redlock that was SIGKILLed returns by itself when its
# lease ends; until then it stays taken.
case_permits_kill() {
  rig_up
  "$REDLOCK" --watchdog-lease 4s exec pk --permits 1 -- sleep 60 2>"$WORK/killed.err" &
  pid=$!
  bg_add "$pid"
  wait_until '[ "$(keys_on_nodes "{pk}:timeout")" -ge 3 ]' 20 || fail "the permit was not taken"
  # The renewals went on: the lease is the 4 s watchdog lease, not less.
  sleep 2
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  run exec pk --permits 1 --wait 0 -- true
  expect_rc 75 "the dead holder's permit is still taken"
  t0=$(now_ms)
  run exec pk --permits 1 --wait 20s -- true
  t=$(($(now_ms) - t0))
  expect_rc 0 "the dead holder's permit returned"
  note "a SIGKILLed holder's permit came back after its lease ($t ms later)"
}

# Fair locks: three `exec --fair` waiters that queued one after another
# behind a holder run in that order (each appends its tag to a file), a
# waiter whose --wait ends leaves the queue on every node at once, and the
# queue is empty when all are done.
queue_len_min() {
  local n=99 p l
  for p in $PORTS; do
    l=$(redis-cli -p "$p" LLEN "redisson_lock_queue:{fq}")
    [ "$l" -lt "$n" ] && n=$l
  done
  echo "$n"
}

case_fair() {
  rig_up
  start_exec holder exec fq --fair -- sh -c 'touch "$1/held"; i=0; while [ ! -e "$1/go" ]; do i=$((i+1)); [ $i -le 400 ] || exit 4; sleep 0.05; done' sh "$WORK"
  wait_until '[ -e "$WORK/held" ]' 20 || fail "the holder did not get the lock"
  for w in w1 w2 w3; do
    start_exec "$w" exec fq --fair --wait 30s -- sh -c 'echo "$1" >>"$2/order"' sh "$w" "$WORK"
    want=${w#w}
    # Each waiter is queued on every node before the next one starts.
    wait_until '[ "$(queue_len_min)" -ge '"$want"' ]' 20 || fail "$w did not queue"
  done
  # A waiter keeps its place (its ticket) for its whole --wait: it does not
  # leave and queue again behind later arrivals.
  local tickets p
  tickets=$(for p in $PORTS; do redis-cli -p "$p" ZRANGE "redlock_fair:{fq}" 0 -1 WITHSCORES; done)
  sleep 2.5
  [ "$(for p in $PORTS; do redis-cli -p "$p" ZRANGE "redlock_fair:{fq}" 0 -1 WITHSCORES; done)" = "$tickets" ] ||
    fail "fair waiters took new tickets while they waited"
  # A waiter that gives up leaves every queue at once.
  start_exec quitter exec fq --fair --wait 1s -- true
  wait_until '[ "$(queue_len_min)" -ge 4 ]' 20 || fail "the quitter did not queue"
  expect_tracked quitter 75
  wait_until '[ "$(queue_len_min)" -le 3 ]' 2 || fail "the quitter's place stayed in a queue"
  touch "$WORK/go"
  expect_tracked holder 0
  for w in w1 w2 w3; do expect_tracked "$w" 0; done
  [ "$(tr '\n' ' ' <"$WORK/order")" = "w1 w2 w3 " ] ||
    fail "fair waiters ran out of order: $(tr '\n' ' ' <"$WORK/order")"
  [ "$(keys_on_nodes "redisson_lock_queue:{fq}")" = 0 ] || fail "a queue was left behind"
  note "three --fair waiters ran in arrival order; a waiter that gave up left the queue at once"
}

"case_$CASE"
echo "PASS: cli_$CASE"
