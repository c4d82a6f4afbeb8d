#!/usr/bin/env bash
# Prepare the machine for longhaul on DPDK NICs (run by deploy/longhaul.service before start):
# reserve hugepages and bind the NICs to vfio-pci. Idempotent; every failure says what to fix.
# Reads LONGHAUL_NICS, LONGHAUL_HUGEPAGES and LONGHAUL_NUMA_NODE (deploy/longhaul.env).
set -euo pipefail

die() {
  echo "longhaul prepare: $*" >&2
  exit 1
}

pages="${LONGHAUL_HUGEPAGES:-1024}"
node="${LONGHAUL_NUMA_NODE:-}"
nics="${LONGHAUL_NICS:-}"

[[ "$pages" =~ ^[0-9]+$ ]] || die "LONGHAUL_HUGEPAGES='$pages' is not a number"
if [[ -n "$node" ]]; then
  hp="/sys/devices/system/node/node$node/hugepages/hugepages-2048kB/nr_hugepages"
else
  hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
fi
[[ -w "$hp" ]] || die "$hp is not writable (not root, or no 2 MiB hugepage support)"
if (( $(cat "$hp") < pages )); then
  echo "$pages" > "$hp"
fi
got=$(cat "$hp")
(( got >= pages )) || die "asked for $pages hugepages in $hp, the kernel gave $got (memory fragmented: reserve them at boot with hugepages=$pages)"
mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages \
  || die "cannot mount hugetlbfs on /dev/hugepages"

[[ -n "$nics" ]] || die "LONGHAUL_NICS is empty: name the PCI addresses longhaul drives"
modprobe vfio-pci || die "cannot load vfio-pci (IOMMU off? then enable_unsafe_noiommu_mode, docs/deploy.md)"
devbind=$(command -v dpdk-devbind.py || command -v dpdk-devbind || true)
[[ -n "$devbind" ]] || die "dpdk-devbind.py not found (apt-get install dpdk)"
for nic in $nics; do
  [[ -e "/sys/bus/pci/devices/$nic" ]] || die "no PCI device $nic (lspci -D lists them)"
  drv=$(basename "$(readlink -f "/sys/bus/pci/devices/$nic/driver" 2>/dev/null || echo none)")
  # Already on a DPDK driver (vfio-pci, or uio_pci_generic / igb_uio where vfio cannot be
  # used, e.g. the VM lab's fallback): leave it.
  if [[ "$drv" != vfio-pci && "$drv" != uio_pci_generic && "$drv" != igb_uio ]]; then
    "$devbind" --bind=vfio-pci "$nic" || die "cannot bind $nic (driver $drv) to vfio-pci; is it in use (ip link)?"
  fi
done
echo "longhaul prepare: $got hugepages of 2 MiB, NICs on a DPDK driver: $nics"
