#!/usr/bin/env bash
# The longhaul VM: build longhaul (dist profile: fat LTO, DPDK ports) from the synced repository, install it
# with the deployment kit (deploy/: systemd unit, prepare.sh, environment file; docs/deploy.md)
# and vagrant/longhaul-vm.toml with the lab NICs' PCI addresses, and start it. Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends build-essential clang libclang-dev git >/dev/null

# Rust from rustup (Debian 12's rustc is older than the workspace's rust-version).
if ! command -v cargo >/dev/null && [[ ! -x /root/.cargo/bin/cargo ]]; then
  curl -fsSL https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
fi
export PATH=/root/.cargo/bin:$PATH

# Build outside the synced folder (rsync would delete target/ on the next `vagrant rsync`).
export CARGO_TARGET_DIR=/var/cache/longhaul-target
cd /longhaul
cargo build --profile dist --locked --features dpdk
install -m 0755 "$CARGO_TARGET_DIR/dist/longhaul" /usr/local/bin/longhaul
/usr/local/bin/longhaul --version

mapfile -t nics < /etc/longhaul-lab/nics
(( ${#nics[@]} == 2 )) || { echo "dut.sh: /etc/longhaul-lab/nics must list 2 NICs (bind.sh)" >&2; exit 1; }
install -d -m 0755 /etc/longhaul /usr/local/lib/longhaul
install -m 0755 deploy/prepare.sh /usr/local/lib/longhaul/prepare.sh
install -m 0644 deploy/longhaul.service /etc/systemd/system/longhaul.service
sed -e "s/@DC0_PCI@/${nics[0]}/g" -e "s/@WAN0_PCI@/${nics[1]}/g" \
  vagrant/longhaul-vm.toml > /etc/longhaul/longhaul.toml
# The lab's environment: a fresh token, the two NICs; hugepages are already reserved by
# common.sh (prepare.sh checks), vCPUs 2-3 for longhaul (the unit's CPUAffinity).
if [[ ! -f /etc/longhaul/longhaul.env ]]; then
  token=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')
  sed -e "s|^LONGHAUL_API_TOKEN=.*|LONGHAUL_API_TOKEN=$token|" \
      -e "s|^LONGHAUL_NICS=.*|LONGHAUL_NICS=\"${nics[*]}\"|" \
      -e "s|^LONGHAUL_HUGEPAGES=.*|LONGHAUL_HUGEPAGES=${LH_HUGEPAGES:-512}|" \
      -e "s|^LONGHAUL_NUMA_NODE=.*|LONGHAUL_NUMA_NODE=|" \
      deploy/longhaul.env > /etc/longhaul/longhaul.env
  chmod 0600 /etc/longhaul/longhaul.env
fi
longhaul check-config /etc/longhaul/longhaul.toml
systemctl daemon-reload
systemctl enable -q longhaul.service
systemctl restart longhaul.service
sleep 3
systemctl is-active --quiet longhaul.service \
  || { journalctl -u longhaul -n 30 --no-pager >&2; echo "dut.sh: longhaul did not start" >&2; exit 1; }
echo "dut.sh: longhaul running on ${nics[*]} (journalctl -u longhaul; longhaul ctl stats)"
