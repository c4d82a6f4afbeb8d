#!/usr/bin/env bash
# Streaming replay at scale: frames per second end to end and peak memory of `longhaul replay`
# on a generated trace of N frames (default 5 000 000 x 314 bytes = 1.65 GB), baseline config.
#
#   perf/replay-stream.sh [FRAMES] [OUT]     OUT: where wan0's output goes (default /dev/null)
#
# Prints longhaul's own rate line and /usr/bin/time's peak resident set; the trace is written to
# a temporary file (removed at exit). Figures: perf/README.md, "Streaming replay".
set -euo pipefail
cd "$(dirname "$0")/.."
frames="${1:-5000000}"
out="${2:-/dev/null}"
bin="${LONGHAUL:-target/dist/longhaul}"
[[ -x "$bin" ]] || cargo build --profile dist --locked
trace=$(mktemp /tmp/longhaul-replay-XXXXXX.pcap)
trap 'rm -f "$trace"' EXIT
python3 perf/gen_big_trace.py "$trace" "$frames"
echo "trace: $frames frames, $(stat -c %s "$trace") bytes"
/usr/bin/time -v "$bin" replay --config configs/baseline.toml --in "dc0=$trace" --out "wan0=$out" \
  2>&1 >/dev/null | grep -E "frames/s|Maximum resident|Elapsed"
