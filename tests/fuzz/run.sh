#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs every libFuzzer target of a -DREDLOCK_FUZZ=ON build for a bounded
# time each, starting from the seeds in tests/fuzz/corpus/<target>/, and
# fails if any target finds a crash, leak, sanitizer report or timeout.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
# New inputs go to a scratch copy of the corpus (BUILD_DIR/fuzz-work), so
# the repository's seeds change only when someone copies a finding back.
# Crashing inputs are kept in BUILD_DIR/fuzz-work/<target>/artifacts/ and
# replay with: BUILD_DIR/tests/fuzz/<target> <file>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_uri fuzz_replies fuzz_stream fuzz_pubsub fuzz_keys fuzz_args)
case $seconds in ''|*[!0-9]*) echo "run.sh: SECONDS must be a whole number" >&2; exit 2;; esac

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/$t
  if [ ! -x "$bin" ]; then
    echo "run.sh: $bin is missing (configure with CC=clang -DREDLOCK_FUZZ=ON)" >&2
    failed+=("$t(missing)")
    continue
  fi
  work=$build/fuzz-work/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$here/corpus/$t"/* "$work/corpus/" 2>/dev/null || true
  # -timeout: one input taking this long is a hang; the outer timeout
  # bounds the whole run even if libFuzzer itself stalls.
  set +e
  timeout --kill-after=30 $((seconds + 120)) "$bin" "$work/corpus" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=4096 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
  found=$(find "$work/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    echo "fuzz target=$t seconds=$seconds runs=${runs:-?} cov=${cov:-?} result=FAIL (exit $rc, $found artifact(s) in $work/artifacts)"
    tail -n 60 "$work/log" >&2
    failed+=("$t")
  else
    echo "fuzz target=$t seconds=$seconds runs=${runs:-?} cov=${cov:-?} corpus=$(ls "$work/corpus" | wc -l) result=ok"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing failed: ${failed[*]}" >&2
  exit 1
fi
