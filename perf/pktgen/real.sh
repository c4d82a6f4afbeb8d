#!/usr/bin/env bash
# The Pktgen scripts (rfc2544.lua, sweep.lua, latency.lua) on the real Pktgen-DPDK, through a
# `longhaul run` of each config over memif on one machine, no hugepages, no NIC, no root:
#
#   Pktgen  port 0 net_memif0 (server) ==A==> net_memif0 (client) dc0   [longhaul run]
#           port 1 net_memif1 (server) <==B== net_memif1 (client) wan0
#
# Pktgen holds both memif servers and starts first (a DPDK 22.11 memif client connects once,
# when its port starts); the scripts wait for the links. Pktgen's lcore 1 (both ports) has CPU 0
# (with longhaul's main lcore); its main lcore 0 (display, Lua, a busy timer loop) shares CPU 1
# with longhaul's worker. Pktgen paces by the clock and does not catch up time it was not run.
#
#   perf/pktgen/real.sh [--bin PATH] [--out DIR] [CONFIG ...]   (default: baseline, themis-esw)
#
# Builds the pinned Pktgen with perf/pktgen/build-pktgen.sh from $LONGHAUL_PKTGEN_TARBALL
# (default ../shared/peers/Pktgen-DPDK-23.06.1.tar.gz from the repository root) into
# $LONGHAUL_PKTGEN_BUILD (default target/pktgen-23.06.1); prints SKIP and exits 0 when the
# tarball is absent. Checks each run: the script wrote its CSV with a row per size; longhaul
# received every frame Pktgen counted as sent, with the bytes the rows' sizes make (FCS
# excluded, as DPDK counts); each trial's offered rate (frames / time isSending was on) is the
# rate asked within 1% unless the trial says it was short; the frames lost (sent - received)
# equal the frames longhaul dropped inside plus its egress tx_errors plus Pktgen port 1's
# imissed, ierrors and rx_nombuf. Settings: LH_* as in common.lua (defaults here are short).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

bin=target/debug/longhaul
out=
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "real.sh: unknown option $1" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(configs/baseline.toml configs/themis-esw.toml)

tarball=${LONGHAUL_PKTGEN_TARBALL:-../shared/peers/Pktgen-DPDK-23.06.1.tar.gz}
if [ ! -f "$tarball" ]; then
  echo "SKIP: real Pktgen test (perf/pktgen/real.sh): no Pktgen-DPDK source at $tarball;" \
    "set LONGHAUL_PKTGEN_TARBALL to pktgen-23.06.1's tarball (CI cannot download it)"
  exit 0
fi
[ -x "$bin" ] || { echo "real.sh: $bin not found (cargo build --features dpdk)" >&2; exit 2; }
"$bin" --version | grep -q "DPDK ports: built in" || { echo "real.sh: $bin was built without --features dpdk" >&2; exit 2; }
build=${LONGHAUL_PKTGEN_BUILD:-target/pktgen-23.06.1}
pktgen=$(bash perf/pktgen/build-pktgen.sh "$tarball" "$build" | tail -n 1)
pktgen=$(cd "$(dirname "$pktgen")" && pwd)/pktgen
pgsrc=$(cd "$build/src" && pwd)

export LH_SIZES=${LH_SIZES:-64,1518} LH_TRIAL_MS=${LH_TRIAL_MS:-500} LH_SETTLE_MS=${LH_SETTLE_MS:-100}
export LH_RESOLUTION=${LH_RESOLUTION:-0.05} LH_LINK_WAIT_MS=${LH_LINK_WAIT_MS:-20000}
# Rates (percent of memif's nominal 100 Gb/s) Pktgen offers on a shared 2-core machine.
sweep_rate=${LH_SWEEP_RATE:-0.2}
latency_rate=${LH_LATENCY_RATE:-0.1}

work=$(mktemp -d /tmp/longhaul-pktgen.XXXXXX)
[ -n "$out" ] || out="$work/out"
mkdir -p "$out"
gen_pid=
dut_pid=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in $dut_pid $gen_pid; do
    kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  rm -rf "$work/run"
}
trap cleanup EXIT INT TERM

