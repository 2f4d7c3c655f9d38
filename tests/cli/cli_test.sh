#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Tests of the redlock command-line tool against a private five-node rig.
#   cli_test.sh CASE REDLOCK_BINARY RIG_SCRIPT [MAN_PAGE]
# Each CASE is one CTest test (cli_CASE); see tests/cli/CMakeLists.txt.
set -euo pipefail

CASE=${1:?usage: cli_test.sh CASE REDLOCK RIG [MAN_PAGE]}
REDLOCK=${2:?}
RIG=${3:?}
MAN_PAGE=${4:-}
export REDLOCK_RIG_SCRIPT=$RIG
unset REDLOCK_NODES REDLOCK_PASSWORD XDG_CONFIG_HOME
# No configuration file of the machine or the user applies to a test, unless
# the test says so.
export REDLOCK_CONFIG=/dev/null
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# A child that marks that it started, and on TERM/HUP/INT writes the signal
# name and exits 3; otherwise it ends by itself after at most 30 s.
write_trap_child() {
  cat >"$WORK/child.sh" <<'EOF'
#!/usr/bin/env bash
dir=$1
for s in TERM HUP INT; do trap "echo $s > '$dir/got'; exit 3" $s; done
echo "$REDLOCK_NAME $REDLOCK_VALIDITY_MS" > "$dir/started"
i=0
while [ $i -lt 300 ] && [ ! -e "$dir/stop" ]; do sleep 0.1; i=$((i + 1)); done
exit 0
EOF
  chmod +x "$WORK/child.sh"
}

case_usage() {
  local q9="redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3,redis://127.0.0.1:4,redis://127.0.0.1:5"
  # Each line: what the error must mention | the arguments.
  while IFS='|' read -r want args; do
    [ -n "$args" ] || continue
    # shellcheck disable=SC2086
    eval "run $args"
    expect_rc 64 "redlock $args"
    expect_one_error_line "redlock $args"
    grep -q -- "$want" "$WORK/err" || fail "redlock $args: error does not mention '$want': $(cat "$WORK/err")"
  done <<EOF
port 99999|-n redis://127.0.0.1:99999 status x
unknown scheme|-n foo://127.0.0.1:1 status x
empty node URI|-n redis://127.0.0.1:1,,redis://127.0.0.1:2 status x
every node needs its scheme|-n redis://127.0.0.1:1,127.0.0.1:2 status x
no master name|-n redis-sentinel://127.0.0.1:1,127.0.0.1:2 status x
sentinel 2: empty host|-n redis-sentinel://127.0.0.1:1,#m status x
--nodes|-n 'redis://' status x
--nodes|-n 'redis://127.0.0.1:abc' exec x -- true
unknown option '--bogus'|--bogus status x
unknown option '--frob'|exec x --frob -- true
unknown option '-Z'|status x -Z
--quorum|--quorum 0 status x
--quorum|-q 0 exec x -- true
--quorum|--quorum 9 -n $q9 status x
more than the 5 node|-n $q9 exec x --quorum 9 -- true
--wait|exec x --wait abc -- true
--wait|exec x --wait -5 -- true
--lease|exec x --lease 0 -- true
--grace|exec x --grace 1x -- true
--wait|exec x --wait
--on-lost|exec x --on-lost sometimes -- true
missing command|exec x
missing command|exec x --
missing lock NAME|status
--force|unlock x
unknown command|frobnicate
--timeout|--timeout 0 status x
--watchdog-lease|--watchdog-lease 10 exec x -- true
--unavailable-timeout|exec x --unavailable-timeout 0 -- true
--unavailable-timeout|exec x --unavailable-timeout 1x -- true
--wait|exec x -w 1.0005s -- true
--wait|exec x --wait 5d -- true
--wait|exec x --wait 1.5 -- true
--wait|exec x --wait s -- true
--lease|exec x --lease 0.5ms -- true
--lease|exec x --lease forever -- true
--grace|exec x --grace -1s -- true
--timeout|--timeout 0ms status x
--watchdog-lease|--watchdog-lease 0.05s exec x -- true
--conflict-exit-code|exec x -E 256 -- true
--conflict-exit-code|exec x --conflict-exit-code abc -- true
--conflict-exit-code|exec x -E
--command|exec x -c true -- true
--command|exec x -c true extra
--command|exec x -c ''
--command|exec x -c
missing command|exec x -N
--config|--config $WORK/no-such-config status x
--config|--config $WORK status x
--password-file|-n redis://127.0.0.1:1 --password-file $WORK/no-such-file status x
takes no value|--tls-insecure=yes status x
or all|--quorum most status x
not a number of permits|exec x --permits 0 -- true
not a number of permits|exec x --permits -2 -- true
not a number of permits|exec x --permits abc -- true
not a number of permits|exec x --permits 2 --permit-count 0 -- true
--permits|exec x --permits 2 --shared -- true
--permits|exec x --write --permits 2 -- true
--shared|exec x --shared --write -- true
--fencing|exec x --shared --fencing -- true
--fencing|exec x --permits 2 --fencing -- true
goes with --permits|exec x --permit-count 2 -- true
more than the semaphore's 2 permits|exec x --permits 2 --permit-count 3 -- true
needs at least 4|-n $q9 -q 3 exec x --permits 2 -- true
--permits|status x --permits 0
--permits|status --metrics --permits 2
EOF
  note "every usage error exits 64 with one line"
  REDLOCK_CONFIG=$WORK/no-such-config run status x
  expect_rc 64 "REDLOCK_CONFIG names a missing file"
  expect_one_error_line "REDLOCK_CONFIG names a missing file"
  grep -q "REDLOCK_CONFIG" "$WORK/err" || fail "the error does not name REDLOCK_CONFIG: $(cat "$WORK/err")"
  for c in "" exec status unlock rig demo version help; do
    # shellcheck disable=SC2086
    run $c --help
    expect_rc 0 "redlock $c --help"
    grep -q '^usage: redlock' "$WORK/out" || fail "redlock $c --help: no usage text"
  done
  # Option spellings: --name=value, -xVALUE, runs of -v, globals after the
  # command; each global must keep its own value.
  run --nodes=redis://127.0.0.1:1 -q all -vv status --timeout=50 x --json
  expect_rc 69 "status on an unreachable node"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["quorum"]==1 and len(s["nodes"])==1, s' "$WORK/out" ||
    fail "option spellings: $(cat "$WORK/out")"
  run -nredis://127.0.0.1:1,redis://127.0.0.1:2 --quorum=all status x
  expect_rc 69 "status with -nVALUE"
  grep -q "0 of 2 node(s) answered, quorum is 2" "$WORK/err" || fail "-nVALUE/--quorum=all: $(cat "$WORK/err")"
  run version
  expect_rc 0 "version"
  grep -q "^redlock [0-9]" "$WORK/out" || fail "version output: $(cat "$WORK/out")"
  run --json version
  python3 -m json.tool "$WORK/out" >/dev/null || fail "version --json does not parse"
  run version
  cp "$WORK/out" "$WORK/version.out"
  for v in -V --version; do
    run $v
    expect_rc 0 "redlock $v"
    cmp -s "$WORK/out" "$WORK/version.out" || fail "redlock $v: $(cat "$WORK/out") $(cat "$WORK/err")"
  done
  note "help and version exit 0"
}

case_exec() {
  rig_up
  run exec job -- sh -c 'echo "ran $REDLOCK_NAME $REDLOCK_VALIDITY_MS"; exit 7'
  expect_rc 7 "exec passes the command's status through"
  grep -Eq '^ran job [0-9]+$' "$WORK/out" || fail "command output/environment: $(cat "$WORK/out")"
  v=$(awk '{print $3}' "$WORK/out")
  [ "$v" -gt 20000 ] && [ "$v" -le 30000 ] || fail "REDLOCK_VALIDITY_MS=$v, expected (20000, 30000]"
  [ "$(keys_on_nodes job)" = 0 ] || fail "lock keys left after exec"
  [ "$(held_by_quorum job)" = False ] || fail "status does not show the lock free"
  note "exec ran the command, passed its status, released"

  # While the command runs, the lock is held on a quorum (status shows it).
  run exec job -- sh -c "$REDLOCK status --json job"
  expect_rc 0 "status from inside exec"
  python3 - "$WORK/out" <<'EOF' || fail "status inside exec: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["held_by_quorum"] is True, s
assert s["holder_nodes"] >= 3 and s["quorum"] == 3, s
assert all(n["reachable"] for n in s["nodes"]), s
EOF
  run exec job --fencing -- sh -c 'echo "$REDLOCK_TOKEN"'
  expect_rc 0 "exec --fencing"
  grep -Eq '^[1-9][0-9]*$' "$WORK/out" || fail "REDLOCK_TOKEN: $(cat "$WORK/out")"
  run exec job -- "$WORK/no-such-command"
  expect_rc 127 "missing command"
  grep -q "No such file" "$WORK/err" || fail "missing command message: $(cat "$WORK/err")"
  run exec job -- true
  expect_rc 0 "exec true"
  [ "$(keys_on_nodes job)" = 0 ] || fail "lock keys left after the failed command"
  # stderr is a pipe whose reader is gone (`... 2>&1 | head` that has
  # quit): writing the message must not kill redlock while it holds the
  # lock (SIGPIPE left the keys for a whole lease).
  local pipe_rc
  pipe_rc=$(python3 - "$REDLOCK" "$WORK/no-such-command" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)  # the reader is gone before anything is written
p = subprocess.run([sys.argv[1], "exec", "job", "--", sys.argv[2]], stdout=w, stderr=w,
                   stdin=subprocess.DEVNULL, timeout=60)
print(p.returncode)
PY
)
  [ "$pipe_rc" = 127 ] || fail "exec with a closed stderr pipe: status $pipe_rc, expected 127"
  [ "$(keys_on_nodes job)" = 0 ] || fail "lock keys left after writing to a closed pipe"
  note "status inside exec, --fencing, 127 for a missing command (also with stderr closed)"
}

case_busy() {
  rig_up
  write_trap_child
  "$REDLOCK" exec busy -- "$WORK/child.sh" "$WORK" 2>"$WORK/first.err" &
  first=$!
  bg_add "$first"
  wait_file "$WORK/started" 20 || fail "first exec did not start its command"
  run exec busy --wait 0 -- touch "$WORK/second-ran"
  expect_rc 75 "second exec --wait 0"
  expect_one_error_line "busy --wait 0"
  [ ! -e "$WORK/second-ran" ] || fail "the second command ran without the lock"
  t0=$(now_ms)
  run exec busy --wait 600 -- touch "$WORK/second-ran"
  t=$(($(now_ms) - t0))
  expect_rc 75 "second exec --wait 600"
  [ "$t" -ge 550 ] || fail "--wait 600 gave up after $t ms"
  [ ! -e "$WORK/second-ran" ] || fail "the second command ran without the lock"
  note "second exec exits 75 while the first runs (waited $t ms with --wait 600)"
  touch "$WORK/stop"
  wait_pid "$first" 20 || fail "first exec did not end"
  [ "$WAIT_RC" = 0 ] || fail "first exec exited $WAIT_RC"
  run exec busy --wait 0 -- touch "$WORK/second-ran"
  expect_rc 0 "exec after release"
  [ -e "$WORK/second-ran" ] || fail "command did not run after release"
}

