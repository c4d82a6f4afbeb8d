#!/usr/bin/env bash
# Runs the lab's Pktgen scripts against perf/pktgen/mock_pktgen.lua (no Pktgen, NIC or VM) and
# checks their results against the modeled device: rfc2544.lua must find the zero-loss rate
# within its resolution below the device's capacity, sweep.lua must report the loss above it,
# latency.lua must write its rows; the frames on the wire must have the rows' sizes, the rates
# must be the rates sent, a link that never comes up must stop the script with an error. The
# mock behaves as the real Pktgen does (isSending, the once-a-second portStats snapshot, sizes
# with the FCS, links that come up late, no "all" port list), so a script the real Pktgen would
# fail fails here. CI runs it (.ci/run); needs lua5.3. The real Pktgen: perf/pktgen/real.sh.
#
#   perf/pktgen/test.sh [SCRIPT_DIR]   (default perf/pktgen; another directory tests its scripts)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-perf/pktgen}
lua=$(command -v lua5.3 || command -v lua || true)
[[ -n "$lua" ]] || { echo "test.sh: lua5.3 not found (apt-get install lua5.3)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mock=$(pwd)/perf/pktgen/mock_pktgen.lua
# run SCRIPT OUT: stdout to OUT.log, stderr (the mock's MOCK-WIRE lines) to OUT.err.
run() { "$lua" -e "dofile('$mock')" "$dir/$1" >"$work/$2.log" 2>"$work/$2.err"; }
fail=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }
# col CSV FRAME NAME: the value in the row of that frame size, the column of that header name.
col() {
  awk -F, -v f="$2" -v n="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i; next }
    c && $1 == f { print $c }' "$1" 2>/dev/null || true
}
# wire NAME: the frame sizes the mock put on the wire, "64,1518".
wire() { awk '$1 == "MOCK-WIRE" { s = s (s ? "," : "") $2 } END { print s }' "$work/$1.err"; }

# A device that forwards 1 Mpps: at 10 Gb/s that is 6.72% of line rate at 64 bytes and all of
# it at 1518 (812 744 pps at line rate).
export MOCK_CAP_PPS=1000000 LH_SIZES=64,1518 LH_TRIAL_MS=1000 LH_SETTLE_MS=1 LH_RESOLUTION=0.1
LH_OUT=$work/rfc2544.csv run rfc2544.lua rfc2544 || { echo "FAIL: rfc2544.lua exited non-zero:"; tail -n 3 "$work/rfc2544.err"; fail=1; }
pps64=$(col "$work/rfc2544.csv" 64 zero_loss_pps)
pct64=$(col "$work/rfc2544.csv" 64 zero_loss_rate_percent)
pct1518=$(col "$work/rfc2544.csv" 1518 zero_loss_rate_percent)
lim1518=$(col "$work/rfc2544.csv" 1518 generator_limited)
check "rfc2544.lua: 64 B zero-loss ${pps64:-none} pps is at most the device's 1000000 and within the resolution of it" \
  "awk -v p='$pps64' 'BEGIN { exit !(p != \"\" && p <= 1000000 && p >= 1000000 - 0.1 / 100 * 14880952 - 1) }'"
check "rfc2544.lua: 64 B at ${pct64:-none}% of line rate (the device's 6.72%)" \
  "awk -v p='$pct64' 'BEGIN { exit !(p != \"\" && p > 6.6 && p <= 6.72) }'"
check "rfc2544.lua: 1518 B passes at line rate (${pct1518:-none}%), generator not short (${lim1518:-none})" \
  "awk -v p='$pct1518' 'BEGIN { exit !(p != \"\" && p > 99) }' && [ '$lim1518' = false ]"
check "rfc2544.lua: frames on the wire are the rows' sizes ($(wire rfc2544))" "[ '$(wire rfc2544)' = 64,1518 ]"

# A generator that cannot offer more than 500 kpps: flagged, not reported as the device's limit.
MOCK_GEN_PPS=500000 LH_SIZES=64 LH_OUT=$work/short.csv run rfc2544.lua short || true
check "rfc2544.lua: a slow generator is flagged" "grep -q ',true$' '$work/short.csv' 2>/dev/null"

LH_RATE=50 LH_OUT=$work/sweep.csv run sweep.lua sweep || { echo "FAIL: sweep.lua exited non-zero:"; tail -n 3 "$work/sweep.err"; fail=1; }
lost64=$(col "$work/sweep.csv" 64 lost)
lost1518=$(col "$work/sweep.csv" 1518 lost)
check "sweep.lua at 50%: 64 B loses (${lost64:-none} lost), 1518 B does not (${lost1518:-none})" \
  "[[ '$lost64' =~ ^[0-9]+$ ]] && [ '$lost64' -gt 0 ] && [ '$lost1518' = 0 ]"
# Each row sent what it asked, at the rate asked (50% of 10 Gb/s) within 1%.
for size in 64 1518; do
  asked=$(col "$work/sweep.csv" $size asked); sent=$(col "$work/sweep.csv" $size sent)
  offered=$(col "$work/sweep.csv" $size offered_pps)
  check "sweep.lua: $size B sent ${sent:-none} of ${asked:-none} at ${offered:-none} pps, 50% of line rate within 1%" \
    "awk -v s=$size -v a='$asked' -v t='$sent' -v o='$offered' 'BEGIN { l = 1e10 / ((s + 20) * 8); exit !(a != \"\" && a == t && o >= 0.495 * l && o <= 0.505 * l) }'"