fail=0
for cfg in "${configs[@]}"; do
  [ -f "$cfg" ] || { echo "real.sh: $cfg: no such config" >&2; exit 2; }
  name=$(basename "$cfg" .toml)
  for script in rfc2544 sweep latency; do
    run="$out/$name-$script"
    mkdir -p "$work/run" "$run"
    sock_a="$work/run/a.sock"; sock_b="$work/run/b.sock"
    id="lh$$-$name"
    dc_mac=$(python3 perf/memif-dut.py "$cfg" "$work/run/dut.toml" dc0 wan0 "$sock_a" "$sock_b" "$id")
    "$bin" check-config "$work/run/dut.toml" >/dev/null
    rate=
    [ "$script" = sweep ] && rate=$sweep_rate
    [ "$script" = latency ] && rate=$latency_rate
    echo "== $name: $script.lua on Pktgen ($LH_SIZES B, ${LH_TRIAL_MS} ms trials${rate:+, $rate% of line rate})"
    # Pktgen wants a terminal on stdin (tcgetattr): `script` gives it one. 300 s at most.
    cmd="$pktgen --lcores=0@1,1@0 --no-huge -m 4096 --no-pci --no-telemetry --file-prefix=$id-gen"
    cmd+=" --vdev=net_memif0,role=server,id=0,rsize=14,socket=$sock_a"
    cmd+=" --vdev=net_memif1,role=server,id=1,rsize=14,socket=$sock_b"
    cmd+=" -- -P -T -m 1.[0-1] -f $root/perf/pktgen/$script.lua"
    (cd "$pgsrc" && LH_DUT_MAC=$dc_mac LH_OUT=$run/$script.csv LH_RATE=${rate:-100} \
      exec timeout 300 script -q -e -c "$cmd" /dev/null </dev/null >"$run/pktgen.log" 2>&1) &
    gen_pid=$!
    for _ in $(seq 100); do
      [ -S "$sock_a" ] && [ -S "$sock_b" ] && break
      kill -0 "$gen_pid" 2>/dev/null || break
      sleep 0.1
    done
    "$bin" run --config "$work/run/dut.toml" --nonzero >"$run/longhaul.out" 2>"$run/longhaul.err" &
    dut_pid=$!
    gen_status=0; wait "$gen_pid" || gen_status=$?
    gen_pid=
    kill -INT "$dut_pid" 2>/dev/null || true
    dut_status=0; wait "$dut_pid" || dut_status=$?
    dut_pid=
    rm -rf "$work/run"
    # The script's own lines, without Pktgen's screen.
    tr -d '\r' <"$run/pktgen.log" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g; s/\x1b[78]//g' \
      | grep -aoE '\[ *[0-9]+B\] rate .*|totals: .*|wrote .*|[^ ]*\.lua:[0-9]+: .*|PANIC.*' >"$run/script.log" || true
    if [ "$gen_status" != 0 ] || [ "$dut_status" != 0 ]; then
      echo "FAIL: $name $script.lua: Pktgen exit $gen_status, longhaul exit $dut_status (logs: $run)"
      tail -n 5 "$run/script.log" "$run/longhaul.err"
      fail=1
      continue
    fi
    cat "$run/script.log"
    python3 - "$name $script.lua" "$run/script.log" "$run/$script.csv" "$run/longhaul.out" "$LH_SIZES" <<'EOF' || fail=1
import re, sys
label, log, csv, lh_out, sizes = sys.argv[1:]
sizes = [int(s) for s in sizes.split(",")]
problems = []
try:
    rows = open(csv).read().splitlines()
except OSError as e:
    rows = []
    problems.append(f"no CSV: {e}")
got = sorted(int(r.split(",")[0]) for r in rows[1:])
if rows and got != sorted(sizes):
    problems.append(f"{csv} has rows for sizes {got}, not {sizes}")
text = open(log).read()
trial_re = re.compile(r"^\[ *(\d+)B\] rate +([\d.]+)%: sent (\d+) of (\d+) in ([\d.]+) s "
                      r"\((\d+) pps offered, (\d+) asked\), received (\d+), lost (-?\d+)( \(generator short\))?", re.M)
trials = trial_re.findall(text)
if not trials:
    problems.append("no trial lines in the Pktgen log")