case_noquorum() {
  rig_up
  for i in 1 2 3; do rig_node freeze $i; done
  t0=$(now_ms)
  run exec nq --wait 2000 -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 69 "exec with 3 of 5 nodes frozen"
  [ ! -e "$WORK/ran" ] || fail "command ran without a quorum"
  # --wait is 2 s; a generous margin for a loaded machine.
  [ "$t" -lt 12000 ] || fail "exec took $t ms to give up (--wait 2000)"
  grep -q '^redlock: 127.0.0.1:[0-9]*: ' "$WORK/err" || fail "no per-node error: $(cat "$WORK/err")"
  note "3 of 5 frozen: exit 69 after $t ms"
  run status nq
  expect_rc 69 "status with 3 of 5 nodes frozen"
  for i in 1 2 3; do rig_node thaw $i; done

  for i in 1 2 3; do rig_node kill $i; done
  t0=$(now_ms)
  run exec nq --wait 0 -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 69 "exec with 3 of 5 nodes stopped"
  [ ! -e "$WORK/ran" ] || fail "command ran without a quorum"
  [ "$(grep -c 'connect: Connection refused' "$WORK/err")" -ge 1 ] ||
    fail "no connection error: $(cat "$WORK/err")"
  grep -v '^redlock: [^ ].*: [^ ].*$' "$WORK/err" && fail "malformed error lines"
  note "3 of 5 stopped: exit 69 after $t ms"
  run unlock nq --force
  expect_rc 69 "unlock --force without a quorum"
}

case_lost() {
  rig_up
  write_trap_child
  # A 900 ms watchdog lease: renewals every 300 ms notice the loss quickly.
  "$REDLOCK" --watchdog-lease 900 exec lost -- "$WORK/child.sh" "$WORK" 2>"$WORK/lost.err" &
  pid=$!
  bg_add "$pid"
  wait_file "$WORK/started" 20 || fail "exec did not start its command"
  [ "$(keys_on_nodes lost)" -ge 3 ] || fail "lock not on a quorum"
  t0=$(now_ms)
  del_everywhere lost
  wait_pid "$pid" 20 || fail "exec did not end after the lock was lost"
  t=$(($(now_ms) - t0))
  [ "$WAIT_RC" = 76 ] || fail "exit $WAIT_RC after a lost lock, expected 76: $(cat "$WORK/lost.err")"
  [ "$(cat "$WORK/got" 2>/dev/null)" = TERM ] || fail "the command did not get SIGTERM"
  grep -q "lock lost" "$WORK/lost.err" || fail "no loss message: $(cat "$WORK/lost.err")"
  note "lost lock: child got SIGTERM, exit 76, $t ms after the keys were deleted"

  # A fixed lease that runs out counts as a loss too; --on-lost kill.
  rm -f "$WORK/got" "$WORK/started"
  run exec lost2 --lease 800 --on-lost kill -- "$WORK/child.sh" "$WORK"
  expect_rc 76 "--lease ran out with --on-lost kill"
  [ -e "$WORK/started" ] || fail "command did not start"
  [ ! -e "$WORK/got" ] || fail "SIGKILL expected, the command saw $(cat "$WORK/got")"
  # --on-lost ignore: the command finishes, the status is its own.
  run exec lost3 --lease 300 --on-lost ignore -- sh -c 'sleep 0.8; exit 5'
  expect_rc 5 "--on-lost ignore"
  grep -q warning "$WORK/err" || fail "--on-lost ignore did not warn"
  note "--lease expiry: kill -> 76, ignore -> command's status"

  # A loss the watchdog has not seen yet (its lease is long) is found by
  # the release: 76 whatever the command's own status, 70 included.
  for st in 5 70; do
    run --watchdog-lease 30000 exec lost4 -- sh -c \
      "for p in $PORTS; do redis-cli -p \$p DEL lost4 >/dev/null; done; exit $st"
    expect_rc 76 "a loss found by the release, the command exiting $st"
  done
  note "a loss found by the release: 76 (the command exited 5, then 70)"
}

case_signal() {
  rig_up
  write_trap_child
  for sig in TERM HUP INT; do
    rm -f "$WORK/got" "$WORK/started"
    # Background jobs of a script ignore SIGINT; restore the default so
    # the forwarded SIGINT reaches the command's trap.
    python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$REDLOCK" exec sig -- "$WORK/child.sh" "$WORK" 2>"$WORK/sig.err" &
    pid=$!
    bg_add "$pid"
    wait_file "$WORK/started" 20 || fail "exec did not start its command"
    [ "$(held_by_quorum sig)" = True ] || fail "lock not held while the command runs"
    kill -"$sig" "$pid"
    wait_pid "$pid" 20 || fail "exec did not end after SIG$sig"
    [ "$WAIT_RC" = 3 ] || fail "exit $WAIT_RC after SIG$sig, expected the command's 3"
    [ "$(cat "$WORK/got" 2>/dev/null)" = "$sig" ] || fail "the command did not get SIG$sig"
    [ "$(keys_on_nodes sig)" = 0 ] || fail "lock not released after SIG$sig"
    [ "$(held_by_quorum sig)" = False ] || fail "status shows the lock held after SIG$sig"
    note "SIG$sig forwarded, command's status returned, lock released"
  done
}

