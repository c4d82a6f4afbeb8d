#!/usr/bin/env bash
# Runs the lab's Pktgen scripts against perf/pktgen/mock_pktgen.lua (no Pktgen, NIC or VM) and
# checks their results against the modeled device: rfc2544.lua must find the zero-loss rate
# within its resolution below the device's capacity, sweep.lua must report the loss above it,
# latency.lua must write its rows. CI runs it (.ci/run); needs lua5.3.
set -euo pipefail
cd "$(dirname "$0")/../.."
lua=$(command -v lua5.3 || command -v lua || true)
[[ -n "$lua" ]] || { echo "test.sh: lua5.3 not found (apt-get install lua5.3)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$lua" -e 'dofile("perf/pktgen/mock_pktgen.lua")' "perf/pktgen/$1" >"$work/$1.log"; }
fail=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }

# A device that forwards 1 Mpps: at 10 Gb/s that is 6.72% of line rate at 64 bytes and all of
# it at 1518 (812 744 pps at line rate).
export MOCK_CAP_PPS=1000000 LH_SIZES=64,1518 LH_TRIAL_MS=1000 LH_SETTLE_MS=1 LH_RESOLUTION=0.1
LH_OUT=$work/rfc2544.csv run rfc2544.lua
pps64=$(awk -F, '$1 == 64 { print $4 }' "$work/rfc2544.csv")
pct64=$(awk -F, '$1 == 64 { print $3 }' "$work/rfc2544.csv")
pct1518=$(awk -F, '$1 == 1518 { print $3 }' "$work/rfc2544.csv")
check "rfc2544.lua: 64 B zero-loss ${pps64} pps is at most the device's 1000000 and within the resolution of it" \
  "awk -v p='$pps64' 'BEGIN { exit !(p <= 1000000 && p >= 1000000 - 0.1 / 100 * 14880952 - 1) }'"
check "rfc2544.lua: 64 B at ${pct64}% of line rate (the device's 6.72%)" \
  "awk -v p='$pct64' 'BEGIN { exit !(p > 6.5 && p <= 6.72) }'"
check "rfc2544.lua: 1518 B passes at line rate (${pct1518}%)" "[ '$pct1518' = 100.000 ]"

# A generator that cannot offer more than 500 kpps: flagged, not reported as the device's limit.
MOCK_GEN_PPS=500000 LH_SIZES=64 LH_OUT=$work/short.csv run rfc2544.lua
check "rfc2544.lua: a slow generator is flagged" "grep -q ',true$' '$work/short.csv'"

LH_RATE=50 LH_OUT=$work/sweep.csv run sweep.lua
lost64=$(awk -F, '$1 == 64 { print $5 }' "$work/sweep.csv")
lost1518=$(awk -F, '$1 == 1518 { print $5 }' "$work/sweep.csv")
check "sweep.lua at 50%: 64 B loses (${lost64} lost), 1518 B does not (${lost1518})" \
  "[ '$lost64' -gt 0 ] && [ '$lost1518' = 0 ]"

LH_RATE=5 LH_OUT=$work/latency.csv run latency.lua
check "latency.lua: a row per size with the latency fields" \
  "[ \"\$(grep -c 'num_pkts=100' '$work/latency.csv')\" = 2 ]"

# Bad settings are refused with the name of the variable.
if LH_SIZES=63 "$lua" -e 'dofile("perf/pktgen/mock_pktgen.lua")' perf/pktgen/rfc2544.lua >"$work/bad.log" 2>&1; then
  check "rfc2544.lua refuses LH_SIZES=63" false
else
  check "rfc2544.lua refuses LH_SIZES=63" "grep -q 'LH_SIZES: 63' '$work/bad.log'"
fi
exit $fail