tot = re.search(r"^totals: sent (\d+) \((\d+) bytes\), received (\d+); port \d+ oerrors (\d+); "
                r"port \d+ imissed (\d+), ierrors (\d+), rx_nombuf (\d+)", text, re.M)
if not tot:
    problems.append("no totals line in the Pktgen log")
    tot = [0] * 8
else:
    tot = [0] + [int(x) for x in tot.groups()]
sent, obytes, received, oerrors, imissed, ierrors, nombuf = tot[1:]
lh = {}
for line in open(lh_out):
    parts = line.split()
    if len(parts) == 2 and parts[1].isdigit():
        lh[parts[0]] = int(parts[1])
c = lambda k: lh.get(k, 0)
# Frames: longhaul received what Pktgen counted as sent, with the rows' sizes.
# Frames past a trial's count are Pktgen's latency probes (latency.lua): LATENCY_PKT_SIZE, 72 B
# without the FCS (app/pktgen-latency.h).
exp_bytes = sum(min(int(t[2]), int(t[3])) * (int(t[0]) - 4) + max(int(t[2]) - int(t[3]), 0) * 72 for t in trials)
if sum(int(t[2]) for t in trials) != sent:
    problems.append(f"the trials' sent frames sum to {sum(int(t[2]) for t in trials)}, the totals say {sent}")
if c("port.dc0.rx_pkts") != sent:
    problems.append(f"longhaul port.dc0.rx_pkts {c('port.dc0.rx_pkts')} != Pktgen sent {sent}")
if c("port.dc0.rx_bytes") != exp_bytes or obytes != exp_bytes:
    problems.append(f"bytes: longhaul port.dc0.rx_bytes {c('port.dc0.rx_bytes')}, Pktgen obytes {obytes}, "
                    f"the rows' sizes (FCS excluded) make {exp_bytes}")
mean = c("port.dc0.rx_bytes") / max(c("port.dc0.rx_pkts"), 1) + 4
# Rates: a trial not marked short offered the rate asked within 1%.
bad = [t for t in trials if not t[9] and abs(int(t[5]) - int(t[6])) > 0.01 * int(t[6])]
if bad:
    problems.append(f"{len(bad)} trials offered a rate off the asked by more than 1% and are not marked short, "
                    f"first: {bad[0][0]} B {bad[0][5]} pps offered, {bad[0][6]} asked")
short = sum(1 for t in trials if t[9])
worst = max((abs(int(t[5]) - int(t[6])) / int(t[6]) for t in trials if not t[9]), default=0.0)
if short == len(trials):
    print(f"WARN: {label}: every trial short: Pktgen did not offer the rate asked (a loaded machine?); no rate was checked")
# Losses: every frame sent and not received is found in a counter.
lost = sent - received
inside = c("port.dc0.rx_pkts") - c("port.wan0.tx_pkts")
egress = c("io.wan0.tx_errors")
gen_side = imissed + ierrors + nombuf
if lost != inside + egress + gen_side:
    problems.append(f"lost {lost} != longhaul inside {inside} (dc0 rx_pkts - wan0 tx_pkts) + io.wan0.tx_errors "
                    f"{egress} + Pktgen port 1 imissed+ierrors+rx_nombuf {gen_side}: {lost - inside - egress - gen_side} unaccounted")
summary = (f"{len(trials)} trials ({short} short), sent {sent} = longhaul dc0 rx; "
           f"mean frame {mean:.1f} B on the wire, bytes = the rows' sizes; "
           + (f"offered = asked within {100 * worst:.2f}%; " if short < len(trials) else "no trial offered as asked; ")
           + f"lost {lost} = {inside} in longhaul + {egress} io.wan0.tx_errors (longhaul's memif tx into Pktgen) "
           f"+ {gen_side} at Pktgen port 1; oerrors {oerrors}")
if problems:
    print(f"FAIL: {label}: " + "; ".join(problems))
    print(f"      ({summary})")
    sys.exit(1)
print(f"PASS: {label}: {summary}")
EOF
  done
done
echo "results: $out (per run: the CSV, script.log, pktgen.log, longhaul.out/err)"
exit $fail
