#!/usr/bin/env bash
# The HPCC cross-check's CI half (validation/hpcc/README.md): the generated scenarios are what
# gen.py writes, and longhaul's figures on the small scenarios stay within tolerances.json of the
# recorded NS-3 runs (validation/hpcc/results/). NS-3 itself does not run here.
#
#   validation/hpcc/ci.sh [LONGHAUL_BIN]      (default: target/debug/longhaul)
#
# HPCC_CI_SCENARIOS and HPCC_CI_RUNS override the scenarios and longhaul runs checked (default:
# all four scenarios, runs default, ackdata and hpcc: about 40 s on 2 busy cores in a debug build).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/longhaul}
if [ ! -x "$bin" ]; then
  echo "validation/hpcc/ci.sh: $bin: no longhaul binary (cargo build first)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "-- the committed scenarios are gen.py's output"
python3 validation/hpcc/gen.py --out "$tmp/scenarios" >/dev/null
if ! diff -r validation/hpcc/scenarios "$tmp/scenarios" >"$tmp/diff.txt"; then
  head -n 40 "$tmp/diff.txt" >&2
  echo "validation/hpcc/scenarios differs from what validation/hpcc/gen.py writes: run it and commit" >&2
  exit 1
fi

echo "-- longhaul against the recorded NS-3 runs"
python3 validation/hpcc/compare.py --longhaul "$bin" \
  --scenarios "${HPCC_CI_SCENARIOS:-dumbbell,incast,incast-pfc,websearch}" \
  --longhaul-runs "${HPCC_CI_RUNS:-default,ackdata,hpcc}" --check
