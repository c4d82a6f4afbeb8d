//! Classic pcap files (libpcap format), pure Rust, no dependencies.
//!
//! Reading accepts microsecond (`0xa1b2c3d4`) and nanosecond (`0xa1b23c4d`) files in either byte
//! order, link type Ethernet (1) only. Timestamps are converted to nanoseconds. A record whose
//! captured length is below its original length (a truncated capture) is accepted and keeps the
//! captured bytes. A file that ends inside a record, or a record claiming more than
//! [`MAX_CAPLEN`] bytes, is an error naming the record index and its byte offset in the file;
//! no input, however malformed, panics the reader.
//!
//! Writing always produces a little-endian nanosecond pcap with snaplen [`SNAPLEN`] and link type 1,
//! so replay output keeps full timestamp precision (Wireshark and tshark read it natively).
//!
//! [`PcapReader`] streams records from any `Read` (large inputs need not fit in memory);
//! [`read_pcap`] / [`read_pcap_from`] collect them. [`PcapWriter`] streams to any `Write`;
//! [`write_pcap`] / [`write_pcap_to`] write a slice.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp, ns since the Unix epoch (or the trace's epoch).
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// Magic of a microsecond-resolution pcap, as written in the writer's byte order.
pub const MAGIC_USEC: u32 = 0xa1b2_c3d4;
/// Magic of a nanosecond-resolution pcap.
pub const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snapshot length written into files we produce.
pub const SNAPLEN: u32 = 262_144;
/// Largest captured length the reader accepts (256 KiB); anything above is treated as corruption.
pub const MAX_CAPLEN: u32 = 262_144;

/// Bytes of the pcap global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;
const NS_PER_SEC: u64 = 1_000_000_000;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn truncated(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, msg)
}

/// Fill `buf` as far as the reader allows; returns how many bytes were read (less than
/// `buf.len()` only at end of input).
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The parsed global header of a pcap file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapHeader {
    /// Fields are big-endian in the file.
    pub big_endian: bool,
    /// Timestamps' fractional part is in nanoseconds (else microseconds).
    pub nanosecond: bool,
    pub version_major: u16,
    pub version_minor: u16,
    pub snaplen: u32,
    pub linktype: u32,
}

/// Streaming pcap reader: an iterator of records.
///
/// After the first error the iterator is exhausted (returns `None`).
pub struct PcapReader<R: Read> {
    inner: R,
    header: PcapHeader,
    /// Index of the next record (0-based).
    index: u64,
    /// Byte offset of the next record header in the file.
    offset: u64,
    done: bool,
    /// [`PcapReader::peek_record`]'s record: (timestamp, captured length), its header consumed.
    pending: Option<(u64, u32)>,
    /// Bytes of the frame [`PcapReader::take_frame`] last returned from the reader's own buffer, to be
    /// consumed at the next call.
    consume: usize,
    /// A frame that did not lie whole in the reader's buffer, copied out.
    scratch: Vec<u8>,
}

