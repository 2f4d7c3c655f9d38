#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Draws the benchmark charts from the data files the bench programs wrote
# with --data: plot.sh DATA_DIR OUT_DIR. Charts whose data is missing
# (a scenario that was not run) are skipped.
set -euo pipefail
data=${1:?usage: plot.sh DATA_DIR OUT_DIR}
out=${2:?usage: plot.sh DATA_DIR OUT_DIR}
mkdir -p "$out"

have() { for f in "$@"; do [ -s "$data/$f" ] || return 1; done; }

# A CDF chart: title, output, then "file|label" pairs.
cdf() {
  local title=$1 png=$2 plots="" spec f label
  shift 2
  for spec in "$@"; do
    f=${spec%%|*}; label=${spec#*|}
    [ -s "$data/$f" ] || continue
    plots="$plots${plots:+, }'$data/$f' using 1:2 with lines lw 2 title '$label'"
  done
  [ -n "$plots" ] || return 0
  gnuplot <<GP
set terminal pngcairo size 800,480 font ",10"
set output '$out/$png'
set title '$title'
set logscale x
set xlabel 'latency (us, log scale)'
set ylabel 'fraction of operations'
set yrange [0:1]
set grid
set key right bottom
plot $plots
GP
  echo "plot.sh: $out/$png"
}

cdf "Uncontended acquire+release cycle vs the floor (same run)" latency_cdf_uncontended.png \
  "uncontended_n1_cycle.cdf|library, N=1" "uncontended_n1_floor_cycle.cdf|floor, N=1" \
  "uncontended_n5_cycle.cdf|library, N=5" "uncontended_n5_floor_cycle.cdf|floor, N=5"

cdf "Contended hand-off (release to next holder), N=5" latency_cdf_contention.png \
  "contention_k2_pubsub_handoff.cdf|K=2 pub/sub" "contention_k4_pubsub_handoff.cdf|K=4 pub/sub" \
  "contention_k16_pubsub_handoff.cdf|K=16 pub/sub" "contention_k2_retry_handoff.cdf|K=2 retry only" \
  "contention_k4_retry_handoff.cdf|K=4 retry only" "contention_k16_retry_handoff.cdf|K=16 retry only"

# bench/contention.c: the fair lock against the plain pub/sub lock, same
# rounds (section 11 of bench/README.md).
cdf "Hand-off to another worker: fair vs plain lock, N=5 (same run)" latency_cdf_fair.png \
  "contention_k2_fair_handoff.cdf|K=2 fair" "contention_k4_fair_handoff.cdf|K=4 fair" \
  "contention_k16_fair_handoff.cdf|K=16 fair" "contention_k2_pubsub_handoff.cdf|K=2 plain" \
  "contention_k4_pubsub_handoff.cdf|K=4 plain" "contention_k16_pubsub_handoff.cdf|K=16 plain"

# bench/rwlock.c, rwlock_handoff: the same workers on a semaphore of 2
# permits and on a mutex, alternating chunks of one run.
cdf "Hand-off (release to a waiting worker): semaphore of 2 permits vs mutex (same run)" \
  latency_cdf_rwlock_handoff.png \
  "rwlock_n5_permit_handoff.cdf|semaphore, N=5" "rwlock_n5_mutex_handoff.cdf|mutex, N=5" \
  "rwlock_n1_permit_handoff.cdf|semaphore, N=1" "rwlock_n1_mutex_handoff.cdf|mutex, N=1"

cdf "Acquire latency with and without fencing" latency_cdf_fencing.png \
  "fencing_n1_plain_acquire.cdf|N=1 plain" "fencing_n1_fenced_acquire.cdf|N=1 fenced" \
  "fencing_n5_plain_acquire.cdf|N=5 plain" "fencing_n5_fenced_acquire.cdf|N=5 fenced"

cdf "Acquire latency per failover phase (N=5, paced)" latency_cdf_failover.png \
  "failover_acquire_frozen0.cdf|healthy" "failover_acquire_frozen1.cdf|1 of 5 frozen" \
  "failover_acquire_frozen2.cdf|2 of 5 frozen" "failover_acquire_frozen0_thawed.cdf|thawed"

# (\_: an underscore, not a subscript, in gnuplot's enhanced text)
cdf "Acquire latency, 3 Sentinel groups, quorum 2: replica\_acks 0 vs 1 (same run)" \
  latency_cdf_ha_acks.png \
  "ha_acks0_acquire.cdf|replica\_acks 0" "ha_acks1_acquire.cdf|replica\_acks 1"

if have throughput_scaling.dat; then
  gnuplot <<GP
set terminal pngcairo size 800,480 font ",10"
set output '$out/throughput_scaling.png'
set title 'Throughput, T threads on distinct names, N=5'
set logscale x 2
set xlabel 'threads'
set ylabel 'acquire+release cycles per second'
set y2label 'p99 cycle latency (ms)'
set y2tics
set ytics nomirror
set grid
set key left top
plot '$data/throughput_scaling.dat' using 1:2 with linespoints lw 2 title 'floor (by hand)', \
     '' using 1:3 with linespoints lw 2 title 'shared client', \
     '' using 1:4 with linespoints lw 2 title 'client per thread', \
     '' using 1:(\$6/1000) axes x1y2 with points pt 6 title 'p99, shared client'
GP
  echo "plot.sh: $out/throughput_scaling.png"
fi

if have failover_timeline.dat failover_phases.dat; then
  labels=$(awk '{ l=$3; for (i=4;i<=NF;i++) l=l" "$i; gsub(/"/,"",l);
                  printf "set label \"%s\" at %f, graph 0.95 font \",9\"\n", l, $1 + 0.1;
                  if (NR > 1) printf "set arrow from %f, graph 0 to %f, graph 1 nohead dt 2\n", $1, $1 }' \
           "$data/failover_phases.dat")
  gnuplot <<GP
set terminal pngcairo size 900,480 font ",10"
set output '$out/failover_timeline.png'
set title 'Failover timeline, N=5: one cycle every pace interval'
set xlabel 'time (s)'
set ylabel 'latency (ms, log scale)'
set logscale y
set grid
set key right center
$labels
plot '$data/failover_timeline.dat' using 1:2 with points pt 7 ps 0.5 title 'acquire', \
     '' using 1:3 with points pt 6 ps 0.5 title 'release'
GP
  echo "plot.sh: $out/failover_timeline.png"
fi

if have ha_timeline.dat ha_events.dat; then
  # The kill .. failover stretch shaded red, the failover .. rejoin stretch
  # (group 1's new master without a replica to acknowledge) yellow; a
  # dashed line and a label at each event.
  marks=$(awk '{ t[$2] = $1;
                 printf "set arrow from %f, graph 0 to %f, graph 1 nohead dt 2 lc rgb \"#555555\"\n", $1, $1;
                 printf "set label \"%s\" at %f, graph %f font \",9\"\n", $2, $1 + 0.1, 0.97 - 0.05 * ((NR - 1) % 2) }
               END { if ("kill" in t && "failover" in t)
                       printf "set object rect from %f, graph 0 to %f, graph 1 fc rgb \"#f4c7c3\" fs solid 0.5 noborder behind\n", t["kill"], t["failover"];
                     if ("failover" in t && "rejoined" in t)
                       printf "set object rect from %f, graph 0 to %f, graph 1 fc rgb \"#fce8b2\" fs solid 0.5 noborder behind\n", t["failover"], t["rejoined"] }' \
          "$data/ha_events.dat")
  probe=""
  if have ha_probe.dat; then
    probe=", '$data/ha_probe.dat' using 1:(\$3 == 1 ? \$2 : 1/0) with points pt 6 ps 0.6 lc rgb '#2ca02c' title 'group 1 alone (N=1): granted', \\
     '' using 1:(\$3 == 0 ? \$2 : 1/0) with points pt 2 ps 0.6 lc rgb '#7f7f7f' title 'group 1 alone: failed'"
  fi
  gnuplot <<GP
set terminal pngcairo size 900,520 font ",10" noenhanced
set output '$out/ha_failover_timeline.png'
set title 'Failover timeline, 3 Sentinel groups, quorum 2, replica_acks 1: group 1 master killed'
set xlabel 'time (s)'
set ylabel 'acquire latency (ms, log scale)'
set logscale y
set grid
set key below font ",9"
$marks
plot '$data/ha_timeline.dat' using 1:(\$4 == 1 ? \$2 : 1/0) with points pt 7 ps 0.4 lc rgb '#1f77b4' title 'RedLock over 3 groups: acquired', \
     '' using 1:(\$4 == 0 ? \$2 : 1/0) with points pt 2 ps 1.2 lc rgb '#d62728' title 'RedLock over 3 groups: failed'$probe
GP
  echo "plot.sh: $out/ha_failover_timeline.png"
fi
