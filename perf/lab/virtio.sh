#!/usr/bin/env bash
# Virtio lab: longhaul with a virtio_user port (DPDK's virtio PMD in user space) whose vhost-user
# backend is dpdk-testpmd's net_vhost, both directions. Root; needs 2 MB hugepages (virtio_user
# shares its memory with the backend through file descriptors, which --no-huge cannot give).
#
#   LONGHAUL_BIN=target/debug/longhaul bash perf/lab/virtio.sh
#
# 1. tx: testpmd receives (rxonly) on the vhost port; longhaul (perf/lab/lab-virtio.toml) routes
#    the shipped trace (1024 RoCE frames, net_pcap on dc0) out of wan0 = virtio_user. PASS when
#    every frame is accounted for across the boundary: frames testpmd received + longhaul's
#    io.wan0.tx_errors (a full virtio ring) = 1024 = longhaul's wan0 tx_pkts, and testpmd
#    received some.
# 2. rx: testpmd sends (txonly, 64-byte UDP to 198.18.0.0/24) into the vhost port; longhaul
#    receives on wan0 and drops what it has no route for, counted (drop.no_route). PASS when
#    wan0's rx_pkts > 0 and every one of them is counted as dropped by that reason.
# Both runs check longhaul's clean stop. The hugepages the script reserves (if fewer than 512
# are free) are given back at the end. Exit 1 on any FAIL; exit 0 with a SKIP line when the
# machine cannot reserve hugepages.
#
# Environment: LONGHAUL_BIN (a binary built with --features dpdk; default target/release/longhaul,
# built if missing). Needs dpdk-testpmd (Debian's dpdk package).
set -Eeuo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
LH=${LONGHAUL_BIN:-$ROOT/target/release/longhaul}
NPASS=0
NFAIL=0
pass() { echo "PASS: $*"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $*"; NFAIL=$((NFAIL + 1)); }

[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (hugepages)"; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "FAIL: dpdk-testpmd not found (apt-get install dpdk)"; exit 1; }
if [ ! -x "$LH" ]; then cargo build --release --features dpdk --locked; fi

WORK=$(mktemp -d /tmp/longhaul-virtio.XXXXXX)
RUN=lhv$$
TP_PID=
HP_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
cleanup() {
  set +e
  [ -n "$TP_PID" ] && kill "$TP_PID" 2>/dev/null && wait "$TP_PID" 2>/dev/null
  rm -f /dev/hugepages/"$RUN"* 2>/dev/null
  echo "$HP_BEFORE" >/proc/sys/vm/nr_hugepages 2>/dev/null
  if [ "$NFAIL" = 0 ]; then rm -rf "$WORK"; else echo "logs kept in $WORK"; fi
}
trap cleanup EXIT

# Hugepages: 1 GB (testpmd asks for 256 MB but maps more; longhaul 256 MB). Reserving them may
# need the memory compacted first on a machine that has been busy.
NEED=512
free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
if [ "${free:-0}" -lt "$NEED" ]; then
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true
  echo $((HP_BEFORE + NEED - ${free:-0} + 16)) >/proc/sys/vm/nr_hugepages 2>/dev/null || true
  free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
fi
if [ "${free:-0}" -lt "$NEED" ]; then
  echo "SKIP: virtio lab: cannot reserve 2 MB hugepages here ($free free)"
  exit 0
fi
mountpoint -q /dev/hugepages || { echo "SKIP: virtio lab: no hugetlbfs on /dev/hugepages"; exit 0; }

SOCK=$WORK/vhost0.sock
sed -e "s|@PREFIX@|$RUN-lh|" -e "s|@SOCK@|$SOCK|" perf/lab/lab-virtio.toml >"$WORK/config.toml"

testpmd() { # mode
  rm -f "$SOCK"
  dpdk-testpmd -l 0,1 --no-pci --no-telemetry --file-prefix="$RUN-tp" -m 256 \
    --vdev "net_vhost0,iface=$SOCK,queues=1" -- --forward-mode="$1" --no-mlockall \
    --stats-period=1 </dev/null >"$WORK/testpmd-$1.log" 2>&1 &
  TP_PID=$!
  for _ in $(seq 100); do
    [ -S "$SOCK" ] && return 0
    kill -0 "$TP_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 5 "$WORK/testpmd-$1.log"
  return 1
}
stop_testpmd() {
  kill -INT "$TP_PID" 2>/dev/null || true
  wait "$TP_PID" 2>/dev/null || true
  TP_PID=
}
longhaul() { # seconds log
  local rc=0
  timeout -s INT "$1" "$LH" run --config "$WORK/config.toml" >"$2" 2>"$2.err" || rc=$?
  # timeout says 124 when it had to send the signal; longhaul itself exits 0 on SIGINT.
  if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then
    tail -n 5 "$2.err"
    return 1
  fi
  grep -q '^run:' "$2"
}
counter() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

echo "== tx: longhaul -> virtio_user -> vhost (testpmd rxonly)"
testpmd rxonly || { fail "testpmd (net_vhost) did not create $SOCK"; exit 1; }
if longhaul 8 "$WORK/tx.out"; then
  pass "longhaul ran on virtio_user and stopped cleanly"
else
  fail "longhaul on virtio_user (see $WORK/tx.out.err)"
fi
sleep 1.5
stop_testpmd
got=$(grep -o 'RX-packets: *[0-9]*' "$WORK/testpmd-rxonly.log" | tail -n 1 | awk '{print $2}')
sent=$(counter port.wan0.tx_pkts "$WORK/tx.out")
errs=$(counter io.wan0.tx_errors "$WORK/tx.out")
echo "   longhaul wan0 tx_pkts ${sent:-?}, io.wan0.tx_errors ${errs:-?}; testpmd received ${got:-?}"
if [ "${sent:-0}" = 1024 ] && [ "${got:-0}" -gt 0 ] && [ $((${got:-0} + ${errs:-0})) = 1024 ]; then
  pass "tx over virtio: every frame accounted for (received by the vhost side, or counted as a full ring)"
else
  fail "tx over virtio: 1024 routed to wan0 expected; received + tx_errors must be 1024"
fi

echo "== rx: vhost (testpmd txonly) -> virtio_user -> longhaul"
testpmd txonly || { fail "testpmd (net_vhost) did not create $SOCK"; exit 1; }
if longhaul 6 "$WORK/rx.out"; then
  pass "longhaul ran on virtio_user and stopped cleanly"
else
  fail "longhaul on virtio_user (see $WORK/rx.out.err)"
fi
stop_testpmd
rx=$(counter port.wan0.rx_pkts "$WORK/rx.out")
noroute=$(counter drop.no_route "$WORK/rx.out")
echo "   longhaul wan0 rx_pkts ${rx:-?}, drop.no_route ${noroute:-?}"
if [ "${rx:-0}" -gt 0 ] && [ "${noroute:-0}" = "${rx:-0}" ]; then
  pass "rx over virtio: $rx frames from the vhost side, each counted (no route to 198.18.0.0/24)"
else
  fail "rx over virtio: expected frames on wan0, all counted as drop.no_route"
fi
if grep -q "packet conservation violated" "$WORK/tx.out.err" "$WORK/rx.out.err"; then
  fail "packet conservation violated (longhaul's stderr)"
fi

echo "== $NPASS passed, $NFAIL failed"
[ "$NFAIL" = 0 ]