impl<R: Read> PcapReader<R> {
    /// Read and check the global header.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        let got = read_full(&mut inner, &mut h)?;
        if got < 4 {
            return Err(truncated(format!(
                "not a pcap file: {got} bytes, too short for the magic number"
            )));
        }
        let magic_le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let magic_be = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let (big_endian, nanosecond) = match (magic_le, magic_be) {
            (MAGIC_USEC, _) => (false, false),
            (MAGIC_NSEC, _) => (false, true),
            (_, MAGIC_USEC) => (true, false),
            (_, MAGIC_NSEC) => (true, true),
            (_, 0x0a0d_0d0a) => {
                return Err(invalid(
                    "pcapng files are not supported; convert with `editcap -F pcap in.pcapng out.pcap`"
                        .into(),
                ))
            }
            (0xa1b2_cd34, _) | (_, 0xa1b2_cd34) => {
                return Err(invalid(
                    "modified (Kuznetzov) pcap format is not supported; convert with `editcap -F pcap`"
                        .into(),
                ))
            }
            _ => {
                return Err(invalid(format!(
                    "not a pcap file: bad magic number 0x{magic_be:08x} (expected a1b2c3d4 or a1b23c4d in either byte order)"
                )))
            }
        };
        if got < GLOBAL_HEADER_LEN {
            return Err(truncated(format!(
                "truncated pcap global header: {got} of {GLOBAL_HEADER_LEN} bytes"
            )));
        }
        let u16_at = |i: usize| {
            let b = [h[i], h[i + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let header = PcapHeader {
            big_endian,
            nanosecond,
            version_major: u16_at(4),
            version_minor: u16_at(6),
            snaplen: u32_at(16),
            linktype: u32_at(20),
        };
        if header.version_major != 2 {
            return Err(invalid(format!(
                "unsupported pcap version {}.{} (expected 2.x)",
                header.version_major, header.version_minor
            )));
        }
        if header.linktype != LINKTYPE_ETHERNET {
            return Err(invalid(format!(
                "unsupported pcap link type {} (only LINKTYPE_ETHERNET = 1 is supported)",
                header.linktype
            )));
        }
        Ok(PcapReader {
            inner,
            header,
            index: 0,
            offset: GLOBAL_HEADER_LEN as u64,
            done: false,
            pending: None,
            consume: 0,
            scratch: Vec::new(),
        })
    }

    /// The file's global header.
    pub fn header(&self) -> &PcapHeader {
        &self.header
    }

    /// Read the next record; `Ok(None)` at a clean end of file.
    pub fn next_record(&mut self) -> io::Result<Option<PcapRecord>> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_record();
        match &r {
            Ok(Some(_)) => {}
            _ => self.done = true,
        }
        r
    }

    /// Read the next record's frame into `buf` (its old contents replaced; its capacity reused,
    /// so a replay reads a whole file with one allocation per input); its timestamp (ns), or
    /// `Ok(None)` at a clean end of file. Errors as [`PcapReader::next_record`].
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_into(buf);
        match &r {
            Ok(Some(_)) => {}
            _ => self.done = true,
        }
        r
    }

    fn read_record(&mut self) -> io::Result<Option<PcapRecord>> {
        let mut data = Vec::new();
        Ok(self
            .read_into(&mut data)?
            .map(|ts_ns| PcapRecord { ts_ns, data }))
    }

    /// A record header's timestamp (ns) and captured length, the length checked against
    /// [`MAX_CAPLEN`]. The record is `self.index`, at `self.offset` (for the error).
    fn record_header(&self, h: &[u8; RECORD_HEADER_LEN]) -> io::Result<(u64, u32)> {
        let be = self.header.big_endian;
        let u32_at = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (sec, frac, caplen, _origlen) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
        if caplen > MAX_CAPLEN {
            let (idx, off) = (self.index, self.offset);
            return Err(invalid(format!(
                "pcap record #{idx} at byte offset {off}: captured length {caplen} exceeds the {MAX_CAPLEN}-byte limit (corrupt file?)"
            )));
        }
        let frac_ns = if self.header.nanosecond {
            frac as u64
        } else {
            frac as u64 * 1_000
        };
        // sec < 2^32 so sec * 1e9 < 4.3e18 fits; frac is at most 4.3e12 (µs garbage): no overflow.
        Ok((sec as u64 * NS_PER_SEC + frac_ns, caplen))
    }

    fn read_into(&mut self, data: &mut Vec<u8>) -> io::Result<Option<u64>> {
        let (idx, off) = (self.index, self.offset);
        let mut h = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut h)?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER_LEN {
            return Err(truncated(format!(
                "pcap record #{idx} at byte offset {off}: truncated record header ({got} of {RECORD_HEADER_LEN} bytes)"
            )));
        }
        let (ts_ns, caplen) = self.record_header(&h)?;
        // Sized without zeroing what the read overwrites anyway (frames of one size, the usual
        // trace, never touch the allocator or memset).
        if data.len() > caplen as usize {
            data.truncate(caplen as usize);
        } else {
            data.resize(caplen as usize, 0);
        }
        let got = read_full(&mut self.inner, data)?;
        if got < data.len() {
            return Err(truncated(format!(
                "pcap record #{idx} at byte offset {off}: truncated record data ({got} of {caplen} bytes)"
            )));
        }
        self.index += 1;
        self.offset += (RECORD_HEADER_LEN + caplen as usize) as u64;
        Ok(Some(ts_ns))
    }
}

