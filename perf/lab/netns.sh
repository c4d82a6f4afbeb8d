#!/usr/bin/env bash
# Network-namespace lab: longhaul on DPDK (net_af_packet PMD over veth pairs) between two hosts
# in their own network namespaces, carrying real kernel traffic. Root, no hugepages, no NIC.
#
#   bash perf/lab/netns.sh [--config FILE] [--keep]
#
#   namespace h1: eth0 10.0.0.2/24, MAC 02:00:00:00:10:01, gateway 10.0.0.1
#       | veth
#   namespace sw: sw-h1 ... longhaul run (EAL --vdev=net_af_packet*,iface=sw-h1 / sw-h2) ... sw-h2
#       | veth
#   namespace h2: eth0 10.1.0.2/24, MAC 02:00:00:00:20:01, gateway 10.1.0.1
#
# The namespaces are named lh<PID>-{sw,h1,h2}; nothing is created in the root namespace. The
# hosts reach each other through longhaul's ports as their gateway, with a static ARP entry for
# the port's MAC (longhaul does not answer ARP). Checks, each printing a PASS or FAIL line:
# ping both ways (TTL decremented by one), a TCP transfer (sha256 of what arrives), captures on
# both hosts (source MAC = longhaul's egress port, TTL, checksums and RoCE ICRCs recomputed by
# pcap-tests/oracle/verify.py), the shipped RoCE trace (examples/roce-64flows.pcap, MACs
# rewritten by tcprewrite) replayed by tcpreplay and found byte-exact (as routed) on h2 and
# decoded by tshark, a generated RoCE trace with ECN CE (THEMIS configs: a daemon message first,
# then CNPs expected back at h1 with valid ICRCs and CE cleared toward h2; other configs: CE
# kept, no CNPs), longhaul's tx counters against the captures, no drops, and a clean stop.
# Exit status 1 if any check fails.
#
# --config FILE   longhaul config (default perf/lab/lab-baseline.toml; perf/lab/lab-themis.toml
#                 runs THEMIS). It must have two DPDK ports on vdevs with iface=sw-h1 and
#                 iface=sw-h2 in [dpdk] eal_args, and [[routes]] (routed mode: the only one the
#                 hosts are set up for today). @RUN@ in the file is replaced by the run's id (use
#                 it in --file-prefix). The file is copied into the run's directory, so relative
#                 paths in it would break; vdev paths are relative to the repository root.
# --keep          leave the namespaces, longhaul and the run's directory (logs, captures) in
#                 place at the end, and print how to remove them.
#
# Environment: LONGHAUL_BIN (a longhaul binary built with --features dpdk; without it the script
# runs cargo build --release --features dpdk --locked and uses target/release/longhaul).
# Needs: iproute2, ethtool, tcpdump, tshark, tcpreplay (tcprewrite), iputils-ping, python3 with
# scapy.
set -Eeuo pipefail

