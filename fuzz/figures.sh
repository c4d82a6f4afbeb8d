#!/usr/bin/env bash
# Prints the recorded-figures table of fuzz/README.md from AFL++ output directories
# (default /tmp/afl-out/<target>/default/fuzzer_stats).
set -euo pipefail
out=${1:-/tmp/afl-out}
echo "| target | run time (s) | executions | exec/s (mean) | corpus | edges found | bitmap coverage | crashes | hangs |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in wire pcap config themis_daemon api pipeline_baseline pipeline_themis pipeline_spray \
         pipeline_mlcc pipeline_reflex pipeline_bifrost; do
  f=$out/$t/default/fuzzer_stats
  [ -f "$f" ] || continue
  v() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$f"; }
  echo "| $t | $(v run_time) | $(v execs_done) | $(( $(v execs_done) / $(v run_time) )) | $(v corpus_count) | $(v edges_found) | $(v bitmap_cvg) | $(v saved_crashes) | $(v saved_hangs) |"
done