case_status() {
  rig_up
  run status --json st
  expect_rc 0 "status --json of a free lock"
  python3 -m json.tool "$WORK/out" >/dev/null || fail "status --json does not parse: $(cat "$WORK/out")"
  python3 - "$WORK/out" <<'EOF' || fail "free lock JSON: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["name"] == "st" and s["quorum"] == 3 and len(s["nodes"]) == 5, s
assert s["held_by_quorum"] is False and s["holder"] is None, s
assert all(n["reachable"] and not n["exists"] and n["pttl_ms"] == -2 for n in s["nodes"]), s
EOF
  # A lock held on two nodes only (written by hand, as Redisson would):
  # visible per node, but not held by a quorum.
  for p in $(echo "$PORTS" | cut -d' ' -f1-2); do
    redis-cli -p "$p" HSET 'st"x' 'f00-uuid:1' 2 >/dev/null
    redis-cli -p "$p" PEXPIRE 'st"x' 60000 >/dev/null
  done
  rig_node freeze 5
  run status --json 'st"x'
  rig_node thaw 5
  expect_rc 0 "status --json with one node frozen"
  python3 - "$WORK/out" <<'EOF' || fail "partial lock JSON: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["name"] == 'st"x', s
n = s["nodes"]
assert n[0]["holder"] == "f00-uuid:1" and n[0]["hold_count"] == 2 and 0 < n[0]["pttl_ms"] <= 60000, n[0]
assert n[2]["exists"] is False and n[4]["reachable"] is False and n[4]["error"], s
assert s["holder_nodes"] == 2 and s["held_by_quorum"] is False and s["reachable"] == 4, s
EOF
  run status 'st"x'
  expect_rc 0 "status (text)"
  grep -q '^held by quorum: no' "$WORK/out" || fail "text status: $(cat "$WORK/out")"
  note "status --json parses and reports per node"

  run unlock 'st"x' --force
  expect_rc 0 "unlock --force"
  grep -q "released on 2 node" "$WORK/out" || fail "unlock output: $(cat "$WORK/out")"
  [ "$(keys_on_nodes 'st"x')" = 0 ] || fail "keys left after unlock --force"
  run unlock 'st"x' --force
  expect_rc 0 "unlock --force of a free lock"
  grep -q "was free" "$WORK/out" || fail "unlock output: $(cat "$WORK/out")"
  note "unlock --force releases, and exits 0 on a free lock"
}

# Holder facts: `redlock exec` records them, `status` shows them while the
# holder holds a quorum and ignores them once it does not. The pid shown is
# redlock's own (the process holding the lock); the command is its child.
# Starts `redlock exec NAME ARGS...` in the background (its pid in
# EXEC_PID, killed on exit if still there) and waits up to 10 s until it
# holds NAME on a quorum.
exec_holding() {
  local name=$1 end
  shift
  "$REDLOCK" exec "$name" "$@" >"$WORK/exec.out" 2>"$WORK/exec.err" &
  EXEC_PID=$!
  bg_add "$EXEC_PID"
  end=$(($(now_ms) + 10000))
  until [ "$(held_by_quorum "$name" 2>/dev/null)" = True ]; do
    [ "$(now_ms)" -lt "$end" ] || fail "exec $name did not take the lock: $(cat "$WORK/exec.err")"
    sleep 0.05
  done
}

case_status_facts() {
  local ex p n
  rig_up
  exec_holding sf -- sleep 5
  ex=$EXEC_PID
  run status sf
  expect_rc 0 "status of a lock held by exec"
  grep -qx "holder host:    $(hostname)" "$WORK/out" || fail "no host: $(cat "$WORK/out")"
  grep -qx "holder pid:     $ex" "$WORK/out" || fail "no pid $ex: $(cat "$WORK/out")"
  grep -qx "holder command: sleep 5" "$WORK/out" || fail "no command: $(cat "$WORK/out")"
  grep -Eqx "held since:     [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} [-+][0-9]{4} \([0-9]+s ago\)" \
    "$WORK/out" || fail "no since: $(cat "$WORK/out")"
  grep -qx "5 of 5 nodes answer: 2 more can fail" "$WORK/out" || fail "no margin: $(cat "$WORK/out")"
  run status --json sf
  expect_rc 0 "status --json of a lock held by exec"
  python3 - "$WORK/out" "$ex" "$(hostname)" "$(now_ms)" <<'PY' || fail "facts JSON: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["held_by_quorum"] and s["pid"] == int(sys.argv[2]) and s["host"] == sys.argv[3], s
assert s["command"] == "sleep 5" and abs(s["since_ms"] - int(sys.argv[4])) < 60000, s
assert s["margin"] == 2, s
PY
  note "status shows exec's host, pid, command and start time"
  wait_pid "$ex" 20 || fail "exec did not end"
  [ "$WAIT_RC" = 0 ] || fail "exec exited $WAIT_RC: $(cat "$WORK/exec.err")"

  # The facts outlive the hold (they expire with its lease), but belong to
  # an owner that no longer holds it: free, or held by someone else, status
  # shows no facts.
  # Written only where the grant was heard before the attempt was decided:
  # a quorum of members, not necessarily the first.
  n=0
  for p in $PORTS; do
    n=$((n + $(redis-cli -p "$p" EXISTS 'redlock_facts:{sf}')))
  done
  [ "$n" -ge 3 ] || fail "facts key written on $n members, not a quorum"
  run status --json sf
  expect_rc 0 "status --json after exec ended"
  python3 - "$WORK/out" <<'PY' || fail "stale facts JSON: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert not s["held_by_quorum"] and s["host"] is None and s["pid"] is None, s
assert s["command"] is None and s["since_ms"] is None, s
PY
  for p in $PORTS; do
    redis-cli -p "$p" HSET sf 'f00-uuid:1' 1 >/dev/null
    redis-cli -p "$p" PEXPIRE sf 60000 >/dev/null
  done
  run status sf
  expect_rc 0 "status of a lock held by another owner"
  grep -q '^held by quorum: yes' "$WORK/out" || fail "not held: $(cat "$WORK/out")"
  ! grep -q '^holder ' "$WORK/out" || fail "stale facts shown: $(cat "$WORK/out")"
  del_everywhere sf
  note "facts of a previous holder are not shown"

  # -c STRING is the command; a newline in it cannot make a line of its own.
  exec_holding sf2 -c $'sleep 3\nholder pid:     1'
  ex=$EXEC_PID
  run status sf2
  grep -qxF 'holder command: sleep 3\x0aholder pid:     1' "$WORK/out" ||
    fail "command not escaped: $(cat "$WORK/out")"
  [ "$(grep -c '^holder pid:' "$WORK/out")" = 1 ] || fail "a forged pid line: $(cat "$WORK/out")"
  grep -qx "holder pid:     $ex" "$WORK/out" || fail "pid is not $ex: $(cat "$WORK/out")"
  wait_pid "$ex" 20 || fail "exec -c did not end"
  note "exec -c records the string; a newline in it stays escaped"
}

# The margin line: how many more nodes may fail before no lock can be taken.
case_status_margin() {
  local i
  rig_up
  trap 'for i in 3 4 5; do rig_node thaw $i >/dev/null 2>&1 || true; done; cleanup' EXIT
  run --timeout 200ms status sm
  expect_rc 0 "status with every node up"
  grep -qx "5 of 5 nodes answer: 2 more can fail" "$WORK/out" || fail "5/5: $(cat "$WORK/out")"
  rig_node freeze 5
  run --timeout 200ms status sm
  expect_rc 0 "status with one node frozen"
  grep -qx "4 of 5 nodes answer: 1 more can fail" "$WORK/out" || fail "4/5: $(cat "$WORK/out")"
  rig_node freeze 4
  run --timeout 200ms status sm
  expect_rc 0 "status with two nodes frozen"
  grep -qx "3 of 5 nodes answer: one more failure and no lock can be taken" "$WORK/out" ||
    fail "3/5: $(cat "$WORK/out")"
  run --timeout 200ms status --json sm
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["margin"] == 0, s' \
    "$WORK/out" || fail "margin 0: $(cat "$WORK/out")"
  rig_node freeze 3
  run --timeout 200ms status sm
  expect_rc 69 "status with three nodes frozen"
  grep -qx "2 of 5 nodes answer: no lock can be taken" "$WORK/out" || fail "2/5: $(cat "$WORK/out")"
  run --timeout 200ms status --json sm
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["margin"] == -1, s' \
    "$WORK/out" || fail "margin -1: $(cat "$WORK/out")"
  for i in 3 4; do rig_node thaw $i; done
  note "5, 4, 3 and 2 of 5 nodes: 2 more, 1 more, one more failure, none"

  run --timeout 200ms --quorum all status sm
  expect_rc 69 "MultiLock status with one node frozen"
  grep -qx "4 of 5 nodes answer: no lock can be taken" "$WORK/out" || fail "all, 4/5: $(cat "$WORK/out")"
  rig_node thaw 5
  run --timeout 200ms --quorum all status sm
  expect_rc 0 "MultiLock status"
  grep -qx "5 of 5 nodes answer: every node must answer (quorum is all 5): one failure and no lock can be taken" \
    "$WORK/out" || fail "all, 5/5: $(cat "$WORK/out")"
  note "a MultiLock says every node must answer"
}

# --watch refreshes; --count bounds it; INT and TERM end it with 0.
case_status_watch() {
  local sig end
  rig_up
  run status sw --watch 100ms --count 3
  expect_rc 0 "status --watch 100ms --count 3"
  [ "$(grep -c "^lock 'sw' on 5 node(s)" "$WORK/out")" = 3 ] || fail "not 3 views: $(cat "$WORK/out")"
  ! grep -q $'\033' "$WORK/out" || fail "a pipe got terminal control codes"
  run --json status --watch=100ms --count 2 sw
  expect_rc 0 "status --json --watch=100ms --count 2"
  [ "$(wc -l <"$WORK/out")" = 2 ] || fail "not 2 JSON lines: $(cat "$WORK/out")"
  while read -r line; do
    echo "$line" | python3 -m json.tool >/dev/null || fail "a view does not parse: $line"
  done <"$WORK/out"
  run_pty "$REDLOCK" status sw --watch 100ms --count 2
  [ "$RC" = 0 ] || fail "status --watch on a terminal exited $RC"
  grep -q $'\033\[H\033\[2J' "$WORK/pty.out" || fail "a terminal is not cleared"
  note "--count N views; the screen is cleared on a terminal only"

  for sig in INT TERM; do
    rm -f "$WORK/w.pid" "$WORK/w.status"
    track w "$REDLOCK" status sw --watch 100ms >"$WORK/wout"
    end=$(($(now_ms) + 10000))
    until [ "$(grep -c "^lock 'sw'" "$WORK/wout")" -ge 2 ]; do
      [ "$(now_ms)" -lt "$end" ] || fail "status --watch shows nothing"
      sleep 0.05
    done
    kill -"$sig" "$TRACKED_PID"
    wait_tracked w 10 || fail "status --watch did not end on SIG$sig"
    [ "$TRACK_STATUS" = "exit 0" ] || fail "SIG$sig: $TRACK_STATUS"
  done
  note "SIGINT and SIGTERM end --watch with 0"

  run status sw --count 2
  expect_rc 64 "--count without --watch"
  run status sw --watch 5x
  expect_rc 64 "--watch with a bad interval"
  run status sw --watch 1ms
  expect_rc 64 "--watch below 10 ms"
}

case_rig() {
  local base
  base=$(free_base 3) || fail "no free ports"
  export REDLOCK_RIG_DIR=$RIG_DIR
  run rig start --nodes-count 3 --base-port "$base"
  expect_rc 0 "rig start"
  run rig status --base-port "$base" --json
  expect_rc 0 "rig status"
  python3 - "$WORK/out" "$base" <<'EOF' || fail "rig status JSON: $(cat "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["base_port"] == int(sys.argv[2]), s
assert [n["state"] for n in s["nodes"]] == ["up"] * 3, s
assert [n["port"] for n in s["nodes"]] == [int(sys.argv[2]) + i for i in range(3)], s
EOF
  run -n "redis://127.0.0.1:$base,redis://127.0.0.1:$((base + 1)),redis://127.0.0.1:$((base + 2))" exec r -- true
  expect_rc 0 "exec on the rig the tool started"
  run rig stop --base-port "$base"
  expect_rc 0 "rig stop"
  port_busy "$base" && fail "node still listening after rig stop"
  run rig start --base-port 0
  expect_rc 64 "rig start --base-port 0"
  note "rig start/status/stop"
}

case_demo() {
  local base
  export REDLOCK_RIG_DIR=$RIG_DIR
  base=$(free_base 5) || fail "no free ports"
  t0=$(now_ms)
  run demo --base-port "$base" --seconds 6 --workers 4
  t=$(($(now_ms) - t0))
  cat "$WORK/out"
  expect_rc 0 "demo on a rig it starts"
  grep -q '^PASS: no two of the [1-9][0-9]* critical sections overlapped' "$WORK/out" || fail "no PASS verdict"
  grep -q 'SIGSTOP node 2 .* node 4 ' "$WORK/out" || fail "the demo did not freeze nodes 2 and 4"
  grep -q 'SIGCONT node 2 node 4' "$WORK/out" || fail "the demo did not thaw the nodes"
  grep -q 'overlapping pairs   0' "$WORK/out" || fail "overlap count missing"
  port_busy "$base" && fail "the demo left the rig it started running"
  note "demo (rig started and stopped by it) passed in $t ms"

  # On a rig that already runs, the demo leaves it running.
  base=$(free_base 5) || fail "no free ports"
  "$RIG" start --base-port "$base" --dir "$RIG_DIR" >/dev/null || fail "rig start"
  run demo --base-port "$base" --seconds 4 --workers 4
  expect_rc 0 "demo on a running rig"
  grep -q '^Using the running rig' "$WORK/out" || fail "demo did not use the running rig"
  port_busy "$base" || fail "the demo stopped a rig it did not start"
  [ "$("$RIG" status --dir "$RIG_DIR" | awk '$4 != "up"' | wc -l)" = 0 ] || fail "nodes left frozen"
  note "demo on a running rig leaves it running and thawed"
}

# The hash fields of lock $1 on every node, one line per node.
fields_per_node() {
  local p
  for p in $PORTS; do
    redis-cli -p "$p" HKEYS "$1" | sort | tr '\n' ' '
    echo
  done
}

# A command that starts `sleep 300` in the background, records "BG FG" (the
# background sleep's pid and its own, which `exec` then makes the second
# sleep) in $1, and waits in the foreground.
SLEEPERS='sleep 300 & echo "$! $$" > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 300'

# Waits for the sleepers' pids and adds them to the clean-up list.
sleeper_pids() {
  wait_file "$1" 20 || fail "the command did not start"
  SLEEPER_PIDS=$(cat "$1")
  bg_add $SLEEPER_PIDS
  for p in $SLEEPER_PIDS; do alive "$p" || fail "sleeper $p is not running"; done
}

# A signal while waiting for the lock cancels the attempt, frees the
# client and exits 128+signal (an exit, not a death by the signal), and
# leaves nothing of the waiter on any node.
case_cancel() {
  rig_up
  "$REDLOCK" exec cancel -- sleep 30 2>"$WORK/holder.err" &
  holder=$!
  bg_add "$holder"
  i=0
  while [ "$(keys_on_nodes cancel)" != 5 ]; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "the first exec did not take the lock"; sleep 0.05
  done
  before=$(fields_per_node cancel)
  for sig in TERM INT HUP; do
    rm -f "$WORK/waiter.status" "$WORK/waiter.pid"
    track waiter "$REDLOCK" exec cancel -- touch "$WORK/ran" 2>"$WORK/waiter.err"
    # Past the first report slice, so the wait is well under way.
    sleep 1.5
    alive "$TRACKED_PID" || fail "the second exec did not wait: $(cat "$WORK/waiter.err")"
    t0=$(now_ms)
    kill -"$sig" "$TRACKED_PID"
    wait_tracked waiter 10 || fail "the waiting exec did not end after SIG$sig"
    t=$(($(now_ms) - t0))
    case $sig in TERM) want=143;; INT) want=130;; HUP) want=129;; esac
    [ "$TRACK_STATUS" = "exit $want" ] ||
      fail "SIG$sig while waiting: $TRACK_STATUS, expected exit $want: $(cat "$WORK/waiter.err")"
    [ "$t" -lt 2000 ] || fail "SIG$sig while waiting: exited after $t ms"
    [ ! -e "$WORK/ran" ] || fail "the command ran"
    grep -q "SIG$sig while waiting" "$WORK/waiter.err" || fail "no message: $(cat "$WORK/waiter.err")"
    [ "$(fields_per_node cancel)" = "$before" ] ||
      fail "after SIG$sig the nodes hold $(fields_per_node cancel), before $before"
    note "SIG$sig while waiting: exit $want after $t ms, only the holder's field left"
  done
  kill -TERM "$holder"
  wait_pid "$holder" 20 || fail "the holder did not end"
  [ "$(keys_on_nodes cancel)" = 0 ] || fail "keys left after the holder ended"
}

# redlock dies by SIGKILL: the watcher signals the command's whole group.
case_pgroup_kill() {
  rig_up
  track pk "$REDLOCK" exec pk -- sh -c "$SLEEPERS" sh "$WORK/pids"
  sleeper_pids "$WORK/pids"
  t0=$(now_ms)
  kill -KILL "$TRACKED_PID"
  wait_gone "$SLEEPER_PIDS" 1000 || fail "still running 1 s after redlock was killed:$GONE_LEFT"
  note "redlock SIGKILLed: both sleeps gone after $(($(now_ms) - t0)) ms"
}

# A lost lock signals the whole group, not only the command.
case_pgroup_lost() {
  rig_up
  "$REDLOCK" --watchdog-lease 900 exec pl -- sh -c "$SLEEPERS" sh "$WORK/pids" 2>"$WORK/pl.err" &
  pid=$!
  bg_add "$pid"
  sleeper_pids "$WORK/pids"
  del_everywhere pl
  wait_pid "$pid" 20 || fail "exec did not end after the lock was lost"
  [ "$WAIT_RC" = 76 ] || fail "exit $WAIT_RC after a lost lock, expected 76: $(cat "$WORK/pl.err")"
  wait_gone "$SLEEPER_PIDS" 1000 || fail "still running after the lock was lost:$GONE_LEFT"
  grep -q "process group" "$WORK/pl.err" || fail "loss message: $(cat "$WORK/pl.err")"
  note "lost lock: exit 76, the background sleep is gone too"
}

