#!/usr/bin/env bash
# Every VM of the lab (vagrant/Vagrantfile): DPDK from Debian, 2 MiB hugepages now and at every
# boot, and vfio-pci allowed without an IOMMU (a VM's virtio NICs have none). Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

pages="${LH_HUGEPAGES:-512}"
[[ "$pages" =~ ^[0-9]+$ ]] || { echo "common.sh: LH_HUGEPAGES='$pages' is not a number" >&2; exit 1; }

apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  dpdk dpdk-dev libdpdk-dev pkg-config python3 pciutils kmod ca-certificates curl \
  tcpdump tshark >/dev/null

# Hugepages: now, and from sysctl at boot (before memory fragments).
echo "vm.nr_hugepages = $pages" > /etc/sysctl.d/80-longhaul-lab-hugepages.conf
sysctl -q -p /etc/sysctl.d/80-longhaul-lab-hugepages.conf
got=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
if (( got < pages )); then
  echo "common.sh: asked for $pages hugepages, got $got (give the VM more memory)" >&2
  exit 1
fi
mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages

# vfio-pci in no-IOMMU mode (tainting the kernel, as it says), loaded at boot; uio_pci_generic
# is the fallback bind.sh uses when vfio-pci refuses a device.
echo "options vfio enable_unsafe_noiommu_mode=1" > /etc/modprobe.d/longhaul-lab-vfio.conf
printf 'vfio-pci\nuio_pci_generic\n' > /etc/modules-load.d/longhaul-lab.conf
modprobe vfio enable_unsafe_noiommu_mode=1 || true
if [[ -w /sys/module/vfio/parameters/enable_unsafe_noiommu_mode ]]; then
  echo 1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode
fi
modprobe vfio-pci || true
modprobe uio_pci_generic || true
echo "common.sh: DPDK $(pkg-config --modversion libdpdk), $got hugepages of 2 MiB"
