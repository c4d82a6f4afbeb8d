"""Minimal classic-pcap reader/writer for the oracles and the fixture generator.

Independent of the Rust code (DESIGN.md section 6). Reads microsecond and nanosecond pcaps in
either byte order and returns integer nanosecond timestamps (no float rounding); writes
little-endian nanosecond pcaps with snaplen 262144 and link type 1 (Ethernet), byte-for-byte
deterministic.
"""
import struct

MAGIC_USEC = 0xA1B2C3D4
MAGIC_NSEC = 0xA1B23C4D
SNAPLEN = 262144


class PcapError(Exception):
    pass


def read_pcap(path):
    """Return a list of (ts_ns, frame_bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise PcapError(f"{path}: too short for a pcap header ({len(data)} bytes)")
    for endian in ("<", ">"):
        (magic,) = struct.unpack(endian + "I", data[:4])
        if magic in (MAGIC_USEC, MAGIC_NSEC):
            break
    else:
        raise PcapError(f"{path}: bad pcap magic {data[:4].hex()}")
    nano = magic == MAGIC_NSEC
    _vmaj, _vmin, _tz, _sig, _snap, linktype = struct.unpack(endian + "HHiIII", data[4:24])
    if linktype != 1:
        raise PcapError(f"{path}: link type {linktype}, expected 1 (Ethernet)")
    out = []
    off = 24
    idx = 0
    while off < len(data):
        if off + 16 > len(data):
            raise PcapError(f"{path}: record #{idx} at offset {off}: truncated header")
        sec, frac, caplen, _origlen = struct.unpack(endian + "IIII", data[off:off + 16])
        if off + 16 + caplen > len(data):
            raise PcapError(f"{path}: record #{idx} at offset {off}: truncated data")
        ts = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        out.append((ts, data[off + 16:off + 16 + caplen]))
        off += 16 + caplen
        idx += 1
    return out


def write_pcap(path, records):
    """records: iterable of (ts_ns, frame_bytes). Writes a little-endian nanosecond pcap."""
    parts = [struct.pack("<IHHiIII", MAGIC_NSEC, 2, 4, 0, 0, SNAPLEN, 1)]
    for ts, frame in records:
        frame = bytes(frame)
        parts.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000,
                                 len(frame), len(frame)))
        parts.append(frame)
    with open(path, "wb") as f:
        f.write(b"".join(parts))