# A signal forwarded to the command reaches its whole group; the lock is
# released.
case_pgroup_signal() {
  rig_up
  "$REDLOCK" exec ps -- sh -c "$SLEEPERS" sh "$WORK/pids" 2>"$WORK/ps.err" &
  pid=$!
  bg_add "$pid"
  sleeper_pids "$WORK/pids"
  kill -TERM "$pid"
  wait_pid "$pid" 20 || fail "exec did not end after SIGTERM"
  [ "$WAIT_RC" = 143 ] || fail "exit $WAIT_RC after SIGTERM, expected 143: $(cat "$WORK/ps.err")"
  wait_gone "$SLEEPER_PIDS" 1000 || fail "still running after SIGTERM:$GONE_LEFT"
  [ "$(keys_on_nodes ps)" = 0 ] || fail "lock not released"
  note "SIGTERM forwarded to the group: both sleeps gone, lock released"

  # A process of the group that needs time to clean up gets --grace for
  # it, though the leader (the shell) exits at once on the SIGTERM.
  cat >"$WORK/slow_clean.py" <<'PY'
import signal, sys, time
def done(*_):
    time.sleep(0.5)
    open(sys.argv[1], "w").write("cleaned")
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
open(sys.argv[2], "w").write("ready")
time.sleep(60)
PY
  "$REDLOCK" exec --grace 3s pg2 -- sh -c 'python3 "$1" "$2" "$3" & wait' sh \
    "$WORK/slow_clean.py" "$WORK/cleaned" "$WORK/ready" 2>"$WORK/pg2.err" &
  pid=$!
  bg_add "$pid"
  wait_file "$WORK/ready" 20 || fail "the worker did not start"
  kill -TERM "$pid"
  wait_pid "$pid" 20 || fail "exec did not end after SIGTERM"
  [ -e "$WORK/cleaned" ] || fail "the worker was killed before --grace ran out: $(cat "$WORK/pg2.err")"
  [ "$(keys_on_nodes pg2)" = 0 ] || fail "lock not released"
  note "a worker left in the group finished its clean-up within --grace"

  # The largest --grace accepted is a wait, not a deadline that wrapped
  # into the past (SIGKILL at once).
  rm -f "$WORK/cleaned" "$WORK/ready"
  "$REDLOCK" exec --grace 9223372036854 pg3 -- sh -c 'python3 "$1" "$2" "$3" & wait' sh \
    "$WORK/slow_clean.py" "$WORK/cleaned" "$WORK/ready" 2>"$WORK/pg3.err" &
  pid=$!
  bg_add "$pid"
  wait_file "$WORK/ready" 20 || fail "the worker did not start"
  kill -TERM "$pid"
  wait_pid "$pid" 20 || fail "exec did not end after SIGTERM"
  [ -e "$WORK/cleaned" ] || fail "the largest --grace killed the worker at once: $(cat "$WORK/pg3.err")"
  note "the largest --grace waited for the clean-up"

  # After a normal end, what the command left running is reported.
  run exec ps2 -- sh -c 'sleep 300 & echo $! > "$1"' sh "$WORK/left"
  expect_rc 0 "a command that leaves a process behind"
  bg_add "$(cat "$WORK/left")"
  grep -q "still running, without the lock" "$WORK/err" || fail "no warning: $(cat "$WORK/err")"
  kill "$(cat "$WORK/left")"
}

# Wrong credentials end the wait at once with 77 (EX_NOPERM).
case_auth() {
  rig_up --acl-user alice --acl-pass secret
  t0=$(now_ms)
  REDLOCK_PASSWORD=wrong run --user alice exec au -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 77 "a wrong password"
  [ "$t" -lt 2000 ] || fail "a wrong password took $t ms"
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  REDLOCK_PASSWORD=secret run --user alice exec au -- true
  expect_rc 0 "the right password"
  note "wrong password: exit 77 after $t ms"

  # Credentials in the node URIs beat a user or password of a lower layer
  # (the environment, the file), as every setting does; a stronger one
  # beats them.
  good=$(echo "$REDLOCK_NODES" | sed 's#redis://#redis://alice:secret@#g')
  bad=$(echo "$REDLOCK_NODES" | sed 's#redis://#redis://alice:wrong@#g')
  printf 'wrong\n' >"$WORK/wrong.pw"
  printf 'secret\n' >"$WORK/right.pw"
  chmod 600 "$WORK/wrong.pw" "$WORK/right.pw"
  printf 'user = alice\npassword_file = %s\n' "$WORK/wrong.pw" >"$WORK/auth.conf"
  run --config "$WORK/auth.conf" --nodes "$good" exec au -- true
  expect_rc 0 "--nodes with user info over the file's user and password_file"
  REDLOCK_PASSWORD=wrong run --config /dev/null --nodes "$good" exec au -- true
  expect_rc 0 "--nodes with user info over \$REDLOCK_PASSWORD"
  REDLOCK_NODES=$good run --config "$WORK/auth.conf" exec au -- true
  expect_rc 0 "\$REDLOCK_NODES with user info over the file's password_file"
  # A password the node URIs beat is not even read: a password_file
  # missing on this host is no error then.
  printf 'user = alice\npassword_file = %s\n' "$WORK/missing.pw" >"$WORK/missing.conf"
  run --config "$WORK/missing.conf" --nodes "$good" exec au -- true
  expect_rc 0 "--nodes with user info over a missing password_file"
  grep -q missing.pw "$WORK/err" && fail "the unused password_file was looked at: $(cat "$WORK/err")"
  REDLOCK_NODES=$bad run --config /dev/null --password-file "$WORK/right.pw" exec au -- true
  expect_rc 0 "--password-file over \$REDLOCK_NODES' password"
  printf 'password_file = %s\n' "$WORK/right.pw" >"$WORK/right.conf"
  REDLOCK_NODES=$bad run --config "$WORK/right.conf" exec au -- true
  expect_rc 77 "the file's password_file does not beat the password in \$REDLOCK_NODES"
  # A list where only some URIs carry user info keeps the lower layer's
  # user and password, which the others need (the default user is off).
  mixed=$(echo "$REDLOCK_NODES" | sed 's#redis://#redis://alice:secret@#')
  REDLOCK_PASSWORD=secret run --config /dev/null --user alice --nodes "$mixed" exec au -- true
  expect_rc 0 "a mixed list with \$REDLOCK_PASSWORD and --user"
  printf 'user = alice\npassword_file = %s\n' "$WORK/right.pw" >"$WORK/mixed.conf"
  run --config "$WORK/mixed.conf" --nodes "$mixed" exec au -- true
  expect_rc 0 "a mixed list with the file's user and password_file"
  note "URI credentials beat a lower layer's user and password"

  # status and unlock say refused credentials as exec does.
  REDLOCK_PASSWORD=wrong run --config /dev/null --user alice status au
  expect_rc 77 "status with a wrong password"
  REDLOCK_PASSWORD=wrong run --config /dev/null --user alice status au --metrics
  expect_rc 77 "status --metrics with a wrong password"
  REDLOCK_PASSWORD=wrong run --config /dev/null --user alice unlock au --force
  expect_rc 77 "unlock --force with a wrong password"
  note "status and unlock with a wrong password: exit 77"

}

# Nothing listening: with the default infinite --wait, the wait ends with
# 69 once no quorum was reachable for --unavailable-timeout; each node is
# named once, not on every attempt.
case_unavailable() {
  local base nodes
  base=$(free_base 3) || fail "no free ports"
  nodes="redis://127.0.0.1:$base,redis://127.0.0.1:$((base + 1)),redis://127.0.0.1:$((base + 2))"
  t0=$(now_ms)
  run -n "$nodes" exec un --unavailable-timeout 1000 -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 69 "no node listening"
  [ "$t" -ge 900 ] && [ "$t" -lt 3000 ] || fail "gave up after $t ms (--unavailable-timeout 1000)"
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  # An attempt stops once a quorum is out of reach, so the last node may
  # never be tried; each node that failed is named once, whatever the
  # number of attempts.
  for p in $base $((base + 1)) $((base + 2)); do
    [ "$(grep -c "^redlock: 127.0.0.1:$p: " "$WORK/err")" -le 1 ] ||
      fail "node $p named more than once: $(cat "$WORK/err")"
  done
  named=$(grep -c '^redlock: 127.0.0.1:' "$WORK/err")
  [ "$named" -ge 2 ] || fail "fewer than two nodes named: $(cat "$WORK/err")"
  [ "$(wc -l <"$WORK/err")" = $((named + 1)) ] || fail "expected node lines and one verdict: $(cat "$WORK/err")"
  note "nothing listening: exit 69 after $t ms, each failing node named once"
}

# A lock name that is a string key on every node: 78 (EX_CONFIG).
case_wrongtype() {
  rig_up
  for p in $PORTS; do redis-cli -p "$p" SET wt x >/dev/null; done
  t0=$(now_ms)
  run exec wt -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 78 "WRONGTYPE on every node"
  [ "$t" -lt 2000 ] || fail "WRONGTYPE took $t ms"
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  for p in $PORTS; do [ "$(redis-cli -p "$p" GET wt)" = x ] || fail "the string key changed on $p"; done
  note "WRONGTYPE: exit 78 after $t ms"

  # A database the servers do not have: 78 from status and unlock too.
  nodes99=$(echo "$REDLOCK_NODES" | sed 's#\(redis://[^,]*\)#\1/99#g')
  run --nodes "$nodes99" exec wt99 -- true
  expect_rc 78 "exec on db 99"
  run --nodes "$nodes99" status wt99
  expect_rc 78 "status on db 99"
  run --nodes "$nodes99" unlock wt99 --force
  expect_rc 78 "unlock --force on db 99"
  note "db 99: exit 78 from exec, status and unlock"
}

