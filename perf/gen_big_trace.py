#!/usr/bin/env python3
"""Write a large RoCE trace for replay benchmarks: examples/roce-64flows.pcap repeated N times.

    python3 perf/gen_big_trace.py OUT.pcap FRAMES [GAP_NS]

Frames are GAP_NS apart (default 30 ns: 314-byte frames at 100 Gb/s take 27.0 ns on the wire, so
the egress queue stays short). Standard library only; written as it goes (no memory growth).
"""
import struct
import sys

HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        assert magic in (0xA1B2C3D4, 0xA1B23C4D), "little-endian pcap expected"
        out = []
        while True:
            h = f.read(16)
            if len(h) < 16:
                return out
            caplen = struct.unpack("<I", h[8:12])[0]
            out.append(f.read(caplen))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    gap = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    src = frames(f"{HERE}/../examples/roce-64flows.pcap")
    t = 1_700_000_000 * 1_000_000_000
    with open(out, "wb", buffering=1 << 22) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for i in range(n):
            d = src[i % len(src)]
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(d), len(d)))
            f.write(d)
            t += gap


if __name__ == "__main__":
    main()