/// Streaming without copies, for readers with their own buffer (`BufReader`, a byte slice): the
/// replay's input path. [`PcapReader::peek_record`] reads a record's header only (so several inputs can
/// be merged by timestamp); [`PcapReader::take_frame`] hands out its frame straight from the reader's
/// buffer when it lies there whole (with a 1 MiB `BufReader`, all but one frame per megabyte), and
/// copies it out otherwise. Do not mix with [`PcapReader::next_record`] / `next_into` on one
/// reader. Errors as [`PcapReader::next_record`]; after one, the reader is at its end.
impl<R: BufRead> PcapReader<R> {
    /// The next record's timestamp (ns), its header read and its frame not; `Ok(None)` at a clean
    /// end of file. Asking again before [`PcapReader::take_frame`] gives the same answer.
    pub fn peek_record(&mut self) -> io::Result<Option<u64>> {
        if let Some((ts, _)) = self.pending {
            return Ok(Some(ts));
        }
        if self.done {
            return Ok(None);
        }
        let r = self.peek_header();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn peek_header(&mut self) -> io::Result<Option<u64>> {
        self.inner.consume(std::mem::take(&mut self.consume));
        let mut h = [0u8; RECORD_HEADER_LEN];
        let buf = self.inner.fill_buf()?;
        if let Some(whole) = buf.get(..RECORD_HEADER_LEN) {
            h.copy_from_slice(whole);
            self.inner.consume(RECORD_HEADER_LEN);
        } else {
            let got = read_full(&mut self.inner, &mut h)?;
            if got == 0 {
                return Ok(None);
            }
            if got < RECORD_HEADER_LEN {
                let (idx, off) = (self.index, self.offset);
                return Err(truncated(format!(
                    "pcap record #{idx} at byte offset {off}: truncated record header ({got} of {RECORD_HEADER_LEN} bytes)"
                )));
            }
        }
        let (ts, caplen) = self.record_header(&h)?;
        self.pending = Some((ts, caplen));
        Ok(Some(ts))
    }

    /// The frame of the record [`PcapReader::peek_record`] announced (valid until the next call on the
    /// reader); an empty frame when nothing was announced.
    pub fn take_frame(&mut self) -> io::Result<&[u8]> {
        let Some((_, caplen)) = self.pending.take() else {
            return Ok(&[]);
        };
        let len = caplen as usize;
        let (idx, off) = (self.index, self.offset);
        self.index += 1;
        self.offset += (RECORD_HEADER_LEN + len) as u64;
        // Asked twice (an immutable look first, then the slice returned) because a borrow
        // returned from one arm of a branch holds in the other too: the second `fill_buf` of a
        // buffer that still holds bytes only returns them.
        let whole = match self.inner.fill_buf() {
            Ok(b) => b.len() >= len,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        if whole {
            self.consume = len;
            return Ok(self.inner.fill_buf()?.get(..len).unwrap_or_default());
        }
        self.scratch.clear();
        self.scratch.resize(len, 0);
        let got = match read_full(&mut self.inner, &mut self.scratch) {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        if got < len {
            self.done = true;
            return Err(truncated(format!(
                "pcap record #{idx} at byte offset {off}: truncated record data ({got} of {caplen} bytes)"
            )));
        }
        Ok(&self.scratch)
    }
}

impl<R: Read> Iterator for PcapReader<R> {
    type Item = io::Result<PcapRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Read every record from `reader`.
pub fn read_pcap_from<R: Read>(reader: R) -> io::Result<Vec<PcapRecord>> {
    PcapReader::new(reader)?.collect()
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Read every record of the pcap file at `path`; errors name the file.
pub fn read_pcap(path: impl AsRef<Path>) -> io::Result<Vec<PcapRecord>> {
    let path = path.as_ref();
    let f = File::open(path).map_err(|e| with_path(path, e))?;
    read_pcap_from(BufReader::new(f)).map_err(|e| with_path(path, e))
}

/// Streaming pcap writer: little-endian, nanosecond timestamps, snaplen [`SNAPLEN`], Ethernet.
pub struct PcapWriter<W: Write> {
    inner: W,
    count: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Write the global header.
    pub fn new(mut inner: W) -> io::Result<Self> {
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NSEC.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) are zero.
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        inner.write_all(&h)?;
        Ok(PcapWriter { inner, count: 0 })
    }

    /// Append one record. Fails (writing nothing) if the frame is longer than [`SNAPLEN`] or the
    /// timestamp's seconds do not fit the format's 32 bits.
    pub fn write(&mut self, rec: &PcapRecord) -> io::Result<()> {
        self.write_frame(rec.ts_ns, &rec.data)
    }

    /// [`PcapWriter::write`] of a frame at `ts_ns` without a [`PcapRecord`] (no copy).
    pub fn write_frame(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let idx = self.count;
        if data.len() > SNAPLEN as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pcap record #{idx}: frame of {} bytes exceeds snaplen {SNAPLEN}",
                    data.len()
                ),
            ));
        }
        let sec = ts_ns / NS_PER_SEC;
        let sec = u32::try_from(sec).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pcap record #{idx}: timestamp {} ns is beyond the pcap format's 32-bit seconds",
                    ts_ns
                ),
            )
        })?;
        let nsec = (ts_ns % NS_PER_SEC) as u32;
        let len = data.len() as u32;
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&nsec.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(data)?;
        self.count += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Flush and return the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// Write `records` as a nanosecond pcap to `writer` (flushed).
