#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The bash completion for redlock: it parses (bash -n), and completing a
# few command lines gives the expected words, once with bash-completion's
# helpers loaded (how an installed system runs it) and once without them
# (the file sourced on its own). No interactive shell: the test sets
# COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT the way bash would and calls
# the completion function.
#   completion.sh FILE          run both ways
#   completion.sh FILE plain|bash-completion
set -euo pipefail
file=$1
bc=/usr/share/bash-completion/bash_completion

if [ $# -eq 1 ]; then
  bash -n "$file"
  echo "bash -n: ok"
  [ -r "$bc" ] || { echo "FAIL: $bc missing (install bash-completion: scripts/install-deps)" >&2; exit 1; }
  bash "$0" "$file" plain
  bash "$0" "$file" bash-completion
  exit 0
fi
mode=$2
if [ "$mode" = bash-completion ]; then
  set +eu  # bash_completion is not written for set -eu
  # shellcheck disable=SC1090
  . "$bc"
  set -eu
  declare -F _init_completion >/dev/null || { echo "FAIL: $bc did not load" >&2; exit 1; }
fi
# shellcheck disable=SC1090
. "$file"
complete -p redlock | grep -q -- '-F _redlock' || { echo "FAIL: redlock has no completion" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
: >ca.pem

# Splits a line into COMP_WORDS like bash: at blanks, and around the word
# breaks '=' and ':'.
set_line() {
  local line=$1 w
  COMP_LINE=$line
  COMP_POINT=${#line}
  COMP_WORDS=()
  set -f
  for w in $line; do
    while [[ $w =~ ^([^=:]*)([=:]+)(.*)$ ]]; do
      [ -z "${BASH_REMATCH[1]}" ] || COMP_WORDS+=("${BASH_REMATCH[1]}")
      COMP_WORDS+=("${BASH_REMATCH[2]}")
      w=${BASH_REMATCH[3]}
    done
    [ -z "$w" ] || COMP_WORDS+=("$w")
  done
  set +f
  [[ $line != *' ' ]] || COMP_WORDS+=('')
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
}

# Outside a real completion, compopt (which bash-completion's helpers call)
# can only complain; the options it sets are not what is tested.
compopt() { builtin compopt "$@" 2>/dev/null || true; }

complete_line() {
  COMPREPLY=()
  set_line "$1"
  set +eu
  _redlock redlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  set -eu
  printf '%s\n' "${COMPREPLY[@]}" | sort -u | paste -sd' '
}

fails=0
# expect LINE WORDS: the completions are exactly WORDS (sorted).
expect() {
  local got
  got=$(complete_line "$1")
  if [ "$got" = "$2" ]; then
    echo "ok   [$mode] '$1' -> '$got'"
  else
    echo "FAIL [$mode] '$1' -> '$got', expected '$2'"
    fails=$((fails + 1))
  fi
}
# has LINE WORD...: the completions include every WORD.
has() {
  local line=$1 got w
  shift
  got=" $(complete_line "$line") "
  for w in "$@"; do
    if [[ $got != *" $w "* ]]; then
      echo "FAIL [$mode] '$line' -> '$got', missing '$w'"
      fails=$((fails + 1))
      return
    fi
  done
  echo "ok   [$mode] '$line' includes $*"
}

expect 'redlock ex' 'exec'
expect 'redlock ' 'demo exec help rig status unlock version'
expect 'redlock -n redis://a:1,redis://b:2 st' 'status'
expect 'redlock --timeout 500 -q all un' 'unlock'
expect 'redlock exec job --on-lost ' 'ignore kill term'
expect 'redlock exec job --on-lost=te' 'term'
expect 'redlock exec job --on-lost=' 'ignore kill term'
expect 'redlock rig st' 'start status stop'
expect 'redlock rig start --tls ' ''
expect 'redlock unlock job --fo' '--force'
expect 'redlock help de' 'demo'
expect 'redlock version --js' '--json'
expect 'redlock status job ' ''
expect 'redlock -n red' 'redis:// rediss://'
expect 'redlock -n redis:' '//'
expect 'redlock exec job --tls-ca ca' 'ca.pem'
has 'redlock exec job --w' --wait --watchdog-lease
has 'redlock exec job --' --fair --conflict-exit-code --unavailable-timeout --command \
  --config --password-file --fencing --lease --grace --nodes --tls-insecure
has 'redlock exec job -' -w -N -c -E -n -q
has 'redlock exec job --k' --keep-secret-env
expect 'redlock exec job --wait f' 'forever'
expect 'redlock exec job --lease=w' 'watchdog'
expect 'redlock exec job -c ech' 'echo'
expect 'redlock -V' '-V' 
has 'redlock -q ' all
has 'redlock exec job ech' echo
has 'redlock exec job -- ech' echo
has 'redlock -n redis://a:1 exec -w 0 job -- ech' echo
has 'redlock demo --' --workers --seconds --base-port --nodes-count
has 'redlock rig --' --nodes-count --base-port --tls --aof --dir
has 'redlock --' --version --nodes --config --password-file

[ "$fails" -eq 0 ] || { echo "$fails completion case(s) failed [$mode]"; exit 1; }
