# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers of the CLI tests (sourced by cli_test.sh).
# Every test starts its own rig on free ports (never 7001-7005) and stops
# it on exit through the trap installed by rig_up; every wait is bounded.

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

note() { echo "--- $*"; }

CLI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../fixture/ports.sh
. "$CLI_DIR/../fixture/ports.sh"

# Test-private state: a temp dir, removed with the rig on exit.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/redlock-cli-test.XXXXXX")
RIG_DIR=$WORK/rig
BG_PIDS=""

# The start time of process $1 (clock ticks after boot), or nothing if it
# is gone. The fields are counted after the ")" that ends the name, which
# may itself contain spaces.
start_time() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}' || true; }

# Adds processes to those killed on exit. Each is remembered with its start
# time, so that a pid the kernel gave to another process since (pids wrap
# around quickly on a busy machine) is never killed.
bg_add() {
  local p
  for p in "$@"; do BG_PIDS="$BG_PIDS $p:$(start_time "$p")"; done
}

cleanup() {
  local e p
  for e in $BG_PIDS; do
    p=${e%%:*}
    [ -n "${e#*:}" ] && [ "$(start_time "$p")" = "${e#*:}" ] && kill -KILL "$p" 2>/dev/null || true
  done
  if [ -f "$RIG_DIR/rig.conf" ]; then
    # Frozen nodes are thawed by `rig stop` (SIGCONT before SIGTERM).
    "$RIG" stop --dir "$RIG_DIR" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a five-node rig and exports REDLOCK_NODES for it. Arguments are
# passed on to `rig start` (e.g. --acl-user NAME --acl-pass PASS).
rig_up() {
  local attempt
  for attempt in 1 2 3; do
    BASE=$(free_base 5) || fail "no free ports"
    if "$RIG" start --nodes 5 --base-port "$BASE" --dir "$RIG_DIR" "$@" >/dev/null; then
      PORTS="$BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4))"
      REDLOCK_NODES=""
      for p in $PORTS; do REDLOCK_NODES="$REDLOCK_NODES${REDLOCK_NODES:+,}redis://127.0.0.1:$p"; done
      export REDLOCK_NODES
      return 0
    fi
    "$RIG" stop --dir "$RIG_DIR" >/dev/null 2>&1 || true
    rm -rf "$RIG_DIR"
    : "$attempt"
  done
  fail "could not start the rig"
}

rig_node() { "$RIG" "$1" "$2" --dir "$RIG_DIR"; }

# How many nodes store KEY.
keys_on_nodes() {
  local n=0 p
  for p in $PORTS; do
    [ "$(redis-cli -p "$p" EXISTS "$1")" = 1 ] && n=$((n + 1))
  done
  echo "$n"
}

# How many of the nodes that are up store KEY.
keys_on_nodes_up() {
  local n=0 p
  for p in $PORTS; do
    [ "$(redis-cli -p "$p" EXISTS "$1" 2>/dev/null)" = 1 ] && n=$((n + 1))
  done
  echo "$n"
}

# Deletes KEY on every node at (nearly) the same moment: connections are
# opened first, then the five DELs are written back to back. Deleting node
# by node with separate redis-cli runs can take longer than a watchdog tick,
# and the watchdog legitimately restores a member that vanished while a
# quorum was still genuinely renewed.
del_everywhere() {
  local p fd=3 reply
  for p in $PORTS; do
    eval "exec $fd<>/dev/tcp/127.0.0.1/$p"
    fd=$((fd + 1))
  done
  for fd in 3 4 5 6 7; do printf 'DEL %s\r\n' "$1" >&$fd; done
  for fd in 3 4 5 6 7; do
    read -r -t 5 reply <&$fd || fail "no reply to DEL on fd $fd"
    case "$reply" in :*) ;; *) fail "DEL failed: $reply";; esac
    eval "exec $fd>&-"
  done
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Waits up to $2 seconds for file $1 to exist.
wait_file() {
  local end=$(($(now_ms) + $2 * 1000))
  while [ ! -e "$1" ]; do
    [ "$(now_ms)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# Waits up to $2 seconds for process $1 to end; its status goes to WAIT_RC.
wait_pid() {
  local end=$(($(now_ms) + $2 * 1000))
  while kill -0 "$1" 2>/dev/null; do
    if [ "$(now_ms)" -ge "$end" ]; then
      kill -KILL "$1" 2>/dev/null || true
      wait "$1" 2>/dev/null || true
      return 1
    fi
    sleep 0.05
  done
  WAIT_RC=0
  wait "$1" || WAIT_RC=$?
}

# Runs the tool, capturing stdout/stderr in $WORK/out, $WORK/err and the
# status in RC.
run() {
  RC=0
  "$REDLOCK" "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?
}

expect_rc() {
  [ "$RC" = "$1" ] || fail "$2: exit status $RC, expected $1; stderr: $(cat "$WORK/err")"
}

# stderr is exactly one line of the form "redlock: <what>: <why>".
expect_one_error_line() {
  local lines
  lines=$(wc -l <"$WORK/err")
  [ "$lines" = 1 ] || fail "$1: expected one stderr line, got $lines: $(cat "$WORK/err")"
  grep -Eq '^redlock: [^ ].*: [^ ].*$' "$WORK/err" || fail "$1: malformed error: $(cat "$WORK/err")"
}

# The held_by_quorum field of `status --json NAME`.
held_by_quorum() {
  "$REDLOCK" status --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["held_by_quorum"])'
}

# Whether process $1 exists and is not a zombie (a zombie is dead: it only
# waits for its parent, or init, to collect its status).
alive() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Waits up to $2 ms for every pid in $1 (a space-separated list) to be gone.
wait_gone() {
  local end=$(($(now_ms) + $2)) p left
  while :; do
    left=""
    for p in $1; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    [ "$(now_ms)" -lt "$end" ] || { GONE_LEFT=$left; return 1; }
    sleep 0.02
  done
}

# Starts "$@" in the background under track.py, which records how it
# ended in $WORK/$tag.status ("exit N" or "signal N"). Sets TRACKED_PID
# (the command); the command and track.py are killed on exit.
track() {
  local tag=$1
  shift
  python3 "$CLI_DIR/track.py" "$WORK/$tag" "$@" &
  bg_add $!
  wait_file "$WORK/$tag.pid" 10 || fail "could not start $1"
  TRACKED_PID=$(cat "$WORK/$tag.pid")
  bg_add "$TRACKED_PID"
}

# Waits up to $2 seconds for the tracked command $1 to end; its status
# ("exit N" / "signal N") goes to TRACK_STATUS.
wait_tracked() {
  wait_file "$WORK/$1.status" "$2" || return 1
  TRACK_STATUS=$(cat "$WORK/$1.status")
}

# Runs "$@" on a pseudo-terminal (see pty_run.py): its output goes to
# $WORK/pty.out, its status to RC. $PTY_INPUT, if set, is typed after
# $PTY_DELAY seconds.
run_pty() {
  RC=0
  python3 "$CLI_DIR/pty_run.py" "$WORK/pty.out" "${PTY_DELAY:-0}" "${PTY_INPUT:-}" "$@" || RC=$?
}