pub fn write_pcap_to<W: Write>(writer: W, records: &[PcapRecord]) -> io::Result<()> {
    let mut w = PcapWriter::new(writer)?;
    for r in records {
        w.write(r)?;
    }
    w.finish()?;
    Ok(())
}

/// Write `records` as a nanosecond pcap file at `path` (created or truncated); errors name the file.
pub fn write_pcap(path: impl AsRef<Path>, records: &[PcapRecord]) -> io::Result<()> {
    let path = path.as_ref();
    let f = File::create(path).map_err(|e| with_path(path, e))?;
    write_pcap_to(BufWriter::new(f), records).map_err(|e| with_path(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(ts_ns: u64, data: &[u8]) -> PcapRecord {
        PcapRecord {
            ts_ns,
            data: data.to_vec(),
        }
    }

    /// Build a classic pcap by hand: `be` byte order, µs or ns magic, linktype, raw records
    /// (sec, frac, caplen, origlen, data).
    fn build(be: bool, nsec: bool, linktype: u32, recs: &[(u32, u32, u32, u32, &[u8])]) -> Vec<u8> {
        let w32 = |v: &mut Vec<u8>, x: u32| {
            v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() })
        };
        let w16 = |v: &mut Vec<u8>, x: u16| {
            v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() })
        };
        let mut v = Vec::new();
        w32(&mut v, if nsec { MAGIC_NSEC } else { MAGIC_USEC });
        w16(&mut v, 2);
        w16(&mut v, 4);
        w32(&mut v, 0);
        w32(&mut v, 0);
        w32(&mut v, 65535);
        w32(&mut v, linktype);
        for &(s, f, cl, ol, d) in recs {
            w32(&mut v, s);
            w32(&mut v, f);
            w32(&mut v, cl);
            w32(&mut v, ol);
            v.extend_from_slice(d);
        }
        v
    }

    #[test]
    fn round_trip() {
        let recs = vec![
            rec(0, &[]),
            rec(1_700_000_000_123_456_789, &[1, 2, 3, 4, 5]),
            rec(1_700_000_001_000_000_000, &[0xff; 1500]),
            rec(4_294_967_295_999_999_999, &[7; 60]),
        ];
        let mut buf = Vec::new();
        write_pcap_to(&mut buf, &recs).unwrap();
        assert_eq!(&buf[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(read_pcap_from(&buf[..]).unwrap(), recs);
        let r = PcapReader::new(&buf[..]).unwrap();
        assert!(r.header().nanosecond && !r.header().big_endian);
        assert_eq!(r.header().snaplen, SNAPLEN);
        assert_eq!(r.count(), recs.len());
    }

    #[test]
    fn round_trip_file() {
        let dir = std::env::temp_dir().join(format!("longhaul-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("rt.pcap");
        let recs = vec![rec(5, &[9; 64]), rec(6, &[8; 65])];
        write_pcap(&p, &recs).unwrap();
        assert_eq!(read_pcap(&p).unwrap(), recs);
        let e = read_pcap(dir.join("missing.pcap")).unwrap_err();
        assert!(e.to_string().contains("missing.pcap"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn microsecond_input_le_and_be() {
        for be in [false, true] {
            let f = build(
                be,
                false,
                1,
                &[(10, 250_000, 3, 3, &[1, 2, 3]), (11, 999_999, 1, 1, &[4])],
            );
            let recs = read_pcap_from(&f[..]).unwrap();
            assert_eq!(
                recs,
                vec![rec(10_250_000_000, &[1, 2, 3]), rec(11_999_999_000, &[4])],
                "be={be}"
            );
        }
    }

    #[test]
    fn nanosecond_big_endian_input() {
        let f = build(true, true, 1, &[(3, 123_456_789, 2, 2, &[0xaa, 0xbb])]);
        let r = PcapReader::new(&f[..]).unwrap();
        assert!(r.header().big_endian && r.header().nanosecond);
        let recs: Vec<_> = r.collect::<io::Result<_>>().unwrap();
        assert_eq!(recs, vec![rec(3_123_456_789, &[0xaa, 0xbb])]);
    }

    #[test]
    fn truncated_capture_keeps_caplen_bytes() {
        let f = build(false, true, 1, &[(0, 1, 4, 1500, &[1, 2, 3, 4])]);
        assert_eq!(read_pcap_from(&f[..]).unwrap(), vec![rec(1, &[1, 2, 3, 4])]);
    }

    #[test]
    fn empty_file_with_header_only() {
        let f = build(false, false, 1, &[]);
        assert!(read_pcap_from(&f[..]).unwrap().is_empty());
    }

    #[test]
    fn error_wrong_linktype() {
        let f = build(false, false, 101, &[]);
        let e = read_pcap_from(&f[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("link type 101"), "{e}");
    }

    #[test]
    fn error_bad_magic_and_pcapng() {
        let e = read_pcap_from(&b"hello world, this is not a pcap"[..]).unwrap_err();
        assert!(e.to_string().contains("bad magic"), "{e}");
        let e = read_pcap_from(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0][..]).unwrap_err();
        assert!(e.to_string().contains("pcapng"), "{e}");
        let e = read_pcap_from(&[0xd4, 0xc3][..]).unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
    }

    #[test]
    fn error_truncated_global_header() {
        let f = build(false, false, 1, &[]);
        let e = read_pcap_from(&f[..20]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("global header"), "{e}");
    }

    #[test]
    fn error_truncated_record_header_names_index_and_offset() {
        let f = build(false, false, 1, &[(0, 0, 2, 2, &[1, 2])]);
        let mut g = f.clone();
        g.extend_from_slice(&[0, 0, 0]); // 3 bytes of a second record header
        let e = read_pcap_from(&g[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let m = e.to_string();
        assert!(
            m.contains("record #1") && m.contains("offset 42") && m.contains("header"),
            "{m}"
        );
    }

    #[test]
    fn error_truncated_record_data() {
        let f = build(false, false, 1, &[(0, 0, 10, 10, &[1, 2, 3])]);
        let e = read_pcap_from(&f[..]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("record #0") && m.contains("offset 24") && m.contains("3 of 10"),
            "{m}"
        );
        // The streaming reader yields good records, then the error, then stops.
        let mut g = build(false, false, 1, &[(0, 0, 1, 1, &[9])]);
        g.extend_from_slice(&f[24..]);
        let mut it = PcapReader::new(&g[..]).unwrap();
        assert_eq!(it.next().unwrap().unwrap(), rec(0, &[9]));
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    #[test]
    fn error_absurd_caplen() {
        let f = build(
            false,
            true,
            1,
            &[(0, 0, 5, 5, &[0; 5]), (0, 0, MAX_CAPLEN + 1, 60, &[])],
        );
        let m = read_pcap_from(&f[..]).unwrap_err().to_string();
        assert!(
            m.contains("record #1") && m.contains("offset 45") && m.contains("262145"),
            "{m}"
        );
    }

    #[test]
    fn writer_rejects_oversize_and_far_future() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        assert!(w.write(&rec(0, &vec![0; SNAPLEN as usize + 1])).is_err());
        assert!(w.write(&rec(u64::MAX, &[1])).is_err());
        w.write(&rec(1, &[1])).unwrap();
        assert_eq!(w.count(), 1);
        let buf = w.finish().unwrap();
        assert_eq!(read_pcap_from(&buf[..]).unwrap(), vec![rec(1, &[1])]);
    }

    /// Every record through [`PcapReader::peek_record`] / [`PcapReader::take_frame`], as [`read_pcap_from`]
    /// reads them; peek is asked twice to check that it does not move on.
    fn read_by_peek<R: BufRead>(r: R) -> io::Result<Vec<PcapRecord>> {
        let mut p = PcapReader::new(r)?;
        let mut out = Vec::new();
        while let Some(ts_ns) = p.peek_record()? {
            assert_eq!(p.peek_record()?, Some(ts_ns));
            out.push(rec(ts_ns, p.take_frame()?));
        }
        assert_eq!(p.peek_record()?, None, "at its end");
        Ok(out)
    }

    #[test]
    fn peek_take_errors_name_the_record_and_end_the_reader() {
        let bad = build(false, false, 1, &[(0, 0, 10, 10, &[1, 2, 3])]);
        let mut g = build(false, false, 1, &[(0, 7, 1, 1, &[9])]);
        g.extend_from_slice(&bad[24..]);
        let mut p = PcapReader::new(&g[..]).unwrap();
        assert_eq!(p.peek_record().unwrap(), Some(7_000));
        assert_eq!(p.take_frame().unwrap(), &[9]);
        assert_eq!(p.peek_record().unwrap(), Some(0));
        let m = p.take_frame().unwrap_err().to_string();
        assert!(m.contains("record #1") && m.contains("3 of 10"), "{m}");
        assert_eq!(p.peek_record().unwrap(), None);
        // A header cut short, and an absurd length: the same messages as the copying reader.
        let mut h = build(false, false, 1, &[(0, 0, 2, 2, &[1, 2])]);
        h.extend_from_slice(&[0, 0, 0]);
        let m = read_by_peek(&h[..]).unwrap_err().to_string();
        assert_eq!(m, read_pcap_from(&h[..]).unwrap_err().to_string());
        assert!(m.contains("record #1") && m.contains("offset 42"), "{m}");
    }

    proptest! {
        /// Frames straddling the reader's buffer (a `BufReader` of 1 to 80 bytes around frames
        /// of up to 200) are copied out whole; every file reads as the copying reader reads it,
        /// errors included.
        #[test]
        fn peek_take_reads_what_the_copying_reader_reads(
            recs in proptest::collection::vec(
                (0u64..4_000_000_000_000, proptest::collection::vec(any::<u8>(), 0..200)),
                0..20,
            ),
            cap in 1usize..80,
            cut in any::<proptest::sample::Index>(),
            garbage in any::<bool>(),
        ) {
            let recs: Vec<PcapRecord> = recs.into_iter().map(|(ts_ns, data)| PcapRecord { ts_ns, data }).collect();
            let mut buf = Vec::new();
            write_pcap_to(&mut buf, &recs).unwrap();
            if garbage {
                buf.truncate(GLOBAL_HEADER_LEN + cut.index(buf.len() - GLOBAL_HEADER_LEN + 1));
            }
            let want = read_pcap_from(&buf[..]).map_err(|e| e.to_string());
            let got = read_by_peek(BufReader::with_capacity(cap, &buf[..])).map_err(|e| e.to_string());
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(read_by_peek(&buf[..]).map_err(|e| e.to_string()), want);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = read_pcap_from(&bytes[..]);
        }

        #[test]
        fn garbage_after_valid_header_never_panics(
            be in any::<bool>(),
            nsec in any::<bool>(),
            tail in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut f = build(be, nsec, 1, &[]);
            f.extend_from_slice(&tail);
            let _ = read_pcap_from(&f[..]);
        }

        #[test]
        fn write_read_round_trip(recs in proptest::collection::vec(
            (0u64..(u32::MAX as u64 + 1) * 1_000_000_000, proptest::collection::vec(any::<u8>(), 0..200)),
            0..20,
        )) {
            let recs: Vec<PcapRecord> = recs.into_iter().map(|(ts_ns, data)| PcapRecord { ts_ns, data }).collect();
            let mut buf = Vec::new();
            write_pcap_to(&mut buf, &recs).unwrap();
            prop_assert_eq!(read_pcap_from(&buf[..]).unwrap(), recs);
        }
    }
}
