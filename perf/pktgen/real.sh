#!/usr/bin/env bash
# The Pktgen scripts (rfc2544.lua, sweep.lua, latency.lua) on the real Pktgen-DPDK, through a
# `longhaul run` of each config over memif on one machine, no hugepages, no NIC (root only for
# the scripts' clock: /proc/timer_list; without it they fork `date`):
#
#   Pktgen  port 0 net_memif0 (server) ==A==> net_memif0 (client) dc0   [longhaul run]
#           port 1 net_memif1 (server) <==B== net_memif1 (client) wan0
#
# Pktgen holds both memif servers and starts first (a DPDK 22.11 memif client connects once,
# when its port starts); the scripts wait for the links. Pktgen's lcore 1 (both ports) has CPU 0
# with longhaul's main lcore and Pktgen's busy display/stats timer thread (pinned to CPU 0 by
# Pktgen whatever --lcores says; niced here so that lcore 1 keeps the CPU); its main lcore 0
# (Lua, sleeping in pktgen.delay) shares CPU 1 with longhaul's worker.
#
#   perf/pktgen/real.sh [--bin PATH] [--out DIR] [CONFIG | testpmd-io ...]   (default: baseline, themis-esw)
#
# `testpmd-io` in place of a config runs the scripts through dpdk-testpmd's io forwarding on the
# same memif path instead (the yardstick; only the CSVs are checked).
# Builds the pinned Pktgen with perf/pktgen/build-pktgen.sh from $LONGHAUL_PKTGEN_TARBALL
# (default ../shared/peers/Pktgen-DPDK-23.06.1.tar.gz from the repository root) into
# $LONGHAUL_PKTGEN_BUILD (default target/pktgen-23.06.1); prints SKIP and exits 0 when the
# tarball is absent. LH_SCRIPTS (default "rfc2544 sweep latency") picks the scripts. Checks each
# run (perf/pktgen/check.py run): the script wrote its CSV with a row per size; longhaul
# received every frame Pktgen counted as sent, with the bytes the rows' sizes make (FCS
# excluded, as DPDK counts); every trial Pktgen completed (its whole count sent) at the rate
# asked, by the script's measure, was received by longhaul at that rate within 1% by longhaul's
# own clock (its dc0 rx_pkts and worker clock from GET /stats, published every 10 ms here,
# polled by check.py poll: the paced part's frames over their time from first to last), and at
# least one trial per run was so checked; the frames lost (sent - received) equal the frames
# longhaul dropped inside plus its egress tx_errors plus Pktgen port 1's imissed, ierrors and
# rx_nombuf.
# Settings: LH_* as in common.lua (defaults here are short).
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
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
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

# Trials of 3 s: near what the path holds, longhaul's worker on a shared CPU reads the ring late
# or stalls (a snapshot 18 ms after the one before), which put 2 s trials' rates on its clock up
# to 0.98% from the rate asked; few of them (a coarse search: the check needs trials, not
# resolution).
export LH_SIZES=${LH_SIZES:-64,1518} LH_TRIAL_MS=${LH_TRIAL_MS:-3000} LH_SETTLE_MS=${LH_SETTLE_MS:-100}
export LH_RESOLUTION=${LH_RESOLUTION:-0.5} LH_LINK_WAIT_MS=${LH_LINK_WAIT_MS:-20000}
# Rates (percent of memif's nominal 100 Gb/s) Pktgen offers on a shared 2-core machine.
sweep_rate=${LH_SWEEP_RATE:-0.2}
latency_rate=${LH_LATENCY_RATE:-0.1}

work=$(mktemp -d /tmp/longhaul-pktgen.XXXXXX)
[ -n "$out" ] || out="$work/out"
mkdir -p "$out"
gen_pid=
dut_pid=
poll_pid=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in $dut_pid $gen_pid $poll_pid; do
    kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  rm -rf "$work/run"
}
trap cleanup EXIT INT TERM

