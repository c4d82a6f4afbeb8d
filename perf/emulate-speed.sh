#!/usr/bin/env bash
# The emulator's speed (issue 14): frame hops per wall second of `longhaul emulate`, the median of
# several runs, and, with CALLGRIND=1, the instructions per hop under callgrind (the stable
# measure to compare two builds by on a shared VM: a short run's wall time swings by 20-50%).
#
#   perf/emulate-speed.sh [RUNS] [SCENARIO...]        (defaults 20 and scenarios/themis.toml)
#   LONGHAUL=/tmp/old perf/emulate-speed.sh 20 scenarios/themis.toml scenarios/dcqcn-fairness.toml
#   CALLGRIND=1 perf/emulate-speed.sh 1 scenarios/themis.toml
#
# Per scenario it prints the hops of one run (the runs alone for the ideal FCTs included, as the
# tool counts them), the median, lowest and highest M hops/s the tool printed over RUNS runs, and
# the median wall seconds of the whole process (start-up, reading the scenario and building the
# switches included; no outputs written). With CALLGRIND=1 it also runs the scenario once under
# `valgrind --tool=callgrind` and prints the instructions of `emulate_with_progress` (the
# emulation: both runs, without reading the scenario or writing outputs) per hop.
#
# Env: LONGHAUL (binary; default: `cargo build --profile dist --locked -p longhaul` and
# target/dist/longhaul), CALLGRIND (1: also count instructions), OUT (directory for the
# callgrind files; default a new one in /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-20}
shift || true
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -gt 0 ] || SCENARIOS=(scenarios/themis.toml)
case $RUNS in '' | *[!0-9]* | 0) echo "RUNS must be a positive integer, not '$RUNS'" >&2; exit 2 ;; esac
for s in "${SCENARIOS[@]}"; do [ -f "$s" ] || { echo "no scenario $s" >&2; exit 2; }; done
if [ -z "${LONGHAUL:-}" ]; then
  cargo build --profile dist --locked -q -p longhaul
  LONGHAUL=target/dist/longhaul
fi
[ -x "$LONGHAUL" ] || { echo "no executable $LONGHAUL" >&2; exit 2; }
if [ "${CALLGRIND:-0}" = 1 ]; then
  command -v valgrind >/dev/null || { echo "CALLGRIND=1 needs valgrind (apt-get install valgrind)" >&2; exit 1; }
  OUT=${OUT:-$(mktemp -d /tmp/longhaul-emulate-speed.XXXXXX)}
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
fi

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }

printf '%-28s %12s %8s %8s %8s %8s %10s\n' scenario hops 'M/s med' min max 'wall s' 'instr/hop'
for s in "${SCENARIOS[@]}"; do
  rates=()
  walls=()
  hops=
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    line=$("$LONGHAUL" emulate "$s" 2>&1 >/dev/null | grep 'frame hops emulated in') || {
      echo "$s: no speed line (did the run fail?)" >&2
      exit 1
    }
    t1=$(date +%s.%N)
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", b - a}')")
    # "longhaul: N frame hops emulated in S s (R M hops/s, ...)"
    hops=$(echo "$line" | awk '{print $2}')
    rates+=("$(echo "$line" | sed -n 's/.*(\([0-9.]*\) M hops\/s.*/\1/p')")
  done
  med=$(printf '%s\n' "${rates[@]}" | median)
  min=$(printf '%s\n' "${rates[@]}" | sort -g | head -1)
  max=$(printf '%s\n' "${rates[@]}" | sort -g | tail -1)
  wall=$(printf '%s\n' "${walls[@]}" | median)
  per_hop=-
  if [ "${CALLGRIND:-0}" = 1 ]; then
    cg="$OUT/$(basename "$s" .toml).cg"
    # The huge-page re-exec off: valgrind does not follow it (docs/emulator.md).
    LONGHAUL_EMULATE_THP=0 valgrind --tool=callgrind --callgrind-out-file="$cg" \
      "$LONGHAUL" emulate "$s" >/dev/null 2>&1
    instr=$( (cd / && callgrind_annotate --inclusive=yes --auto=no "$cg") |
      awk '!found && /longhaul_emulator::emulate_with_progress \[/ {gsub(",", "", $1); print $1; found = 1}')
    [ -n "$instr" ] || { echo "$s: emulate_with_progress not in $cg" >&2; exit 1; }
    per_hop=$(awk -v i="$instr" -v h="$hops" 'BEGIN {printf "%.0f", i / h}')
  fi
  printf '%-28s %12s %8s %8s %8s %8.3f %10s\n' "$(basename "$s")" "$hops" "$med" "$min" "$max" "$wall" "$per_hop"
done
