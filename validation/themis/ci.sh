#!/usr/bin/env bash
# The THEMIS cross-check's CI half (validation/themis/README.md): the generated scenario is what
# gen.py writes, and longhaul's figures on it stay within tolerances.json of the recorded runs of
# the THEMIS authors' NS-3 (validation/themis/results/). NS-3 itself does not run here.
#
#   validation/themis/ci.sh [LONGHAUL_BIN]      (default: target/debug/longhaul)
#
# THEMIS_CI_RUNS overrides the longhaul runs checked (default: off and themis, about 21 s of CPU
# in a debug build).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/longhaul}
if [ ! -x "$bin" ]; then
  echo "validation/themis/ci.sh: $bin: no longhaul binary (cargo build first)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "-- the committed scenario is gen.py's output"
python3 validation/themis/gen.py --out "$tmp/scenarios" >/dev/null
if ! diff -r validation/themis/scenarios "$tmp/scenarios" >"$tmp/diff.txt"; then
  head -n 40 "$tmp/diff.txt" >&2
  echo "validation/themis/scenarios differs from what validation/themis/gen.py writes: run it and commit" >&2
  exit 1
fi

echo "-- longhaul against the recorded NS-3 runs"
python3 validation/themis/compare.py --longhaul "$bin" \
  --longhaul-runs "${THEMIS_CI_RUNS:-off,themis}" --check
