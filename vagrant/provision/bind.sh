#!/usr/bin/env bash
# Bind the lab's data NICs (named by MAC, in order: bind.sh MAC [MAC ...]) to a DPDK driver and
# write their PCI addresses, in the same order, to /etc/longhaul-lab/nics (one per line). The
# other provisioning scripts and the benchmarks read that file. Also installs itself as a boot
# service (longhaul-lab-bind), since a bind does not survive a reboot. Idempotent.
set -euo pipefail
(( $# > 0 )) || { echo "bind.sh: give the MACs of the NICs to bind" >&2; exit 1; }
state=/etc/longhaul-lab
mkdir -p "$state"
devbind=$(command -v dpdk-devbind.py || command -v dpdk-devbind || true)
[[ -n "$devbind" ]] || { echo "bind.sh: dpdk-devbind.py not found (apt-get install dpdk)" >&2; exit 1; }

pci_of_mac() {
  local want=${1,,} dev
  # Still on the kernel driver: the interface's MAC.
  for dev in /sys/class/net/*; do
    if [[ "$(cat "$dev/address" 2>/dev/null)" == "$want" && -e "$dev/device" ]]; then
      dev=$(readlink -f "$dev/device")
      # A virtio NIC's device is virtioN under the PCI function.
      [[ "$(basename "$dev")" == virtio* ]] && dev=$(dirname "$dev")
      basename "$dev"
      return 0
    fi
  done
  # Already bound to DPDK on an earlier run: the address recorded then.
  if [[ -f "$state/macs" ]]; then
    awk -v m="$want" '$1 == m { print $2; found = 1 } END { exit !found }' "$state/macs" && return 0
  fi
  return 1
}

: > "$state/nics.new"
touch "$state/macs"
for mac in "$@"; do
  pci=$(pci_of_mac "$mac") || { echo "bind.sh: no NIC with MAC $mac (ip link; the Vagrantfile sets them)" >&2; exit 1; }
  grep -q "^${mac,,} " "$state/macs" || echo "${mac,,} $pci" >> "$state/macs"
  drv=$(basename "$(readlink -f "/sys/bus/pci/devices/$pci/driver" 2>/dev/null || echo none)")
  if [[ "$drv" != vfio-pci && "$drv" != uio_pci_generic ]]; then
    for dev in /sys/class/net/*; do
      if [[ "$(cat "$dev/address" 2>/dev/null)" == "${mac,,}" ]]; then
        ip link set "$(basename "$dev")" down 2>/dev/null || true
      fi
    done
    if ! "$devbind" --bind=vfio-pci "$pci" 2>/dev/null; then
      "$devbind" --bind=uio_pci_generic "$pci" \
        || { echo "bind.sh: $pci ($mac) binds to neither vfio-pci nor uio_pci_generic" >&2; exit 1; }
    fi
    drv=$(basename "$(readlink -f "/sys/bus/pci/devices/$pci/driver")")
  fi
  echo "$pci" >> "$state/nics.new"
  echo "bind.sh: $mac = $pci on $drv"
done
mv "$state/nics.new" "$state/nics"

# Again at every boot, before the lab's services start.
install -m 0755 "$0" /usr/local/sbin/longhaul-lab-bind
cat > /etc/systemd/system/longhaul-lab-bind.service <<UNIT
[Unit]
Description=Bind the longhaul lab's data NICs to DPDK
After=systemd-modules-load.service
Before=longhaul.service longhaul-lab-sink.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/longhaul-lab-bind $*

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable -q longhaul-lab-bind.service
