#!/usr/bin/env bash
# Builds the pinned Pktgen-DPDK (tag pktgen-23.06.1, commit 1e93fa88, the newest that builds
# against DPDK 22.11) from its source tarball, with Lua, in a scratch folder, applying the two
# fixes it needs on Debian 12 (with sed; nothing of Pktgen is kept in this repository):
#   1. lib/lua/meson.build lacks the dpdk dependency (rte_version.h: No such file);
#   2. Pktgen panics when rte_eth_dev_set_mtu returns -ENOTSUP (memif): treated as a warning.
# Used by CI (.ci/run via perf/pktgen/real.sh) and by the VM lab (vagrant/provision/gen.sh).
#
#   perf/pktgen/build-pktgen.sh TARBALL BUILD_DIR
#
# Needs meson, ninja-build, pkg-config, git, libdpdk-dev, liblua5.3-dev, libpcap-dev, libnuma-dev.
# Leaves BUILD_DIR/src (patched source) and BUILD_DIR/src/build/app/pktgen; prints the binary's
# path last. Skips the build when BUILD_DIR already holds this commit's binary.
set -euo pipefail
commit=1e93fa88916b8f2c27b612d761a03cbf03d046de
version=23.06.1
die() { echo "build-pktgen.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: build-pktgen.sh TARBALL BUILD_DIR"
tarball=$1
[ -f "$tarball" ] || die "$tarball: no such file"
# Absolute: the build runs meson from inside the source folder.
mkdir -p "$2"
dir=$(cd "$2" && pwd)
for t in meson ninja pkg-config cc git; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found (apt-get install meson ninja-build pkg-config build-essential git)"
done
pkg-config --exists libdpdk || die "libdpdk not found by pkg-config (apt-get install libdpdk-dev)"
pkg-config --exists lua5.3 || die "lua5.3 not found by pkg-config (apt-get install liblua5.3-dev)"
for h in pcap/pcap.h numa.h; do
  echo "#include <$h>" | cc -E -x c - >/dev/null 2>&1 || die "$h not found (apt-get install libpcap-dev libnuma-dev)"
done

# The commit git archive recorded (GitHub's tag tarballs carry it too).
got=$(gzip -dc "$tarball" | git get-tar-commit-id 2>/dev/null || true)
[ "$got" = "$commit" ] || die "$tarball is commit '${got:-none recorded}', not Pktgen-DPDK pktgen-$version ($commit)"

src=$dir/src
bin=$src/build/app/pktgen
if [ -x "$bin" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$commit" ]; then
  echo "$bin"
  exit 0
fi
rm -rf "$src" "$dir/stamp"
mkdir -p "$src"
tar -xzf "$tarball" -C "$src" --strip-components=1
[ "$(cat "$src/VERSION")" = "$version" ] || die "$tarball: VERSION is $(cat "$src/VERSION"), not $version"

# Fix 1: lib/lua links DPDK's headers through its own dependency list.
sed -i 's/dependencies: \[common, utils, vec, lua_dep\]/dependencies: [common, utils, vec, lua_dep, dpdk]/' \
  "$src/lib/lua/meson.build"
grep -q 'lua_dep, dpdk\]' "$src/lib/lua/meson.build" || die "fix 1 (lib/lua/meson.build) did not apply"
# Fix 2: a port that cannot set its MTU (memif: -ENOTSUP) keeps the one it has.
sed -i 's/if ((ret = rte_eth_dev_set_mtu(pid, pktgen.eth_mtu)) < 0)$/if ((ret = rte_eth_dev_set_mtu(pid, pktgen.eth_mtu)) < 0 \&\& ret != -ENOTSUP)/' \
  "$src/app/pktgen-port-cfg.c"
grep -q 'ret != -ENOTSUP)' "$src/app/pktgen-port-cfg.c" || die "fix 2 (app/pktgen-port-cfg.c) did not apply"

echo "build-pktgen.sh: building Pktgen-DPDK $version in $src/build" >&2
(cd "$src" && meson setup build -Denable_lua=true --buildtype=release >"$dir/meson.log" 2>&1) \
  || { tail -n 20 "$dir/meson.log" >&2; die "meson setup failed (log: $dir/meson.log)"; }
ninja -C "$src/build" >"$dir/ninja.log" 2>&1 \
  || { grep -m 5 -B 2 -A 5 'error' "$dir/ninja.log" >&2 || tail -n 20 "$dir/ninja.log" >&2; die "build failed (log: $dir/ninja.log)"; }
[ -x "$bin" ] || die "no $bin after the build"
echo "$commit" >"$dir/stamp"
echo "$bin"