usage() { sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

CONFIG=
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || { echo "--config needs a file" >&2; exit 2; }; CONFIG=$2; shift 2 ;;
    --config=*) CONFIG=${1#--config=}; shift ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

# Paths given by the caller are relative to where it runs; then work from the repository root.
if [ -n "$CONFIG" ]; then
  CONFIG=$(realpath -e "$CONFIG") || { echo "FAIL: --config: no such file"; exit 1; }
fi
if [ -n "${LONGHAUL_BIN:-}" ]; then
  LONGHAUL_BIN=$(realpath -e "$LONGHAUL_BIN") || { echo "FAIL: LONGHAUL_BIN: no such file"; exit 1; }
fi
cd "$(dirname "$0")/../.."
ROOT=$PWD
CONFIG=${CONFIG:-$ROOT/perf/lab/lab-baseline.toml}
LAB_PY=(python3 "$ROOT/perf/lab/lab_check.py")

NPASS=0
NFAIL=0
pass() { echo "PASS: $*"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $*"; NFAIL=$((NFAIL + 1)); }
step() { echo "== $*"; }
indent() { sed 's/^/  /'; }

[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (network namespaces, af_packet)"; exit 1; }
missing=()
for c in ip ethtool tcpdump tshark tcpreplay tcprewrite ping python3 sha256sum; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
python3 -c 'import scapy.contrib.roce' 2>/dev/null || missing+=("python3-scapy")
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: missing tools: ${missing[*]} (apt-get install iproute2 ethtool tcpdump tshark tcpreplay iputils-ping; pip install scapy)"
  exit 1
fi

RUN=lh$$
NS_SW=$RUN-sw
NS_H1=$RUN-h1
NS_H2=$RUN-h2
H1_MAC=02:00:00:00:10:01
H2_MAC=02:00:00:00:20:01
H1_IP=10.0.0.2
H2_IP=10.1.0.2
H1_GW=10.0.0.1
H2_GW=10.1.0.1
WORK=$(mktemp -d "/tmp/longhaul-lab-$RUN.XXXXXX")
CREATED_NS=()
LH_PID=
CAP_PIDS=()
T_START=$SECONDS

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM ERR
  if [ "$KEEP" = 1 ]; then
    echo "== --keep: left in place: namespaces ${CREATED_NS[*]}, longhaul pid ${LH_PID:-none}, $WORK"
    echo "   remove with: kill ${LH_PID:-}; for n in ${CREATED_NS[*]}; do ip netns del \$n; done; rm -rf $WORK"
    exit "$rc"
  fi
  for p in "${CAP_PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
  if [ -n "$LH_PID" ] && kill -0 "$LH_PID" 2>/dev/null; then
    kill -TERM "$LH_PID"
    for _ in $(seq 50); do kill -0 "$LH_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$LH_PID" 2>/dev/null
  fi
  for ns in "${CREATED_NS[@]}"; do
    # Anything still running in our own namespaces was started by this script.
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  wait 2>/dev/null
  # Deleting a namespace destroys its end of each veth pair, and with it the pair.
  for ns in "${CREATED_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ "$rc" = 0 ] && [ "$NFAIL" = 0 ]; then
    rm -rf "$WORK"
  else
    echo "logs and captures kept in $WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted (SIGINT)"; exit 130' INT
trap 'echo "FAIL: terminated (SIGTERM)"; exit 143' TERM
trap 'echo "FAIL: netns.sh line $LINENO: a command failed (status $?); stopping"' ERR

# ---- the binary and the config --------------------------------------------------------------

if [ -n "${LONGHAUL_BIN:-}" ]; then
  LH=$LONGHAUL_BIN
else
  step "cargo build --release --features dpdk --locked"
  cargo build --release --features dpdk --locked
  LH=$ROOT/target/release/longhaul
fi
[ -x "$LH" ] || { echo "FAIL: $LH is not an executable"; exit 1; }

step "config $CONFIG (run $RUN, directory $WORK)"
sed "s/@RUN@/$RUN/g" "$CONFIG" >"$WORK/config.toml"
if out=$("$LH" check-config "$WORK/config.toml" 2>&1); then
  pass "check-config: ${out#"$WORK/"}"
else
  echo "$out"
  fail "check-config $CONFIG"
  exit 1
fi
CFG_API='' CFG_TOKEN='' CFG_PIPELINE='' CFG_ROUTED='' CFG_H1_PORT='' CFG_H1_PORT_MAC='' CFG_H2_PORT='' CFG_H2_PORT_MAC=''
cfg_vars=$("${LAB_PY[@]}" config "$WORK/config.toml")
eval "$cfg_vars"
echo "pipeline $CFG_PIPELINE; h1 on port $CFG_H1_PORT ($CFG_H1_PORT_MAC), h2 on port $CFG_H2_PORT ($CFG_H2_PORT_MAC); API $CFG_API"
if [ "$CFG_ROUTED" != 1 ]; then
  fail "the config has no [[routes]]: only routed mode (hosts using longhaul's ports as gateways) is set up by this script today"
  exit 1
fi
# Routed: a frame from h1 reaches h2 with TTL - 1, from the egress port's MAC to h2's.
TTL_DEC=1
EXP_TTL=$((64 - TTL_DEC))
CTL=("$LH" ctl --addr "$CFG_API")
if [ -n "$CFG_TOKEN" ]; then CTL+=(--token "$CFG_TOKEN"); fi

# ---- topology ---------------------------------------------------------------------------------

step "namespaces $NS_SW $NS_H1 $NS_H2, veth pairs h1:eth0 - sw:sw-h1, h2:eth0 - sw:sw-h2"
for ns in "$NS_SW" "$NS_H1" "$NS_H2"; do
  if ip netns list | grep -qw "^$ns"; then echo "FAIL: namespace $ns exists already"; exit 1; fi
  ip netns add "$ns"
  CREATED_NS+=("$ns")
  ip -n "$ns" link set lo up
  # No IPv6: no router solicitations, MLD or DAD frames through the switch.
  if [ -d /proc/sys/net/ipv6 ]; then
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  fi
done
ip -n "$NS_SW" link add sw-h1 type veth peer name eth0 netns "$NS_H1"
ip -n "$NS_SW" link add sw-h2 type veth peer name eth0 netns "$NS_H2"
setup_host() { # ns mac ip/len gateway gateway-mac
  ip -n "$1" link set eth0 address "$2" mtu 1500
  ip -n "$1" addr add "$3" dev eth0
  # The kernel's checksums and segments as they are on the wire: af_packet hands longhaul the
  # frames as the veth carries them (a partial checksum or a 64 KB GSO frame otherwise).
  ip netns exec "$1" ethtool -K eth0 tx off tso off gso off gro off >/dev/null
  ip -n "$1" link set eth0 up
  ip -n "$1" neigh replace "$4" lladdr "$5" dev eth0 nud permanent
  ip -n "$1" route add default via "$4" dev eth0
}
setup_host "$NS_H1" "$H1_MAC" "$H1_IP/24" "$H1_GW" "$CFG_H1_PORT_MAC"
setup_host "$NS_H2" "$H2_MAC" "$H2_IP/24" "$H2_GW" "$CFG_H2_PORT_MAC"
for i in sw-h1 sw-h2; do
  ip -n "$NS_SW" link set "$i" mtu 1500
  ip netns exec "$NS_SW" ethtool -K "$i" tx off tso off gso off gro off >/dev/null
  ip -n "$NS_SW" link set "$i" up
done

# ---- longhaul ---------------------------------------------------------------------------------

step "longhaul run in $NS_SW"
ip netns exec "$NS_SW" "$LH" run --config "$WORK/config.toml" >"$WORK/longhaul.out" 2>"$WORK/longhaul.err" &
LH_PID=$!
T0=$SECONDS
up=0
for _ in $(seq 300); do
  if ip netns exec "$NS_SW" "${CTL[@]}" health >"$WORK/health.json" 2>&1; then
    up=1
    break
  fi
  kill -0 "$LH_PID" 2>/dev/null || break
  sleep 0.1
done
if [ "$up" = 1 ]; then
  pass "longhaul up: management API health answered after $((SECONDS - T0)) s ($(wc -l <"$WORK/longhaul.err") lines on stderr)"
else
  sed 's/^/  longhaul: /' "$WORK/longhaul.err"
  fail "longhaul did not come up within 30 s (management API $CFG_API in $NS_SW)"
  exit 1
fi

# ---- captures ---------------------------------------------------------------------------------

capture() { # ns file: what the host receives
  ip netns exec "$1" tcpdump -i eth0 -Q in -n --immediate-mode -U -s 0 -B 8192 -Z root -w "$2" 2>"$2.log" &
  CAP_PIDS+=($!)
  for _ in $(seq 100); do
    grep -q "listening on" "$2.log" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$2.log"
  return 1
}
capture "$NS_H1" "$WORK/h1.pcap" || { fail "tcpdump did not start on h1"; exit 1; }
capture "$NS_H2" "$WORK/h2.pcap" || { fail "tcpdump did not start on h2"; exit 1; }
sleep 0.3
ip netns exec "$NS_SW" "${CTL[@]}" stats >"$WORK/stats0.json"

# ---- traffic ----------------------------------------------------------------------------------

ping_check() { # from-ns to-ip label
  local out received ttls
  out=$(ip netns exec "$1" ping -n -c 5 -i 0.2 -W 2 "$2" 2>&1) || true
  received=$(sed -n 's/.* \([0-9][0-9]*\) received.*/\1/p' <<<"$out")
  ttls=$(grep -o 'ttl=[0-9]*' <<<"$out" | sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; s=", "}') || true
  if [ "${received:-0}" = 5 ] && [ "$ttls" = "ttl=$EXP_TTL x5" ]; then
    pass "ping $3: 5/5 replies, $ttls ($(tail -n 1 <<<"$out"))"
  else
    indent <<<"$out"
    fail "ping $3: ${received:-0}/5 replies, TTLs: ${ttls:-none} (expected ttl=$EXP_TTL)"
  fi
}
step "ping"
ping_check "$NS_H1" "$H2_IP" "h1 -> h2"
ping_check "$NS_H2" "$H1_IP" "h2 -> h1"

step "TCP h1 -> h2, 8 MiB"
head -c $((8 << 20)) /dev/urandom >"$WORK/tcp.bin"
ip netns exec "$NS_H2" "${LAB_PY[@]}" tcp-sink --timeout 15 "$H2_IP" 5001 "$WORK/tcp.recv" >"$WORK/tcp-sink.log" 2>&1 &
SINK_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/tcp-sink.log" && break; sleep 0.05; done
if send_out=$(ip netns exec "$NS_H1" "${LAB_PY[@]}" tcp-send --timeout 15 "$H2_IP" 5001 "$WORK/tcp.bin" 2>&1) &&
  wait "$SINK_PID"; then
  want=$(sha256sum <"$WORK/tcp.bin" | cut -d' ' -f1)
  got=$(sha256sum <"$WORK/tcp.recv" | cut -d' ' -f1)
  if [ "$want" = "$got" ]; then
    pass "TCP h1 -> h2: $send_out, sha256 ${got:0:16}... identical"
  else
    fail "TCP h1 -> h2: $(stat -c %s "$WORK/tcp.recv") bytes arrived, sha256 $got != $want"
  fi
else
  indent <<<"$send_out"
  indent <"$WORK/tcp-sink.log"
  fail "TCP h1 -> h2: transfer failed"
fi

step "tcpreplay of examples/roce-64flows.pcap from h1 (MACs rewritten by tcprewrite)"
tcprewrite --enet-smac="$H1_MAC" --enet-dmac="$CFG_H1_PORT_MAC" \
  -i examples/roce-64flows.pcap -o "$WORK/roce64.pcap"
if out=$(ip netns exec "$NS_H1" tcpreplay -i eth0 --pps=5000 "$WORK/roce64.pcap" 2>&1); then
  pass "tcpreplay: $(sed -n 's/^ *\(Actual: .*\)/\1/p' <<<"$out")"
else
  indent <<<"$out"
  fail "tcpreplay of $WORK/roce64.pcap failed"
fi

CE_N=32
CQPN=0x111
SQPN=0x222
step "RoCE with ECN CE from h1 ($CE_N SEND_ONLY to $H2_IP, DestQP $SQPN; pipeline $CFG_PIPELINE)"
"${LAB_PY[@]}" gen-roce "$WORK/roce-ce.pcap" --src-mac "$H1_MAC" --dst-mac "$CFG_H1_PORT_MAC" \
  --src "$H1_IP" --dst "$H2_IP" --dqpn "$SQPN" --count "$CE_N" --ce
if [ "$CFG_PIPELINE" = themis ]; then
  # THEMIS's host daemon would announce the QP: (client, destination, sQPN) -> cQPN.
  ip netns exec "$NS_H1" "${LAB_PY[@]}" send-daemon "$H1_GW" "$H2_IP" "$CQPN" "$SQPN" 1
  sleep 0.3 # the control thread installs the QP_field entry
  EXP_ECN=2 # CE cleared to ECT(0) by PNP
else
  EXP_ECN=3 # CE kept
fi
# 5 ms apart, far more than a CNP interval (50 us): under THEMIS each CE packet is normally due a
# CNP (but a busy machine can bunch frames up: see the CNP check).
if out=$(ip netns exec "$NS_H1" tcpreplay -i eth0 --pps=200 "$WORK/roce-ce.pcap" 2>&1); then
  pass "tcpreplay: $(sed -n 's/^ *\(Actual: .*\)/\1/p' <<<"$out")"
else
  indent <<<"$out"
  fail "tcpreplay of $WORK/roce-ce.pcap failed"
fi

sleep 0.5 # stats_interval and the last frames
ip netns exec "$NS_SW" "${CTL[@]}" stats >"$WORK/stats1.json"
for p in "${CAP_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
for p in "${CAP_PIDS[@]}"; do wait "$p" || true; done
CAP_PIDS=()

# ---- what the hosts received --------------------------------------------------------------------

# Frames in a capture matching a display filter (one field per frame: a summary line can hold a
# payload's newline).
nframes() { # capture [filter]
  tshark -r "$1" -d udp.port==4791,infiniband -Y "${2:-frame}" -T fields -e frame.number 2>/dev/null | wc -l
}
CAP_H1=$(nframes "$WORK/h1.pcap")
CAP_H2=$(nframes "$WORK/h2.pcap")
step "captures: h1 received $CAP_H1 frames, h2 $CAP_H2"
for h in h1 h2; do
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel$/\1/p' "$WORK/$h.pcap.log")
  [ "${dropped:-0}" = 0 ] || fail "tcpdump on $h: $dropped packets dropped by kernel"
done
mac_check() { # capture from-prefix egress-port-mac host-mac label
  # Forwarded frames only: CNPs (BTH opcode 0x81) are longhaul's own (THEMIS), checked below.
  local sel rows
  sel="ip.src == $2 && !(infiniband.bth.opcode == 0x81 && !icmp)"
  rows=$(tshark -r "$1" -d udp.port==4791,infiniband -Y "$sel" -T fields -E occurrence=f -e eth.src -e eth.dst -e ip.ttl 2>/dev/null |
    sort | uniq -c | awk '{printf "%s%s -> %s ttl %s: %s", s, $2, $3, $4, $1; s="; "}') || true
  if [ -n "$rows" ] && [ "$(nframes "$1" "($sel) && !(eth.src == $3 && eth.dst == $4 && ip.ttl == $EXP_TTL)")" = 0 ]; then
    pass "$5: every IPv4 frame from $2 has source MAC $3 (longhaul's egress port), destination $4, TTL $EXP_TTL ($rows)"
  else
    fail "$5: frames from $2: ${rows:-none} (expected $3 -> $4 ttl $EXP_TTL only)"
  fi
}
mac_check "$WORK/h2.pcap" 10.0.0.0/24 "$CFG_H2_PORT_MAC" "$H2_MAC" "MAC rewrite toward h2 (capture on h2)"
mac_check "$WORK/h1.pcap" 10.1.0.0/16 "$CFG_H1_PORT_MAC" "$H1_MAC" "MAC rewrite toward h1 (capture on h1)"

for h in h1 h2; do
  if out=$(python3 pcap-tests/oracle/verify.py "$WORK/$h.pcap" 2>&1); then
    pass "checksums on $h (pcap-tests/oracle/verify.py: IPv4 header, TCP and UDP checksums, RoCE ICRCs recomputed): $(tail -n 1 <<<"$out")"
  else
    head -n 20 <<<"$out" | indent
    fail "checksums on $h: pcap-tests/oracle/verify.py found violations"
  fi
done

if out=$("${LAB_PY[@]}" forwarded "$WORK/roce64.pcap" "$WORK/h2.pcap" \
  --src-mac "$CFG_H2_PORT_MAC" --dst-mac "$H2_MAC" --ttl-dec "$TTL_DEC" 2>&1); then
  pass "shipped RoCE trace at h2: $out"
else
  fail "shipped RoCE trace at h2: $out"
fi
# tshark's own RoCE decode: BTH opcodes and how many of each ("1 x896, 2 x64 (960)").
decode() { # capture filter
  tshark -r "$1" -d udp.port==4791,infiniband -Y "$2" -T fields -e infiniband.bth.opcode 2>/dev/null |
    sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; n += $1; s=", "} END {printf "%s (%d)", (n ? "" : "none"), n}'
}
want=$(decode "$WORK/roce64.pcap" "infiniband.bth.opcode")
# (ICMP errors quote RoCE packets too: left out.)
got=$(decode "$WORK/h2.pcap" "infiniband.bth.destqp != $SQPN && infiniband.bth.opcode && !icmp")
if [ "$got" = "$want" ]; then
  pass "tshark decodes the replayed trace at h2 as RoCE: BTH opcodes $got"
else
  fail "tshark at h2: BTH opcodes $got, sent $want"
fi
got=$(decode "$WORK/h2.pcap" "infiniband.bth.destqp == $SQPN && infiniband.bth.opcode == 0x04 && !icmp")
if [ "$got" = "4 x$CE_N ($CE_N)" ]; then
  pass "tshark decodes the CE trace at h2: BTH opcodes $got"
else
  fail "tshark at h2, CE trace: BTH opcodes $got, expected 4 x$CE_N ($CE_N)"
fi
ecn_names=([2]="ECT(0): CE cleared" [3]="CE kept")
if out=$("${LAB_PY[@]}" ecn "$WORK/h2.pcap" --src "$H1_IP" --dst "$H2_IP" --dqpn "$SQPN" --count "$CE_N" --ecn "$EXP_ECN" 2>&1); then
  pass "ECN at h2 (${ecn_names[$EXP_ECN]}, pipeline $CFG_PIPELINE): $out"
else
  fail "ECN at h2 (pipeline $CFG_PIPELINE): $out"
fi
# CNPs. Baseline: none. THEMIS: PNP sends at most one CNP per QP per cnp_interval_ns, so a CE
# packet that reaches the switch within the interval after one that made a CNP is suppressed: the
# paced frames can still arrive bunched up when the machine is busy (seen once: two of them 6 us
# apart at h2, 31 CNPs and 1 suppression). So: every CE packet made a CNP or was suppressed, at
# least one CNP was made, and every CNP longhaul counts as sent arrived at h1, valid.
EXP_CNPS=0
if [ "$CFG_PIPELINE" = themis ]; then
  read -r GEN SUP SENT < <("${LAB_PY[@]}" counter "$WORK/stats0.json" "$WORK/stats1.json" \
    themis.pnp.generated themis.pnp.suppressed themis.cnps_sent | paste -sd' ')
  if [ $((GEN + SUP)) = "$CE_N" ] && [ "$GEN" -ge 1 ] && [ "$SENT" = "$GEN" ]; then
    pass "PNP accounted for every CE packet: $GEN CNPs generated + $SUP suppressed within cnp_interval_ns = $CE_N (themis.cnps_sent $SENT)"
  else
    fail "PNP: themis.pnp.generated $GEN + suppressed $SUP, expected $CE_N in all and at least 1 generated; themis.cnps_sent $SENT"
  fi
  EXP_CNPS=$SENT
fi
# At h1: tshark's count (BTH opcode 0x81 = 129) and lab_check.py's field and ICRC checks.
got=$(decode "$WORK/h1.pcap" "infiniband.bth.opcode == 0x81 && !icmp")
want="none (0)"
[ "$EXP_CNPS" = 0 ] || want="129 x$EXP_CNPS ($EXP_CNPS)"
if out=$("${LAB_PY[@]}" cnps "$WORK/h1.pcap" --count "$EXP_CNPS" --dqpn "$CQPN" --src "$H2_IP" --dst "$H1_IP" \
  --eth-src "$CFG_H1_PORT_MAC" --eth-dst "$H1_MAC" 2>&1) && [ "$got" = "$want" ]; then
  pass "CNPs at h1 (pipeline $CFG_PIPELINE): $out; tshark BTH opcodes: $got"
else
  fail "CNPs at h1 (pipeline $CFG_PIPELINE): $out; tshark BTH opcodes: $got, expected: $want"
fi

# ---- longhaul's counters ------------------------------------------------------------------------

step "longhaul counters (ctl stats)"
stats=$("${LAB_PY[@]}" stats "$WORK/stats0.json" "$WORK/stats1.json")
sed '/=/d' <<<"$stats"
TX_H1=$(sed -n "s/^TX_$CFG_H1_PORT=//p" <<<"$stats")
TX_H2=$(sed -n "s/^TX_$CFG_H2_PORT=//p" <<<"$stats")
DROPS=$(sed -n 's/^DROPS=//p' <<<"$stats")
ERRORS=$(sed -n 's/^ERRORS=//p' <<<"$stats")
if [ "$TX_H1" = "$CAP_H1" ] && [ "$TX_H2" = "$CAP_H2" ]; then
  pass "longhaul's tx counters match the captures: $CFG_H1_PORT sent $TX_H1 = h1 received $CAP_H1, $CFG_H2_PORT sent $TX_H2 = h2 received $CAP_H2"
else
  fail "longhaul's tx counters vs captures: $CFG_H1_PORT sent $TX_H1, h1 received $CAP_H1; $CFG_H2_PORT sent $TX_H2, h2 received $CAP_H2"
fi
if [ "$DROPS" = 0 ] && [ "$ERRORS" = 0 ]; then
  pass "no drops, no rx/tx errors in longhaul's counters"
else
  fail "longhaul counted $DROPS drops and $ERRORS rx/tx errors (above)"
fi

# ---- stop -----------------------------------------------------------------------------------------

if [ "$KEEP" = 1 ]; then
  echo "== --keep: longhaul left running (pid $LH_PID); the stop is not checked"
else
  step "stop longhaul (SIGINT)"
  kill -INT "$LH_PID"
  stopped=0
  for _ in $(seq 100); do
    kill -0 "$LH_PID" 2>/dev/null || { stopped=1; break; }
    sleep 0.1
  done
  if [ "$stopped" = 1 ]; then
    lh_rc=0
    wait "$LH_PID" || lh_rc=$?
    LH_PID=
    if [ "$lh_rc" = 0 ] && grep -q "^port\.$CFG_H1_PORT\.rx_pkts " "$WORK/longhaul.out"; then
      pass "longhaul stopped on SIGINT: exit 0, final counters printed ($(wc -l <"$WORK/longhaul.out") lines)"
    else
      tail -n 5 "$WORK/longhaul.err" | sed 's/^/  longhaul: /'
      fail "longhaul exited with status $lh_rc on SIGINT"
    fi
  else
    fail "longhaul still running 10 s after SIGINT"
  fi
fi

echo "== $NPASS passed, $NFAIL failed ($((SECONDS - T_START)) s; config $CONFIG)"
if [ "$NFAIL" -gt 0 ]; then exit 1; fi