# Three of five nodes down: each is named once on stderr (not on every
# attempt), and the progress line says how many are unreachable.
case_unreachable() {
  rig_up
  for i in 3 4 5; do rig_node kill $i; done
  # While an endless wait goes on (until the default 10 s unavailable
  # timeout), not only when it ends.
  track ur "$REDLOCK" exec ur -- touch "$WORK/ran" 2>"$WORK/ur.err"
  i=0
  while [ "$(grep -c '^redlock: 127.0.0.1:' "$WORK/ur.err")" -lt 3 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "nodes not named while waiting: $(cat "$WORK/ur.err")"
    sleep 0.05
  done
  sleep 2
  alive "$TRACKED_PID" || fail "the endless wait ended: $(cat "$WORK/ur.err")"
  for i in 3 4 5; do
    p=$((BASE + i - 1))
    [ "$(grep -c "^redlock: 127.0.0.1:$p: " "$WORK/ur.err")" = 1 ] ||
      fail "node $p not named exactly once while waiting: $(cat "$WORK/ur.err")"
  done
  [ "$(wc -l <"$WORK/ur.err")" = 3 ] || fail "more than the three nodes: $(cat "$WORK/ur.err")"
  kill -TERM "$TRACKED_PID"
  wait_tracked ur 10 || fail "the waiting exec did not end after SIGTERM"
  [ "$TRACK_STATUS" = "exit 143" ] || fail "SIGTERM while waiting: $TRACK_STATUS"
  run exec ur --wait 2500 -- touch "$WORK/ran"
  expect_rc 69 "three of five nodes down"
  for i in 3 4 5; do
    p=$((BASE + i - 1))
    [ "$(grep -c "^redlock: 127.0.0.1:$p: " "$WORK/err")" = 1 ] ||
      fail "node $p not named exactly once: $(cat "$WORK/err")"
  done
  [ "$(wc -l <"$WORK/err")" = 4 ] || fail "expected 3 node lines and 1 verdict: $(cat "$WORK/err")"
  run_pty "$REDLOCK" exec ur --wait 2500 -- touch "$WORK/ran"
  [ "$RC" = 69 ] || fail "on a terminal: exit $RC: $(cat "$WORK/pty.out")"
  grep -aq "waiting: 3 of 5 nodes unreachable" "$WORK/pty.out" ||
    fail "no 'waiting: 3 of 5 nodes unreachable' on the terminal: $(tr '\r' '\n' <"$WORK/pty.out")"
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  note "three nodes down: named once each, the progress line counts them"
}

# One of five nodes down while another client holds the lock: a quorum is
# reachable, so this is waiting for a holder, and --unavailable-timeout
# must not end it; --wait does, with 75.
case_unreachable_busy() {
  rig_up
  rig_node kill 5
  "$REDLOCK" exec ub -- sleep 30 2>"$WORK/holder.err" &
  bg_add "$!"
  i=0
  while [ "$(keys_on_nodes_up ub)" != 4 ]; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "the first exec did not take the lock"; sleep 0.05
  done
  t0=$(now_ms)
  run exec ub --wait 3000 --unavailable-timeout 1000 -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 75 "busy lock, one node down"
  [ "$t" -ge 2900 ] || fail "gave up after $t ms, before --wait 3000"
  [ "$(grep -c "^redlock: 127.0.0.1:$((BASE + 4)): " "$WORK/err")" = 1 ] ||
    fail "the node that is down is not named exactly once: $(cat "$WORK/err")"
  note "busy lock, one node down: exit 75 after $t ms"
}

# On a terminal the command gets the terminal for its process group: it
# can read from it (it is not left stopped by SIGTTIN).
case_tty() {
  rig_up
  PTY_DELAY=1 PTY_INPUT=$'hello\n' run_pty "$REDLOCK" exec tty -- sh -c 'read l && echo "got:$l"'
  [ "$RC" = 0 ] || fail "interactive command: exit $RC: $(cat "$WORK/pty.out")"
  grep -aq "got:hello" "$WORK/pty.out" || fail "the command did not read the terminal: $(cat "$WORK/pty.out")"
  [ "$(keys_on_nodes tty)" = 0 ] || fail "lock not released"
  note "interactive command read from the terminal"

  # Inside a script (redlock is not its group's leader) the command gets
  # the terminal when it first reads from it, and the script gets it back.
  # shellcheck disable=SC2016
  PTY_DELAY=1.5 PTY_INPUT=$'hello\n' run_pty timeout --foreground 20 bash -c \
    '"$0" exec tty -- sh -c "read l && echo got:\$l"; echo "after:$?"' "$REDLOCK"
  [ "$RC" = 0 ] || fail "interactive command in a script: exit $RC: $(cat "$WORK/pty.out")"
  grep -aq "got:hello" "$WORK/pty.out" || fail "the command did not read the terminal: $(cat "$WORK/pty.out")"
  grep -aq "after:0" "$WORK/pty.out" || fail "the script did not go on: $(cat "$WORK/pty.out")"
  note "interactive command inside a script read from the terminal"
}

# ---- security --------------------------------------------------------------

# What the command sees of redlock's secrets, printed on one line.
SHOW_ENV='echo "pw=${REDLOCK_PASSWORD-unset} nodes=${REDLOCK_NODES-unset} held=${REDLOCK_HELD-unset}"'

# The command never sees REDLOCK_PASSWORD, nor REDLOCK_NODES once a URI in
# it has user info, unless --keep-secret-env; nor can it read them from
# redlock's own /proc/PID/environ and cmdline.
case_secret_env() {
  rig_up --acl-user alice --acl-pass s3cret
  local plain=$REDLOCK_NODES with_pw with_user
  with_pw=${plain//redis:\/\//redis://alice:s3cret@}
  with_user=${plain//redis:\/\//redis://alice@}

  REDLOCK_PASSWORD=s3cret run --user alice exec se -- sh -c "$SHOW_ENV"
  expect_rc 0 "exec with REDLOCK_PASSWORD"
  grep -qxF "pw=unset nodes=$plain held=1" "$WORK/out" || fail "REDLOCK_PASSWORD reached the command: $(cat "$WORK/out")"
  note "REDLOCK_PASSWORD removed, REDLOCK_NODES without user info kept, REDLOCK_HELD=1"

  REDLOCK_NODES=$with_pw run exec se -- sh -c "$SHOW_ENV"
  expect_rc 0 "exec with a password in REDLOCK_NODES"
  grep -qxF "pw=unset nodes=unset held=1" "$WORK/out" || fail "REDLOCK_NODES with a password reached the command: $(cat "$WORK/out")"
  REDLOCK_PASSWORD=s3cret REDLOCK_NODES=$with_user run exec se -- sh -c "$SHOW_ENV"
  expect_rc 0 "exec with a user in REDLOCK_NODES"
  grep -qxF "pw=unset nodes=unset held=1" "$WORK/out" || fail "REDLOCK_NODES with user info reached the command: $(cat "$WORK/out")"
  note "REDLOCK_NODES with user info removed"

  REDLOCK_PASSWORD=s3cret REDLOCK_NODES=$with_user run exec se --keep-secret-env -- sh -c "$SHOW_ENV"
  expect_rc 0 "exec --keep-secret-env"
  grep -qxF "pw=s3cret nodes=$with_user held=1" "$WORK/out" || fail "--keep-secret-env: $(cat "$WORK/out")"
  # A wrapper that runs redlock again needs them, and gets them.
  REDLOCK_PASSWORD=s3cret run --user alice exec se --keep-secret-env -- sh -c "\"$REDLOCK\" --user alice status --json se"
  expect_rc 0 "redlock inside exec --keep-secret-env"
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["held_by_quorum"]' "$WORK/out" ||
    fail "status inside exec --keep-secret-env: $(cat "$WORK/out")"
  note "--keep-secret-env keeps them"

  # Nor through redlock's own /proc entries (the command is its child; the
  # pattern is split so that redlock's command line does not hold it).
  # shellcheck disable=SC2016
  local peek='tr "\0" "\n" </proc/$PPID/environ | grep -c s3c""ret; tr "\0" " " </proc/$PPID/cmdline | grep -c s3c""ret; true'
  REDLOCK_PASSWORD=s3cret REDLOCK_NODES=$with_pw run exec se -- sh -c "$peek"
  expect_rc 0 "exec reading its parent's environ"
  [ "$(tr '\n' ' ' <"$WORK/out")" = "0 0 " ] || fail "the secret is readable in /proc/PPID: $(cat "$WORK/out")"
  REDLOCK_NODES=$plain run -n "$with_pw" exec se -- sh -c "$peek"
  expect_rc 0 "exec with a password in --nodes"
  [ "$(tr '\n' ' ' <"$WORK/out")" = "0 0 " ] || fail "the --nodes password is readable in /proc/PPID: $(cat "$WORK/out")"
  note "the secrets are gone from redlock's /proc/PID/environ and cmdline too"
}

# A password on the command line (visible in ps) and a TLS key that others
# can read are warned about, once.
case_secret_warn() {
  rig_up --acl-user alice --acl-pass s3cret
  local with_pw=${REDLOCK_NODES//redis:\/\//redis://alice:s3cret@}
  run -n "$with_pw" status sw
  expect_rc 0 "status with a password in --nodes"
  [ "$(grep -c 'warning' "$WORK/err")" = 1 ] || fail "expected one warning: $(cat "$WORK/err")"
  grep -q "^redlock: warning: --nodes: .*password.*ps" "$WORK/err" || fail "warning text: $(cat "$WORK/err")"
  grep -q s3cret "$WORK/err" && fail "the warning quotes the password: $(cat "$WORK/err")"
  REDLOCK_NODES=$with_pw run status sw
  expect_rc 0 "status with a password in REDLOCK_NODES"
  [ ! -s "$WORK/err" ] || fail "a password in the environment is not on the command line: $(cat "$WORK/err")"
  REDLOCK_PASSWORD=s3cret run -n "${REDLOCK_NODES//redis:\/\//redis://alice@}" status sw
  expect_rc 0 "status with a user in --nodes"
  [ ! -s "$WORK/err" ] || fail "a user without a password was warned about: $(cat "$WORK/err")"
  note "a password in --nodes: one warning, the password not quoted"

  # A node URI given where it does not belong is quoted without its password.
  run -n "$REDLOCK_NODES" redis://:hunter2@b:2 status sw
  expect_rc 64 "a stray URI before the command"
  grep -q hunter2 "$WORK/err" && fail "the error quotes the password: $(cat "$WORK/err")"
  run -n "$REDLOCK_NODES" status sw redis://:hunter2@b:2
  expect_rc 64 "a stray URI after the lock name"
  grep -q hunter2 "$WORK/err" && fail "the error quotes the password: $(cat "$WORK/err")"
  grep -q 'redis://:\*\*\*\*\*\*\*@b:2' "$WORK/err" || fail "no masked URI: $(cat "$WORK/err")"
  # A password longer than the message is cut to: masked before the cut.
  local long_pw
  long_pw=$(printf 'hunter3%.0s' $(seq 1 200))
  run -n "$REDLOCK_NODES" status sw "redis://:$long_pw@b:2"
  expect_rc 64 "a stray URI with a 1 400-byte password"
  grep -q hunter3 "$WORK/err" && fail "the error quotes the long password: $(head -c 300 "$WORK/err")"
  grep -q 'redis://:\*\*\*\*' "$WORK/err" || fail "no masked long URI: $(head -c 300 "$WORK/err")"
  note "a stray URI in the arguments: quoted with its password masked"

  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=redlock-test -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null || fail "openssl"
  for mode in 640 604 644; do
    chmod "$mode" "$WORK/key.pem"
    REDLOCK_PASSWORD=s3cret run --user alice --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" status sw
    expect_rc 0 "status with a key of mode $mode"
    [ "$(grep -c "warning: --tls-key: .*key.pem.*readable" "$WORK/err")" = 1 ] ||
      fail "key mode $mode: expected one warning: $(cat "$WORK/err")"
  done
  chmod 600 "$WORK/key.pem"
  REDLOCK_PASSWORD=s3cret run --user alice --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" status sw
  expect_rc 0 "status with a key of mode 600"
  [ ! -s "$WORK/err" ] || fail "mode 600 key warned: $(cat "$WORK/err")"
  note "a TLS key readable by group or others: one warning; 600: none"
}

# What came from a server reaches the terminal escaped: no control byte, no
# byte that is not UTF-8, no C1 control.
ESC_FIELD=$'\e]0;owned\a\e[31mEVIL'
expect_clean() {
  python3 - "$@" <<'PYEOF' || fail "control bytes in the output of $1"
import re, sys
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    bad = re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", data)
    assert not bad, "%s: control byte %r at %d: %r" % (path, bad.group(), bad.start(), data)
    text = data.decode("utf-8")  # raises on bytes that are not UTF-8
    assert not re.search("[\x80-\x9f]", text), "%s: C1 control: %r" % (path, data)
PYEOF
}

case_escape() {
  rig_up
  for p in $PORTS; do
    redis-cli -p "$p" HSET esc "$ESC_FIELD" 1 >/dev/null
    redis-cli -p "$p" PEXPIRE esc 60000 >/dev/null
    redis-cli -p "$p" HSET esc2 $'\xff\xfe\xc2\x9b2Jbad' 1 >/dev/null
    redis-cli -p "$p" PEXPIRE esc2 60000 >/dev/null
  done
  run status esc
  expect_rc 0 "status of a lock with a hostile field"
  expect_clean "status esc" "$WORK/out" "$WORK/err"
  grep -qF '\x1b]0;owned\x07\x1b[31mEVIL' "$WORK/out" || fail "the field is not shown escaped: $(cat -v "$WORK/out")"
  run status esc2
  expect_rc 0 "status of a lock with a field that is not UTF-8"
  expect_clean "status esc2" "$WORK/out" "$WORK/err"
  grep -qF '\xff\xfe\xc2\x9b2Jbad' "$WORK/out" || fail "the field is not shown escaped: $(cat -v "$WORK/out")"
  note "status escapes the holder field"

  run status --json esc
  expect_rc 0 "status --json esc"
  expect_clean "status --json esc" "$WORK/out"
  python3 - "$WORK/out" "$ESC_FIELD" <<'PYEOF' || fail "JSON holder: $(cat -v "$WORK/out")"
import json, sys
s = json.load(open(sys.argv[1], encoding="utf-8"))
assert s["holder"] == sys.argv[2], s
PYEOF
  run status --json esc2
  expect_rc 0 "status --json esc2"
  expect_clean "status --json esc2" "$WORK/out"
  python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$WORK/out" ||
    fail "status --json esc2 is not valid JSON: $(cat -v "$WORK/out")"
  note "status --json stays valid UTF-8 JSON"

  run unlock $'\e[2Jname' --force
  expect_rc 0 "unlock of a name with control bytes"
  expect_clean "unlock" "$WORK/out" "$WORK/err"
  note "unlock escapes the name"

  # A server whose replies are errors full of control sequences.
  python3 "$CLI_DIR/evil_server.py" "$WORK/evil.port" &
  local evil_pid=$!
  bg_add "$evil_pid"
  wait_file "$WORK/evil.port" 10 || fail "the evil server did not start"
  local evil="redis://127.0.0.1:$(cat "$WORK/evil.port")"
  run -vv -n "$evil" exec ev --wait 0 --unavailable-timeout 500 -- touch "$WORK/ran"
  [ "$RC" != 0 ] || fail "exec against the evil server succeeded"
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  grep -q EVIL "$WORK/err" || fail "the server's message is not shown: $(cat -v "$WORK/err")"
  expect_clean "exec against the evil server" "$WORK/out" "$WORK/err"
  run -n "$evil" status ev
  grep -q EVIL "$WORK/out" "$WORK/err" || fail "status: the server's message is not shown: $(cat -v "$WORK/out")"
  expect_clean "status against the evil server" "$WORK/out" "$WORK/err"
  run -n "$evil" --json status ev
  expect_clean "status --json against the evil server" "$WORK/out" "$WORK/err"
  python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$WORK/out" ||
    fail "status --json against the evil server: $(cat -v "$WORK/out")"
  run -n "$evil" unlock ev --force
  expect_clean "unlock against the evil server" "$WORK/out" "$WORK/err"
  kill "$evil_pid" 2>/dev/null || true
  wait "$evil_pid" 2>/dev/null || true
  note "a server's error text is escaped on stderr and in JSON"
}

# ---- flock(1) habits ---------------------------------------------------------

case_flock() {
  rig_up
  run exec fl -c 'echo "c:$REDLOCK_NAME:$REDLOCK_HELD"; exit 4'
  expect_rc 4 "exec -c"
  grep -qx "c:fl:1" "$WORK/out" || fail "-c: $(cat "$WORK/out")"
  run exec fl --command='echo "$0"'
  expect_rc 0 "exec --command"
  grep -qx "/bin/sh" "$WORK/out" || fail "--command does not run /bin/sh: $(cat "$WORK/out")"
  note "-c/--command runs /bin/sh -c STRING; REDLOCK_HELD=1"

  write_trap_child
  "$REDLOCK" exec fl -- "$WORK/child.sh" "$WORK" 2>"$WORK/first.err" &
  first=$!
  bg_add "$first"
  wait_file "$WORK/started" 20 || fail "first exec did not start its command"
  for args in "-N" "--nonblock" "-w 0" "--wait=0s"; do
    t0=$(now_ms)
    # shellcheck disable=SC2086
    run exec fl $args -- touch "$WORK/second-ran"
    t=$(($(now_ms) - t0))
    expect_rc 75 "busy lock, $args"
    [ "$t" -lt 2000 ] || fail "$args waited $t ms"
  done
  run exec fl -N -E 3 -- touch "$WORK/second-ran"
  expect_rc 3 "-N -E 3 on a busy lock"
  run exec fl --conflict-exit-code 0 --nonblock -- touch "$WORK/second-ran"
  expect_rc 0 "--conflict-exit-code 0 on a busy lock"
  [ ! -e "$WORK/second-ran" ] || fail "the second command ran without the lock"
  note "-N/--nonblock and -E/--conflict-exit-code"

  for spec in "600ms 550 3000" "1.5s 1450 4000" "0.01m 550 3000"; do
    set -- $spec
    t0=$(now_ms)
    run exec fl -w "$1" -E 9 -- touch "$WORK/second-ran"
    t=$(($(now_ms) - t0))
    expect_rc 9 "busy lock, -w $1 -E 9"
    [ "$t" -ge "$2" ] && [ "$t" -lt "$3" ] || fail "-w $1 gave up after $t ms"
  done
  note "-w takes units (600ms, 1.5s, 0.01m)"

  # -v: how long it waited and on which nodes. The holder ends in ~1 s.
  (sleep 1; touch "$WORK/stop") &
  bg_add "$!"
  run -v exec fl -w 20s -- true
  expect_rc 0 "-v exec after a wait"
  grep -Eq "^redlock: fl: acquired after [0-9]+ ms" "$WORK/err" || fail "-v: $(cat "$WORK/err")"
  waited=$(sed -n 's/.*acquired after \([0-9]*\) ms.*/\1/p' "$WORK/err")
  [ "$waited" -ge 500 ] || fail "-v says it waited $waited ms, the holder held it ~1 s"
  granted=0
  for p in $PORTS; do grep "acquired after" "$WORK/err" | grep -q "127.0.0.1:$p\b" && granted=$((granted + 1)); done
  [ "$granted" -ge 3 ] || fail "-v names $granted granting nodes: $(cat "$WORK/err")"
  wait_pid "$first" 20 || fail "first exec did not end"
  note "-v: waited $waited ms, names $granted nodes"

  # Durations everywhere.
  run exec fl --lease 1.5s -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  expect_rc 0 "--lease 1.5s"
  v=$(cat "$WORK/out")
  [ "$v" -gt 1000 ] && [ "$v" -le 1500 ] || fail "--lease 1.5s: REDLOCK_VALIDITY_MS=$v"
  run exec fl --lease 2m -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  v=$(cat "$WORK/out")
  [ "$v" -gt 100000 ] && [ "$v" -le 120000 ] || fail "--lease 2m: REDLOCK_VALIDITY_MS=$v"
  run exec fl --lease 2500 -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  v=$(cat "$WORK/out")
  [ "$v" -gt 2000 ] && [ "$v" -le 2500 ] || fail "--lease 2500 (bare milliseconds): REDLOCK_VALIDITY_MS=$v"
  run --watchdog-lease 1.2s exec fl -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  v=$(cat "$WORK/out")
  [ "$v" -gt 700 ] && [ "$v" -le 1200 ] || fail "--watchdog-lease 1.2s: REDLOCK_VALIDITY_MS=$v"
  rm -f "$WORK/got" "$WORK/started" "$WORK/stop"
  t0=$(now_ms)
  run exec fl --lease 0.5s --grace 0.2s -- sh -c 'trap "" TERM; sleep 10'
  t=$(($(now_ms) - t0))
  expect_rc 76 "--lease 0.5s --grace 0.2s"
  [ "$t" -lt 3000 ] || fail "--grace 0.2s: SIGKILL came after $t ms"
  run --timeout 200ms --connect-timeout 1s exec fl --unavailable-timeout 5s -- true
  expect_rc 0 "--timeout/--connect-timeout/--unavailable-timeout with units"
  note "--lease, --watchdog-lease, --grace, --timeout, --connect-timeout, --unavailable-timeout take units"
}

# ---- configuration ------------------------------------------------------------

# The node count and quorum `status --json` reports.
nodes_quorum() {
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(len(s["nodes"]), s["quorum"])' "$WORK/out"
}

case_config() {
  rig_up --acl-user alice --acl-pass s3cret
  local all=$REDLOCK_NODES three two
  three=$(echo "$all" | cut -d, -f1-3)
  two=$(echo "$all" | cut -d, -f1-2)
  unset REDLOCK_NODES REDLOCK_CONFIG
  export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/xdg
  mkdir -p "$HOME/.config/redlock" "$XDG_CONFIG_HOME/redlock" "$WORK/etc"
  printf 's3cret\n' >"$WORK/pw"
  chmod 600 "$WORK/pw"
  printf 'wrong\n' >"$WORK/wrongpw"
  chmod 600 "$WORK/wrongpw"
  cat >"$WORK/five.conf" <<CONF
# every key, blank lines and comments
nodes = $all

user = alice
password_file = $WORK/pw
   quorum=all
CONF
  printf 'nodes = %s\nuser = alice\npassword_file = %s\n' "$three" "$WORK/pw" >"$WORK/three.conf"
  printf 'nodes = %s\nuser = alice\npassword_file = %s\n' "$two" "$WORK/pw" >"$HOME/.config/redlock/config"

  run --config "$WORK/five.conf" status --json cf
  expect_rc 0 "--config"
  [ "$(nodes_quorum)" = "5 5" ] || fail "--config: $(nodes_quorum)"
  REDLOCK_CONFIG=$WORK/three.conf run status --json cf
  expect_rc 0 "REDLOCK_CONFIG"
  [ "$(nodes_quorum)" = "3 2" ] || fail "REDLOCK_CONFIG: $(nodes_quorum)"
  REDLOCK_CONFIG=$WORK/three.conf run --config "$WORK/five.conf" status --json cf
  [ "$(nodes_quorum)" = "5 5" ] || fail "--config must beat REDLOCK_CONFIG: $(nodes_quorum)"
  XDG_CONFIG_HOME= run status --json cf
  expect_rc 0 "~/.config/redlock/config"
  [ "$(nodes_quorum)" = "2 2" ] || fail "~/.config/redlock/config: $(nodes_quorum)"
  cp "$WORK/three.conf" "$XDG_CONFIG_HOME/redlock/config"
  run status --json cf
  expect_rc 0 "\$XDG_CONFIG_HOME/redlock/config"
  [ "$(nodes_quorum)" = "3 2" ] || fail "XDG_CONFIG_HOME must beat ~/.config: $(nodes_quorum)"
  REDLOCK_CONFIG=$WORK/five.conf run status --json cf
  [ "$(nodes_quorum)" = "5 5" ] || fail "REDLOCK_CONFIG must beat XDG_CONFIG_HOME: $(nodes_quorum)"
  note "which file: --config > \$REDLOCK_CONFIG > \$XDG_CONFIG_HOME > ~/.config"

  # command line > environment > config file.
  REDLOCK_NODES=$three run --config "$WORK/five.conf" status --json cf
  [ "$(nodes_quorum)" = "3 3" ] || fail "REDLOCK_NODES must beat the config's nodes: $(nodes_quorum)"
  REDLOCK_NODES=$three run --config "$WORK/five.conf" -n "$two" -q 1 status --json cf
  [ "$(nodes_quorum)" = "2 1" ] || fail "--nodes/-q must beat REDLOCK_NODES/quorum: $(nodes_quorum)"
  note "nodes, quorum: command line > environment > config"

  printf 'nodes = %s\nuser = alice\npassword_file = %s\n' "$all" "$WORK/wrongpw" >"$WORK/wrong.conf"
  run --config "$WORK/wrong.conf" exec cf -- true
  expect_rc 77 "password_file with the wrong password"
  REDLOCK_PASSWORD=s3cret run --config "$WORK/wrong.conf" exec cf -- true
  expect_rc 0 "REDLOCK_PASSWORD must beat password_file"
  REDLOCK_PASSWORD=wrong run --config "$WORK/five.conf" exec cf -- true
  expect_rc 77 "REDLOCK_PASSWORD must beat password_file (wrong one)"
  REDLOCK_PASSWORD=wrong run --config "$WORK/wrong.conf" --password-file "$WORK/pw" exec cf -- true
  expect_rc 0 "--password-file must beat REDLOCK_PASSWORD"
  run -n "$all" --user alice --password-file "$WORK/pw" --config /dev/null exec cf -- true
  expect_rc 0 "--password-file alone"
  printf 'nodes = %s\npassword_file = %s\nuser = bob\n' "$all" "$WORK/pw" >"$WORK/bob.conf"
  run --config "$WORK/bob.conf" --user alice exec cf -- true
  expect_rc 0 "--user must beat the config's user"
  note "password: --password-file > REDLOCK_PASSWORD > password_file; --user > user"

  # wait and lease: defaults for exec, overridden by the command line.
  # A 1.5 s lease derives a 15 ms node timeout, too tight for a loaded CI
  # machine; the runs that use it set their own.
  printf 'nodes = %s\nuser = alice\npassword_file = pw\nwait = 0\nlease = 1.5s\n' "$all" >"$WORK/wl.conf"
  run --config "$WORK/wl.conf" --timeout 300ms exec cf -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  expect_rc 0 "lease from the config (and a password_file relative to the config)"
  v=$(cat "$WORK/out")
  [ "$v" -gt 1000 ] && [ "$v" -le 1500 ] || fail "lease = 1.5s: REDLOCK_VALIDITY_MS=$v"
  run --config "$WORK/wl.conf" exec cf --lease watchdog -- sh -c 'echo "$REDLOCK_VALIDITY_MS"'
  v=$(cat "$WORK/out")
  [ "$v" -gt 20000 ] || fail "--lease watchdog must beat lease =: REDLOCK_VALIDITY_MS=$v"
  write_trap_child
  REDLOCK_PASSWORD=s3cret "$REDLOCK" --config "$WORK/wl.conf" exec cf --lease watchdog -- "$WORK/child.sh" "$WORK" 2>"$WORK/first.err" &
  first=$!
  bg_add "$first"
  wait_file "$WORK/started" 20 || fail "first exec did not start its command: $(cat "$WORK/first.err")"
  t0=$(now_ms)
  run --config "$WORK/wl.conf" --timeout 300ms exec cf -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 75 "wait = 0 from the config"
  [ "$t" -lt 2000 ] || fail "wait = 0 waited $t ms"
  t0=$(now_ms)
  run --config "$WORK/wl.conf" --timeout 300ms exec cf -w 700ms -- touch "$WORK/ran"
  t=$(($(now_ms) - t0))
  expect_rc 75 "-w 700ms over wait = 0"
  [ "$t" -ge 650 ] || fail "-w 700ms must beat wait = 0: gave up after $t ms"
  (sleep 1; touch "$WORK/stop") &
  bg_add "$!"
  run --config "$WORK/wl.conf" --timeout 300ms exec cf --wait forever -- touch "$WORK/ran"
  expect_rc 0 "--wait forever over wait = 0"
  [ -e "$WORK/ran" ] || fail "the command did not run"
  wait_pid "$first" 20 || fail "first exec did not end"
  note "wait and lease from the config; -w, --wait forever and --lease watchdog override them"

  # Mistakes in the file: usage errors that name the file and line.
  while IFS='|' read -r want text; do
    printf '%b' "$text" >"$WORK/bad.conf"
    run --config "$WORK/bad.conf" status x
    expect_rc 64 "config '$text'"
    expect_one_error_line "config '$text'"
    grep -q -- "$want" "$WORK/err" || fail "config '$text': error does not mention '$want': $(cat "$WORK/err")"
  done <<CONF
bad.conf:2: unknown key 'nodez'|# x\nnodez = redis://h\n
bad.conf:1: .*password_file|password = hunter2\n
bad.conf:1: expected 'key = value'|nodes\n
bad.conf:1: empty value|nodes =\n
bad.conf:1: .*wait|wait = soon\n
bad.conf:1: .*lease|lease = 0\n
bad.conf:1: .*quorum|quorum = most\n
bad.conf:1: .*NUL|nodes = a\0b\n
password_file|nodes = $all\nuser = alice\npassword_file = $WORK/nope\n
CONF
  grep -q hunter2 "$WORK/err" && fail "the error quotes the password"
  printf '\n' >"$WORK/empty-pw"
  printf 'nodes = %s\nuser = alice\npassword_file = %s\n' "$all" "$WORK/empty-pw" >"$WORK/bad.conf"
  run --config "$WORK/bad.conf" status x
  expect_rc 64 "an empty password file"
  note "mistakes in the file: exit 64, FILE:LINE"

  # TLS keys, relative to the config's directory.
  "$RIG" stop --dir "$RIG_DIR" >/dev/null
  rm -rf "$RIG_DIR"
  rig_up --tls
  local tls=${REDLOCK_NODES//redis:\/\//rediss:\/\/}
  unset REDLOCK_NODES
  mkdir -p "$WORK/tlsconf"
  cp "$RIG_DIR/tls/ca.crt" "$RIG_DIR/tls/client.crt" "$RIG_DIR/tls/client.key" "$WORK/tlsconf/"
  chmod 600 "$WORK/tlsconf/client.key"
  printf 'nodes = %s\ntls_ca = ca.crt\ntls_cert = client.crt\ntls_key = %s\ntls_server_name = localhost\n' \
    "$tls" "$WORK/tlsconf/client.key" >"$WORK/tlsconf/config"
  run --config "$WORK/tlsconf/config" exec cf -- true
  expect_rc 0 "TLS from the config: $(cat "$WORK/err")"
  [ ! -s "$WORK/err" ] || fail "TLS from the config: $(cat "$WORK/err")"
  run --config "$WORK/tlsconf/config" --tls-server-name not-the-server exec cf --wait 1s -- true
  expect_rc 77 "--tls-server-name must beat tls_server_name"
  chmod 644 "$WORK/tlsconf/client.key"
  run --config "$WORK/tlsconf/config" exec cf -- true
  expect_rc 0 "TLS from the config, key readable by others"
  grep -q "warning: .*client.key.*readable" "$WORK/err" || fail "no warning for the config's key: $(cat "$WORK/err")"
  note "tls_ca/tls_cert/tls_key/tls_server_name from the config, relative to it"
}

# No nodes configured: exit 64 naming the ways to configure them; nothing
# is contacted (there used to be a silent default of 127.0.0.1:7001-7005).
case_nodefault() {
  [ ! -e /etc/redlock/config ] ||
    fail "this machine has /etc/redlock/config: the test needs a machine without one"
  unset REDLOCK_NODES REDLOCK_CONFIG
  export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/xdg
  for args in "status x" "unlock x --force" "exec x -- touch $WORK/ran" "-q 1 exec x -c true"; do
    # shellcheck disable=SC2086
    run $args
    expect_rc 64 "redlock $args without nodes"
    expect_one_error_line "redlock $args without nodes"
    for w in --nodes REDLOCK_NODES --config REDLOCK_CONFIG "$XDG_CONFIG_HOME/redlock/config" /etc/redlock/config; do
      grep -qF -- "$w" "$WORK/err" || fail "redlock $args: the message does not name $w: $(cat "$WORK/err")"
    done
  done
  [ ! -e "$WORK/ran" ] || fail "the command ran"
  # An empty $REDLOCK_NODES is no nodes either, and so is a config without them.
  printf 'quorum = 2\n' >"$WORK/q.conf"
  REDLOCK_NODES= run --config "$WORK/q.conf" status x
  expect_rc 64 "a config without nodes"
  grep -q "no nodes" "$WORK/err" || fail "$(cat "$WORK/err")"
  # The rig and the demo need no nodes.
  run rig status --base-port 1
  [ "$RC" != 64 ] || fail "rig status wants nodes: $(cat "$WORK/err")"
  note "no nodes configured: exit 64 naming --nodes, REDLOCK_NODES and the config files"
}

# The man page documents every option the help texts list.
case_manpage() {
  [ -f "$MAN_PAGE" ] || fail "no man page at $MAN_PAGE"
  local c o missing=""
  # The page as plain text: roff's escaped hyphens and font changes removed.
  sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$MAN_PAGE" >"$WORK/man.txt"
  for c in "" exec status unlock rig demo; do
    # shellcheck disable=SC2086
    for o in $("$REDLOCK" $c --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
      grep -qF -- "$o" "$WORK/man.txt" || missing="$missing $o"
    done
  done
  [ -z "$missing" ] || fail "options missing from the man page:$missing"
  # Short options: "-x, --long" in a help text is "-x, --long" in the page.
  for c in "" exec; do
    # shellcheck disable=SC2086
    for o in $("$REDLOCK" $c --help | grep -oE -- '-[A-Za-z], --[a-z][a-z-]+' | tr ' ' '_'); do
      grep -qF -- "${o//_/ }" "$WORK/man.txt" || missing="$missing ${o//_/ }"
    done
  done
  grep -qF -- "-V, --version" "$WORK/man.txt" || missing="$missing -V"
  [ -z "$missing" ] || fail "short options missing from the man page:$missing"
  # The configuration file: every key, the places, the precedence.
  for k in nodes tls_ca tls_cert tls_key tls_server_name user password_file wait lease quorum \
    REDLOCK_CONFIG XDG_CONFIG_HOME /etc/redlock/config --keep-secret-env REDLOCK_HELD; do
    grep -qF -- "$k" "$WORK/man.txt" || missing="$missing $k"
  done
  [ -z "$missing" ] || fail "configuration missing from the man page:$missing"
  grep -q "command line beats the" "$WORK/man.txt" || fail "the man page does not state the precedence"
  for code in 64 69 70 75 76 77 78; do
    grep -q "$code" "$WORK/man.txt" || fail "exit status $code missing from the man page"
  done
  if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$MAN_PAGE" >/dev/null 2>"$WORK/man.err" || fail "man -l failed: $(cat "$WORK/man.err")"
  fi
  note "man page lists every option and exit status"
}

# status --metrics: a one-shot scrape in the Prometheus text format, read by
# a strict checker; node labels without user info; a node that did not
# answer shows as failures.
case_metrics() {
  local check="$CLI_DIR/prom_check.py" p5
  python3 "$check" --self-test >/dev/null || fail "prom_check.py --self-test"
  rig_up --acl-user alice --acl-pass s3cretpw
  run status --metrics
  expect_rc 0 "status --metrics"
  python3 "$check" "$WORK/out" >/dev/null 2>"$WORK/check.err" ||
    fail "status --metrics: $(cat "$WORK/check.err")"
  [ "$(grep -c '^redlock_node_failures_total{node="127.0.0.1:[0-9]*"} 0$' "$WORK/out")" = 5 ] ||
    fail "five node labels with no failures expected: $(grep node_failures "$WORK/out")"
  for m in redlock_acquire_attempts_total redlock_acquire_duration_seconds_count \
    redlock_handoff_duration_seconds_count redlock_renewal_lag_seconds_count; do
    grep -q "^$m 0$" "$WORK/out" || fail "status --metrics: no '$m 0'"
  done
  grep -q '^redlock_renewal_lag_seconds_bucket{le="+Inf"} 0$' "$WORK/out" || fail "no +Inf bucket"
  note "status --metrics parses with HELP/TYPE, counters, node failures and histograms"

  # User info in the node list: labels stay host:port; the password (from
  # the environment) and the user name appear nowhere.
  p5=${PORTS##* }
  REDLOCK_NODES=${REDLOCK_NODES//redis:\/\//redis://alice@} REDLOCK_PASSWORD=s3cretpw \
    run status --metrics mlock
  expect_rc 0 "status --metrics NAME with an ACL user"
  python3 "$check" "$WORK/out" >/dev/null || fail "ACL scrape does not parse"
  ! grep -q -e alice -e s3cretpw "$WORK/out" || fail "user info in the metrics: $(cat "$WORK/out")"
  note "no user info in node labels"

  # One node frozen: still a quorum (exit 0), and its failures are counted.
  rig_node freeze 5
  run --timeout 200ms status --metrics
  rig_node thaw 5
  expect_rc 0 "status --metrics with one node frozen"
  python3 "$check" "$WORK/out" >/dev/null || fail "scrape with a frozen node does not parse"
  grep -q "^redlock_node_failures_total{node=\"127.0.0.1:$p5\"} [1-9]" "$WORK/out" ||
    fail "the frozen node shows no failure: $(grep node_failures "$WORK/out")"
  note "a node that did not answer shows as failures"

  run --json status --metrics
  expect_rc 64 "--metrics with --json"
  expect_one_error_line "--metrics with --json"
  run status --help
  grep -q -- "--metrics" "$WORK/out" || fail "status --help does not mention --metrics"
}

# Sentinel members: lists split only before a scheme (a sentinel URI keeps
# its own commas), and -n given twice concatenates.
case_sentinel() {
  local attempt s uri1 uri2
  for attempt in 1 2 3; do
    BASE=$(free_base 7) || fail "no free ports"
    "$RIG" start --sentinel 2 --base-port "$BASE" --dir "$RIG_DIR" >/dev/null && break
    "$RIG" stop --dir "$RIG_DIR" >/dev/null 2>&1 || true
    rm -rf "$RIG_DIR"
    [ "$attempt" != 3 ] || fail "could not start the sentinel rig"
  done
  s=$("$RIG" env --dir "$RIG_DIR" | sed -n 's/^RIG_SENTINELS=//p')
  case "$s" in *,*) ;; *) fail "RIG_SENTINELS is not a list: '$s'";; esac
  uri1="redis-sentinel://$s#group1"
  uri2="redis-sentinel://$s#group2"
  unset REDLOCK_NODES
  run -n "$uri1" -n "$uri2" -q all exec sn -- true
  expect_rc 0 "exec over two sentinel groups (-n twice)"
  REDLOCK_NODES="$uri1,$uri2" run --json status sn
  expect_rc 0 "status with two sentinel URIs in REDLOCK_NODES"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert len(s["nodes"]) == 2, s' \
    "$WORK/out" || fail "REDLOCK_NODES with two sentinel URIs: $(cat "$WORK/out")"
  printf 'nodes = %s,%s\n' "$uri1" "$uri2" >"$WORK/s.conf"
  run --config "$WORK/s.conf" -q all exec sn -- true
  expect_rc 0 "exec with two sentinel URIs in a config file"
  note "sentinel URIs in -n (twice), REDLOCK_NODES and a config file"
}

# Starts `redlock rig --sentinel $1` on free ports (the tool's own rig
# command) and sets BASE and SENTINEL_URIS (one redis-sentinel:// URI per
# group, from `redlock rig env`).
sentinel_rig_up() {
  local attempt
  export REDLOCK_RIG_DIR=$RIG_DIR
  for attempt in 1 2 3; do
    BASE=$(free_base $((2 * $1 + 3))) || fail "no free ports"
    run rig start --sentinel "$1" --base-port "$BASE"
    [ "$RC" = 0 ] && break
    "$RIG" stop --dir "$RIG_DIR" >/dev/null 2>&1 || true
    rm -rf "$RIG_DIR"
    [ "$attempt" != 3 ] || fail "could not start the sentinel rig: $(cat "$WORK/err")"
  done
  run rig env --base-port "$BASE"
  expect_rc 0 "rig env"
  SENTINEL_URIS=$(sed -n 's/^RIG_URIS=//p' "$WORK/out")
  case "$SENTINEL_URIS" in redis-sentinel://*) ;; *) fail "rig env: no RIG_URIS: $(cat "$WORK/out")";; esac
}

# --replica-acks K and --replica-timeout: validation (usage errors, 64),
# the config keys, and command line > config file. Which K is in effect is
# read from exec -v, which names the replicas that acknowledged each grant
# when K > 0.
case_replica_acks() {
  local v
  for v in 65 -1 x '' 1.5 1e1 99999999999999999999; do
    run -n redis://127.0.0.1:1 exec ra --replica-acks "$v" -- true
    expect_rc 64 "--replica-acks '$v'"
    expect_one_error_line "--replica-acks '$v'"
    grep -q "^redlock: --replica-acks: .*(0\.\.64)" "$WORK/err" || fail "--replica-acks '$v': $(cat "$WORK/err")"
  done
  for v in 0 0ms x 1.5ms 3000000000; do
    run -n redis://127.0.0.1:1 exec ra --replica-acks 1 --replica-timeout "$v" -- true
    expect_rc 64 "--replica-timeout '$v'"
    expect_one_error_line "--replica-timeout '$v'"
  done
  run -n redis://127.0.0.1:1 exec ra --replica-acks=64 --replica-timeout=1.5s --wait 0 -- true
  [ "$RC" != 64 ] || fail "--replica-acks 64 --replica-timeout 1.5s refused: $(cat "$WORK/err")"
  run -n redis://127.0.0.1:1 exec ra --replica-timeout 2s --wait 0 -- true
  grep -q "^redlock: warning: --replica-timeout: has no effect without --replica-acks" "$WORK/err" ||
    fail "--replica-timeout without --replica-acks: no warning: $(cat "$WORK/err")"
  printf 'replica_acks = 65\n' >"$WORK/bad.conf"
  run --config "$WORK/bad.conf" -n redis://127.0.0.1:1 exec ra -- true
  expect_rc 64 "replica_acks = 65 in the config file"
  grep -q "bad.conf:1: replica_acks: '65' is not a number of replicas" "$WORK/err" || fail "config: $(cat "$WORK/err")"
  printf 'replica_timeout = soon\n' >"$WORK/bad.conf"
  run --config "$WORK/bad.conf" -n redis://127.0.0.1:1 exec ra -- true
  expect_rc 64 "replica_timeout = soon in the config file"
  note "--replica-acks / --replica-timeout / config keys: bad values are usage errors"

  sentinel_rig_up 1
  printf 'nodes = %s\nreplica_acks = 1\nreplica_timeout = 2s\n' "$SENTINEL_URIS" >"$WORK/ha.conf"
  run --config "$WORK/ha.conf" -v exec ra -- true
  expect_rc 0 "exec with replica_acks = 1 from the config file"
  grep -q "acquired after .*replica(s) acked" "$WORK/err" || fail "replica_acks from the config not in effect: $(cat "$WORK/err")"
  run --config "$WORK/ha.conf" -v exec ra --replica-acks 0 -- true
  expect_rc 0 "exec --replica-acks 0 over the config's 1"
  grep -q "acquired after" "$WORK/err" || fail "no -v line: $(cat "$WORK/err")"
  grep -q "replica(s) acked" "$WORK/err" && fail "--replica-acks 0 must beat the config file: $(cat "$WORK/err")"
  run -n "$SENTINEL_URIS" -v exec ra --replica-acks 1 -- true
  expect_rc 0 "exec --replica-acks 1 on a group with one replica"
  # The library reports how many replicas acknowledged the grant.
  grep -q "(1 replica(s) acked)" "$WORK/err" ||
    fail "no acknowledgement reported: $(cat "$WORK/err")"
  note "K reaches the library: the grant was acknowledged by 1 replica"
  # Two asked of a group with one replica: no grant can count.
  run -n "$SENTINEL_URIS" exec ra --replica-acks 2 --replica-timeout 100ms -- true
  expect_rc 69 "exec --replica-acks 2 on a group with one replica"
  grep -q "1 of 2 replicas acknowledged" "$WORK/err" || fail "no reason: $(cat "$WORK/err")"
  note "--replica-acks 2 on a group with one replica: refused, saying why"
  run rig stop --base-port "$BASE"
  expect_rc 0 "rig stop"
  note "replica_acks: command line > config file, passed to the lock"
}

# redlock rig --sentinel G: start, status (text and JSON: roles, groups,
# sentinels), env, stop; and its usage errors.
case_rig_sentinel() {
  local p
  run rig start --sentinel 0
  expect_rc 64 "rig start --sentinel 0"
  run rig start --sentinel 17
  expect_rc 64 "rig start --sentinel 17"
  run rig start --sentinel 1 --nodes-count 3
  expect_rc 64 "--sentinel with --nodes-count"
  run rig status --sentinel 1
  expect_rc 64 "--sentinel with status"
  sentinel_rig_up 1
  run rig status --base-port "$BASE"
  expect_rc 0 "rig status"
  grep -q "^1 $BASE [0-9]* up master group1" "$WORK/out" || fail "rig status: $(cat "$WORK/out")"
  grep -q "^s3 $((BASE + 4)) [0-9]* up sentinel" "$WORK/out" || fail "rig status: $(cat "$WORK/out")"
  run --json rig status --base-port "$BASE"
  expect_rc 0 "rig status --json"
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
b = int(sys.argv[2])
assert [(n["port"], n["role"], n["group"], n["state"]) for n in s["nodes"]] == \
    [(b, "master", "group1", "up"), (b + 1, "replica", "group1", "up")], s
assert [(x["sentinel"], x["port"], x["state"]) for x in s["sentinels"]] == \
    [(i + 1, b + 2 + i, "up") for i in range(3)], s
' "$WORK/out" "$BASE" || fail "rig status JSON: $(cat "$WORK/out")"
  run -n "$SENTINEL_URIS" exec rs -- true
  expect_rc 0 "exec on the sentinel rig the tool started"
  run rig stop --base-port "$BASE"
  expect_rc 0 "rig stop"
  for p in $(seq "$BASE" $((BASE + 4))); do
    port_busy "$p" && fail "port $p still listening after rig stop"
  done
  note "rig --sentinel 1: start, status (text, JSON), env, stop"
}

# demo --sentinel: workers with --replica-acks 1 go on through the kill of
# group 1's master; the failover and the first acquire after it are timed.
case_demo_sentinel() {
  local base t0 t p
  export REDLOCK_RIG_DIR=$RIG_DIR
  run demo --groups 2
  expect_rc 64 "--groups without --sentinel"
  run demo --sentinel --nodes-count 3
  expect_rc 64 "--nodes-count with --sentinel"
  # Three groups: with replica acknowledgement a group whose master was
  # killed grants nothing until its restarted node has synced as the new
  # master's replica, so the workers go on through the other two.
  base=$(free_base 9) || fail "no free ports"
  t0=$(now_ms)
  run demo --sentinel --groups 3 --base-port "$base" --seconds 9 --workers 4
  t=$(($(now_ms) - t0))
  cat "$WORK/out"
  expect_rc 0 "demo --sentinel"
  grep -q '^PASS: no two of the [1-9][0-9]* critical sections overlapped' "$WORK/out" || fail "no PASS verdict"
  grep -q "SIGKILL group 1's master (node 1, port $base)" "$WORK/out" || fail "no master kill"
  grep -Eq '^  failover            [0-9]+ ms after the kill \(new master: port '"$((base + 1))"'\)' "$WORK/out" ||
    fail "no failover reported"
  grep -Eq '^  acquisitions        [0-9]+ \([1-9][0-9]* after group 1' "$WORK/out" || fail "the workers did not go on"
  grep -Eq '^  first acquire after the kill: [0-9]+ ms after it' "$WORK/out" || fail "no time to the first acquire"
  for p in $(seq "$base" $((base + 8))); do
    port_busy "$p" && fail "the demo left port $p of the rig it started listening"
  done
  note "demo --sentinel passed in $t ms"
  # The sentinel demo kills a master: never on a rig it did not start.
  "$RIG" start --base-port "$base" --nodes 3 --dir "$RIG_DIR" >/dev/null || fail "rig start"
  run demo --sentinel --groups 1 --base-port "$base"
  expect_rc 64 "demo --sentinel on a running rig"
  grep -q "runs only on a rig it starts" "$WORK/err" || fail "demo --sentinel on a running rig: $(cat "$WORK/err")"
  [ "$("$RIG" status --dir "$RIG_DIR" | awk '$4 != "up"' | wc -l)" = 0 ] || fail "the demo touched a rig it did not start"
  note "demo --sentinel refuses a rig it did not start"
}

"case_$CASE"
echo "PASS: cli_$CASE"
