#!/usr/bin/env bash
# Slot timer jitter of Bifrost on a busy live worker (T = 10 us): configs/bifrost-dci.toml with
# wan0 reading a 64-flow class-3 trace looped unpaced (scapy) and dc0 writing to /dev/null; runs
# `longhaul run` for SECONDS (default 12) and prints the slot lateness counters. Env: LONGHAUL
# (the binary; default: cargo build --profile dist and target/dist/longhaul).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-12}
D=$(mktemp -d)
python3 - "$D" <<'PY'
import sys
sys.path.insert(0, "pcap-tests/oracle")
from pcaputil import write_pcap
from scapy.layers.l2 import Ether
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.contrib.roce import BTH
recs = []
for k in range(2048):
    f = k % 64
    p = (Ether(src="02:00:00:00:20:01", dst="02:00:00:00:00:03")
         / IP(src=f"10.1.0.{f+1}", dst=f"10.0.0.{f+1}", tos=(26 << 2) | 2, flags="DF")
         / UDP(sport=49152 + f, dport=4791, chksum=0) / BTH(opcode=7, dqpn=0x100 + f, psn=k)
         / Raw(bytes(1024)))
    recs.append((k * 100, bytes(p)))
write_pcap(sys.argv[1] + "/wan-in.pcap", recs)
PY
sed -e "s|^name = \"wan0\"|name = \"wan0\"\nio = { kind = \"pcap\", rx = \"$D/wan-in.pcap\", rx_loop = true, pace = false }|" \
    -e 's|^name = "dc0"|name = "dc0"\nio = { kind = "pcap", tx = "/dev/null" }|' \
    configs/bifrost-dci.toml > "$D/live.toml"
printf '\n[control]\napi_listen = "127.0.0.1:19510"\nmetrics_listen = "off"\n' >> "$D/live.toml"
if [ -z "${LONGHAUL:-}" ]; then
  cargo build -q --profile dist
  LONGHAUL=target/dist/longhaul
fi
timeout -s INT "$SECONDS_TO_RUN" "$LONGHAUL" run --config "$D/live.toml" > "$D/out.txt" 2>&1 || true
grep -E "bifrost|port\.wan0\.rx_pkts" "$D/out.txt"
rm -rf "$D"