done
check "sweep.lua: frames on the wire are the rows' sizes ($(wire sweep))" "[ '$(wire sweep)' = 64,1518 ]"
# Each trial is primed past the mock's 300 ms mempool rebuild: a frame or two before its rate.
primed=$(sed -nE 's/.*sent [0-9]+ of ([0-9]+), ([0-9]+) paced.*/\1 \2/p' "$work/sweep.log" | awk '{ printf "%s%d", s, $1 - $2; s = "," }')
check "sweep.lua: trials primed before the rate is set (priming frames ${primed:-none})" \
  "[[ '$primed' =~ ^[12],[12]$ ]]"

LH_RATE=5 LH_OUT=$work/latency.csv run latency.lua latency || { echo "FAIL: latency.lua exited non-zero:"; tail -n 3 "$work/latency.err"; fail=1; }
check "latency.lua: a row per size with the latency fields" \
  "[ \"\$(grep -c 'num_pkts=100' '$work/latency.csv' 2>/dev/null)\" = 2 ]"

# A sweep through a link that comes up only after 5 s: the script waits for it, and the row
# still sends its whole count (no row claims zero loss for frames never sent).
MOCK_LINK_UP_MS=5000 LH_RATE=50 LH_SIZES=1518 LH_OUT=$work/late.csv run sweep.lua late || true
asked=$(col "$work/late.csv" 1518 asked); sent=$(col "$work/late.csv" 1518 sent)
check "sweep.lua waits for a late link (sent ${sent:-none} of ${asked:-none}, loss $(col "$work/late.csv" 1518 loss_percent)%)" \
  "[ -n '$asked' ] && [ '$asked' = '$sent' ] && [ -n '$(col "$work/late.csv" 1518 loss_percent)' ]"

# A link that never comes up: an error naming it, no rows.
if MOCK_LINK_UP_MS=never LH_LINK_WAIT_MS=2000 LH_OUT=$work/down.csv run rfc2544.lua down; then
  check "rfc2544.lua stops when the link never comes up" false
else
  check "rfc2544.lua stops when the link never comes up ($(grep -o 'link down[^;]*' "$work/down.err" | head -n 1))" \
    "grep -q 'link down after 2000 ms' '$work/down.err'"
fi

# real.sh's check (perf/pktgen/check.py run) on made-up runs: a trial at 100 kpps that longhaul's
# clock saw at RX_PPS (its snapshots every 10 ms), or all at once (lump).
fake() {
  local d=$work/fake-$1 rx_pps=$2
  mkdir -p "$d"
  printf '%s\n' "[   64B] rate   0.6720%: sent 100000 of 100000, 99999 paced in 1.000 s (99999 pps offered, 100000 asked, burst 32), received 100000, lost 0" \
    "totals: sent 100000 (6000000 bytes), received 100000; port 0 oerrors 0; port 1 imissed 0, ierrors 0, rx_nombuf 0" >"$d/script.log"
  printf 'frame,x\n64,1\n' >"$d/sweep.csv"
  printf 'port.dc0.rx_pkts 100000\nport.dc0.rx_bytes 6000000\nport.wan0.tx_pkts 100000\n' >"$d/longhaul.out"
  awk -v r="$rx_pps" 'BEGIN { print 5000000, 0; n = 1; for (t = 0.01; n < 100000; t += 0.01) {
    n = r == "lump" ? 100000 : int(1 + r * t); if (n > 100000) n = 100000; printf "%d %d\n", 5e6 + t * 1e9, n } }' >"$d/rx.txt"
  python3 perf/pktgen/check.py run "made-up $1" "$d/script.log" "$d/sweep.csv" "$d/longhaul.out" "$d/rx.txt" 64 >"$d/out" || true
}
fake right 100000; fake slow 98800; fake fast 101200; fake lump lump
check "check.py passes a trial longhaul received at its rate ($(cut -c1-60 "$work/fake-right/out"))" \
  "grep -q '^PASS' '$work/fake-right/out'"
check "check.py fails a trial longhaul received 1.2% slower ($(grep -o 'received [0-9]* pps[^,]*' "$work/fake-slow/out" | head -n 1))" \
  "grep -q '^FAIL.* -1\.[0-9]*% off the rate Pktgen completed it at' '$work/fake-slow/out'"
check "check.py fails a trial longhaul received 1.2% faster" "grep -q '^FAIL.* +1\.[0-9]*% off the rate' '$work/fake-fast/out'"
check "check.py fails a trial longhaul received in one lump" "grep -q '^FAIL.*in one lump' '$work/fake-lump/out'"

# Bad settings are refused with the name of the variable.
if LH_SIZES=63 run rfc2544.lua bad; then
  check "rfc2544.lua refuses LH_SIZES=63" false
else
  check "rfc2544.lua refuses LH_SIZES=63" "grep -q 'LH_SIZES: 63' '$work/bad.err'"
fi
exit $fail
