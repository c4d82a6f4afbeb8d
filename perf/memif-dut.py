#!/usr/bin/env python3
"""A longhaul config rewritten for a memif test on one machine (perf/rfc2544.sh, perf/pktgen/real.sh).

  perf/memif-dut.py SRC DST IN_PORT OUT_PORT SOCK_A SOCK_B FILE_PREFIX

IN_PORT and OUT_PORT on memif clients (net_memif0 on SOCK_A, net_memif1 on SOCK_B), every other
port without I/O (null), the API on an ephemeral port, EAL on lcores 0,1 without hugepages.
Writes DST and prints IN_PORT's MAC.
"""
import re, sys, tomllib
src, dst, inp, outp, sa, sb, prefix = sys.argv[1:]
text = open(src).read()
cfg = tomllib.loads(text)
# Drop [dpdk] and [control] (re-added below) and every port's io line.
out, skip = [], False
for line in text.splitlines():
    s = line.strip()
    if s.startswith("[") and not s.startswith("[["):
        skip = s in ("[dpdk]", "[control]")
    elif s.startswith("[["):
        skip = False
    if skip or re.match(r"\s*io\s*=", line):
        continue
    out.append(line)
text = "\n".join(out) + "\n"
blocks = text.split("[[ports]]")
mac = None
for i, b in enumerate(blocks[1:], 1):
    m = re.search(r'^name\s*=\s*"([^"]+)"', b, re.M)
    if not m:
        continue
    dev = {inp: "net_memif0", outp: "net_memif1"}.get(m.group(1))
    if dev:
        blocks[i] = "\n" + f'io = {{ kind = "dpdk", device = "{dev}" }}\n' + b.lstrip("\n")
    if m.group(1) == inp:
        mac = re.search(r'^mac\s*=\s*"([^"]+)"', b, re.M).group(1)
text = "[[ports]]".join(blocks)
c = cfg.get("control", {})
text += '\n[control]\napi_listen = "127.0.0.1:0"\nmetrics_listen = "off"\n'
for k in ("reload_dirs", "stats_interval_ms"):
    if k in c:
        text += f"{k} = {c[k]!r}\n".replace("'", '"')
text += f'''
[dpdk]
eal_args = ["-l", "0,1", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
  "--file-prefix={prefix}-dut",
  "--vdev=net_memif0,role=client,id=0,rsize=14,socket={sa}",
  "--vdev=net_memif1,role=client,id=1,rsize=14,socket={sb}"]
mbufs = 16383
'''
open(dst, "w").write(text)
print(mac)