fail=0
for cfg in "${configs[@]}"; do
  [ -f "$cfg" ] || [ "$cfg" = testpmd-io ] || { echo "real.sh: $cfg: no such config" >&2; exit 2; }
  name=$(basename "$cfg" .toml)
  for script in ${LH_SCRIPTS:-rfc2544 sweep latency}; do
    run="$out/$name-$script"
    mkdir -p "$work/run" "$run"
    sock_a="$work/run/a.sock"; sock_b="$work/run/b.sock"
    id="lh$$-$name"
    if [ "$cfg" = testpmd-io ]; then
      dc_mac=02:00:00:00:00:01
    else
      dc_mac=$(python3 perf/memif-dut.py "$cfg" "$work/run/dut.toml" dc0 wan0 "$sock_a" "$sock_b" "$id")
      # Counters published every 10 ms (the rate longhaul received at, from its own clock).
      sed -i '/^stats_interval_ms *=/d; s/^metrics_listen = "off"$/&\nstats_interval_ms = 10/' "$work/run/dut.toml"
      grep -q '^stats_interval_ms = 10$' "$work/run/dut.toml" || { echo "real.sh: no [control] in $work/run/dut.toml" >&2; exit 2; }
      "$bin" check-config "$work/run/dut.toml" >/dev/null
    fi
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
    # Pktgen's display and stats timer is a busy loop in a thread of its own, pinned to CPU
    # "main lcore id" (app/pktgen.c pktgen_timer_setup: CPU_SET(rte_get_main_lcore())), CPU 0
    # whatever --lcores says: with the lcore that sends. Niced, it leaves that lcore the CPU.
    niced=
    for _ in $(seq 50); do
      for p in $(pgrep -f -- "--file-prefix=$id-gen"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pktgen ] || continue
        for t in "/proc/$p/task/"*; do
          [ "${t##*/}" != "$p" ] && [ "$(cat "$t/comm" 2>/dev/null)" = pktgen ] \
            && renice -n 19 -p "${t##*/}" >/dev/null && niced=1
        done
      done
      [ -n "$niced" ] && break
      kill -0 "$gen_pid" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$niced" ] || echo "real.sh: Pktgen's timer thread not found; not niced" >&2
    if [ "$cfg" = testpmd-io ]; then
      # The yardstick: testpmd's io forwarding between the same two memif ports (as
      # perf/rfc2544.sh testpmd-io), no counters of longhaul's to check against.
      dpdk-testpmd -l 0,1 --no-huge -m 512 --no-pci --no-telemetry --file-prefix="$id-dut" \
        "--vdev=net_memif0,role=client,id=0,rsize=14,socket=$sock_a" \
        "--vdev=net_memif1,role=client,id=1,rsize=14,socket=$sock_b" -- \
        --forward-mode=io --port-topology=paired --auto-start --stats-period 5 \
        --total-num-mbufs=32768 >"$run/longhaul.out" 2>"$run/longhaul.err" </dev/null &
      dut_pid=$!
    else
      "$bin" run --config "$work/run/dut.toml" --nonzero >"$run/longhaul.out" 2>"$run/longhaul.err" &
      dut_pid=$!
      # longhaul's dc0 rx_pkts and its worker's clock, every 10 ms, while it runs.
      python3 perf/pktgen/check.py poll "$run/longhaul.err" "$run/rx.txt" dc0 &
      poll_pid=$!
    fi
    gen_status=0; wait "$gen_pid" || gen_status=$?
    gen_pid=
    kill -INT "$dut_pid" 2>/dev/null || true
    dut_status=0; wait "$dut_pid" || dut_status=$?
    dut_pid=
    [ -z "$poll_pid" ] || wait "$poll_pid" || true
    poll_pid=
    rm -rf "$work/run"
    # The script's own lines, without Pktgen's screen.
    tr -d '\r' <"$run/pktgen.log" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g; s/\x1b[78]//g' \
      | grep -aoE '\[ *[0-9]+B\] rate .*|totals: .*|wrote .*|[^ ]*\.lua:[0-9]+: .*|PANIC.*' >"$run/script.log" || true
    if [ "$gen_status" != 0 ] || [ "$dut_status" != 0 ]; then
      echo "FAIL: $name $script.lua: Pktgen exit $gen_status, DUT exit $dut_status (logs: $run)"
      tail -n 5 "$run/script.log" "$run/longhaul.err"
      fail=1
      continue
    fi
    cat "$run/script.log"
    if [ "$cfg" = testpmd-io ]; then
      if [ -s "$run/$script.csv" ]; then
        echo "PASS: testpmd-io $script.lua: wrote its CSV (no longhaul counters to check)"
      else
        echo "FAIL: testpmd-io $script.lua: no CSV"; fail=1
      fi
      continue
    fi
    python3 perf/pktgen/check.py run "$name $script.lua" "$run/script.log" "$run/$script.csv" \
      "$run/longhaul.out" "$run/rx.txt" "$LH_SIZES" || fail=1
  done
done
echo "results: $out (per run: the CSV, script.log, pktgen.log, longhaul.out/err)"
exit $fail
