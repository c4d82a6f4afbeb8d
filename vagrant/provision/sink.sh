#!/usr/bin/env bash
# The sink VM: dpdk-testpmd in io forwarding between its two lab NICs (what longhaul sends to
# port 0 goes back to the generator on port 1), as a systemd service. Idempotent.
set -euo pipefail
mapfile -t nics < /etc/longhaul-lab/nics
(( ${#nics[@]} == 2 )) || { echo "sink.sh: /etc/longhaul-lab/nics must list 2 NICs (bind.sh)" >&2; exit 1; }
cat > /etc/systemd/system/longhaul-lab-sink.service <<UNIT
[Unit]
Description=longhaul lab sink: dpdk-testpmd io forwarding ${nics[0]} -> ${nics[1]}
After=longhaul-lab-bind.service
Requires=longhaul-lab-bind.service

[Service]
# Cores 1-2: the main lcore and one forwarding lcore; no interactive prompt, statistics to the
# journal every 10 s.
ExecStart=/usr/bin/dpdk-testpmd -l 1-2 -n 2 --file-prefix sink -a ${nics[0]} -a ${nics[1]} -- \
  --forward-mode=io --port-topology=paired --auto-start --stats-period 10 \
  --rxd=2048 --txd=2048 --burst=64
Restart=on-failure
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable -q longhaul-lab-sink.service
systemctl restart longhaul-lab-sink.service
sleep 3
systemctl is-active --quiet longhaul-lab-sink.service \
  || { journalctl -u longhaul-lab-sink -n 30 --no-pager >&2; echo "sink.sh: testpmd did not start" >&2; exit 1; }
echo "sink.sh: testpmd forwarding ${nics[0]} -> ${nics[1]} (journalctl -u longhaul-lab-sink)"
