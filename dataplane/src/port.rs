//! Ports (DESIGN.md section 4): where a live worker's packets come from and go to.
//!
//! A [`Port`] receives and transmits bursts of packet buffers. The live run driver owns one port
//! per switch port and, on every iteration of its loop, does:
//!
//! 1. `now = clock`;
//! 2. for each port: [`Port::rx_burst`]`(now, pool, &mut burst, BURST)`, then
//!    `switch.receive_burst(idx, now, &mut burst)`;
//! 3. `switch.poll(now)`;
//! 4. for each port: `switch.transmit(idx, now, BURST, &mut |p| txv.push(p))`, then
//!    [`Port::tx_burst`]`(now, &mut txv, pool)`.
//!
//! The buffers come from (and go back to) the caller's pool, so a port never owns packets between
//! calls: a frame that cannot be sent is freed and counted, never kept.
//!
//! Backends here (pure Rust, no DPDK):
//! - [`PcapPort`]: rx replays a pcap file (paced by its timestamps or as fast as pulled,
//!   optionally looping forever), tx writes a nanosecond pcap file. No per-packet allocation.
//! - [`MemoryPort`]: in-memory rings for tests and for wiring switches back to back. It copies
//!   frames into `Vec<u8>`s (one allocation per frame): for tests, not for the fast path.
//! - [`NullPort`]: receives nothing, transmits into the void (counted), as DPDK's `net_null` tx.

use crate::packet::{BufPool, PacketBuf};
use crate::pcap::{read_pcap, PcapWriter, SNAPLEN};
use crate::time::{Nanos, NS_PER_SEC};
use crossbeam_queue::ArrayQueue;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

crate::counters! {
    /// Counters of one port's I/O (what the backend saw; the switch keeps its own per-port
    /// counters).
    #[derive(Copy)]
    pub struct PortIoStats: "io" {
        /// Frames received and handed to the caller.
        pub rx_pkts: u64,
        /// Bytes of those frames.
        pub rx_bytes: u64,
        /// Frames sent.
        pub tx_pkts: u64,
        /// Bytes of those frames.
        pub tx_bytes: u64,
        /// Receive bursts cut short because the buffer pool was empty (the frame is retried later).
        pub rx_nobuf: u64,
        /// Frames handed to `tx_burst` that could not be sent (freed).
        pub tx_errors: u64,
        /// Frames received but unusable (larger than a pool buffer), or lost before the port
        /// (a full in-memory ring, as a NIC's missed counter); skipped.
        pub rx_errors: u64,
    }
}

/// Frames per burst (DPDK's customary 32): the most a port's rx or tx burst moves at once, the
/// most [`crate::engine::Pipeline::ingress_burst`] is given at once, and the frames a replay or a
/// dispatch ring hands over at once.
pub const BURST: usize = 32;

/// A port backend: bursts of packet buffers in and out.
///
/// All methods take the caller's clock (`now`); none reads a clock itself.
pub trait Port<P: BufPool> {
    /// Receive up to `max` frames that have arrived by `now` into `out` (buffers from `pool`;
    /// pool exhausted => stop and count `rx_nobuf`). Returns how many were added.
    ///
    /// `out` should have capacity for `max` more buffers, so that pushing never allocates.
    fn rx_burst(&mut self, now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize;

    /// Send every frame in `pkts` (drained; buffers returned to `pool`). Returns how many were
    /// sent; frames that could not be sent are freed and counted (`tx_errors`), never kept.
    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize;

    /// When the next frame will be available on rx (for an idle worker to sleep until), if known.
    /// A time at or before `now` means "available now".
    fn next_rx(&self) -> Option<Nanos> {
        None
    }

    /// True when rx will never produce another frame (a pcap without rx_loop, fully read).
    fn rx_exhausted(&self) -> bool {
        false
    }

    /// Whether the link is up.
    fn link_up(&self) -> bool {
        true
    }

    /// Push buffered transmitted frames to their destination (call before exiting).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Work that is not a burst of this worker's own: the worker loop calls it every iteration
    /// (a shared port's owner sends the other workers' frames here, `dispatch::WorkerPort`).
    /// Returns how many frames it moved.
    fn service(&mut self, _now: Nanos, _pool: &mut P) -> usize {
        0
    }

    /// The port's I/O counters.
    fn stats(&self) -> PortIoStats;

    /// A one-line description for logs, e.g. `"pcap rx=in.pcap tx=out.pcap"`.
    fn describe(&self) -> String;
}

impl<P: BufPool, T: Port<P> + ?Sized> Port<P> for Box<T> {
    fn rx_burst(&mut self, now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize {
        (**self).rx_burst(now, pool, out, max)
    }
    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        (**self).tx_burst(now, pkts, pool)
    }
    fn next_rx(&self) -> Option<Nanos> {
        (**self).next_rx()
    }
    fn rx_exhausted(&self) -> bool {
        (**self).rx_exhausted()
    }
    fn link_up(&self) -> bool {
        (**self).link_up()
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
    fn service(&mut self, now: Nanos, pool: &mut P) -> usize {
        (**self).service(now, pool)
    }
    fn stats(&self) -> PortIoStats {
        (**self).stats()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// Free every buffer of `pkts`, counting them as transmit errors.
fn drop_all<P: BufPool>(pkts: &mut Vec<P::Buf>, pool: &mut P, stats: &mut PortIoStats) {
    for p in pkts.drain(..) {
        stats.tx_errors += 1;
        pool.free(p);
    }
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// pcap
// ---------------------------------------------------------------------------------------------

/// The rx side of a [`PcapPort`]: the whole capture, loaded up front.
struct PcapRx {
    path: PathBuf,
    frames: Vec<Vec<u8>>,
    /// Offset of frame i from frame 0 (non-decreasing: a timestamp that goes backwards is taken
    /// as the previous one).
    offs: Vec<Nanos>,
    /// Index of the next frame in the current lap.
    next: usize,
    /// Time frame 0 of the current lap is due: `start + laps * period`.
    lap_base: Nanos,
    /// Shift between laps: span + mean inter-frame gap (at least 1 ns).
    period: Nanos,
    rx_loop: bool,
    pace: bool,
}

impl PcapRx {
    fn load(path: &Path, rx_loop: bool, pace: bool, start: Nanos) -> io::Result<Self> {
        let recs = read_pcap(path)?;
        let mut frames = Vec::with_capacity(recs.len());
        let mut offs = Vec::with_capacity(recs.len());
        let t0 = recs.first().map_or(0, |r| r.ts_ns);
        let mut prev = t0;
        for r in recs {
            let ts = r.ts_ns.max(prev);
            prev = ts;
            offs.push(ts - t0);
            frames.push(r.data);
        }
        let span = offs.last().copied().unwrap_or(0);
        let gaps = frames.len().saturating_sub(1) as u64;
        let mean_gap = span.checked_div(gaps).unwrap_or(0);
        Ok(PcapRx {
            path: path.to_path_buf(),
            frames,
            offs,
            next: 0,
            lap_base: start,
            period: span.saturating_add(mean_gap).max(1),
            rx_loop,
            pace,
        })
    }

    /// The next frame (index, and its due time; 0 when not paced), wrapping when looping;
    /// `None` when there is none left.
    fn peek(&self) -> Option<(usize, Nanos)> {
        let (i, base) = if self.next < self.frames.len() {
            (self.next, self.lap_base)
        } else if self.rx_loop && !self.frames.is_empty() {
            (0, self.lap_base.saturating_add(self.period))
        } else {
            return None;
        };
        let due = if self.pace {
            base.saturating_add(self.offs.get(i).copied().unwrap_or(0))
        } else {
            0
        };
        Some((i, due))
    }

    /// Move past the frame [`PcapRx::peek`] returned.
    fn advance(&mut self) {
        if self.next >= self.frames.len() {
            self.next = 0;
            self.lap_base = self.lap_base.saturating_add(self.period);
        }
        self.next += 1;
    }
}

/// Why a frame was not written to a tx pcap.
#[derive(Debug, PartialEq, Eq)]
enum TxFail {
    /// The frame cannot be represented (too long, timestamp out of range): nothing was written.
    Frame,
    /// The file failed (the error is kept in `failed`): later frames cannot be written safely
    /// (a partial record may be there).
    Io,
    /// The file reached its size cap: nothing was written (the file stays a valid pcap).
    Cap,
}

/// The tx side of a [`PcapPort`]: a nanosecond pcap (the same format as [`PcapWriter`]), records
/// written straight from the buffer slice.
struct PcapTx<W: Write> {
    path: PathBuf,
    w: W,
    /// The first I/O error (message naming the file); once set, every frame is dropped.
    failed: Option<String>,
    /// Bytes written so far (header included) and the most the file may hold.
    written: u64,
    max_bytes: u64,
    /// Frames dropped because the next record would pass `max_bytes`.
    capped: u64,
}

impl PcapTx<BufWriter<File>> {
    fn create(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| with_path(dir, e))?;
        }
        let f = File::create(path).map_err(|e| with_path(path, e))?;
        // The global header comes from the pcap module's writer; flushing it now makes a file
        // that cannot be written (full disk, /dev/full) fail here rather than mid-run.
        let w = PcapWriter::new(BufWriter::new(f))
            .and_then(PcapWriter::finish)
            .map_err(|e| with_path(path, e))?;
        Ok(PcapTx {
            path: path.to_path_buf(),
            w,
            failed: None,
            written: crate::pcap::GLOBAL_HEADER_LEN as u64,
            max_bytes: u64::MAX,
            capped: 0,
        })
    }
}

impl<W: Write> PcapTx<W> {
    fn write_frame(&mut self, ts: Nanos, data: &[u8]) -> Result<(), TxFail> {
        if self.failed.is_some() {
            return Err(TxFail::Frame);
        }
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&l| l <= SNAPLEN)
            .ok_or(TxFail::Frame)?;
        let sec = u32::try_from(ts / NS_PER_SEC).map_err(|_| TxFail::Frame)?;
        let nsec = (ts % NS_PER_SEC) as u32;
        let record = 16 + u64::from(len);
        if self.written + record > self.max_bytes {
            self.capped += 1;
            return Err(TxFail::Cap);
        }
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&nsec.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        let r = self.w.write_all(&h).and_then(|()| self.w.write_all(data));
        self.written += record;
        r.map_err(|e| {
            self.failed = Some(format!("{}: {e}", self.path.display()));
            TxFail::Io
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(m) = &self.failed {
            return Err(io::Error::other(m.clone()));
        }
        self.w.flush().map_err(|e| {
            let e = with_path(&self.path, e);
            self.failed = Some(e.to_string());
            e
        })
    }
}

/// A port backed by pcap files: rx replays a capture, tx records what the switch sent.
///
/// **rx.** The capture is loaded into memory when the port opens; each frame is copied into a
/// pool buffer when received (no allocation). With `pace`, frame `i` becomes available at
/// `start + (ts_i - ts_0)`, keeping the capture's relative timing (a timestamp that goes
/// backwards counts as the previous one); without `pace` every frame is available at once and the
/// worker gets full bursts as fast as it pulls. With `rx_loop`, after the last frame the capture
/// starts over, forever; each lap is shifted by the capture's span plus its mean inter-frame gap
/// (`(ts_last - ts_0) * n / (n - 1)`, at least 1 ns), so the gap across the wrap is the mean gap
/// and a capture of one frame (or of identical timestamps) repeats every nanosecond. If the
/// worker falls behind a paced capture, the overdue frames are delivered as fast as it pulls.
///
/// A frame larger than a pool buffer is skipped and counted in `rx_errors`; when the pool is
/// empty the burst stops, `rx_nobuf` counts it, and the same frame is retried on the next call.
/// Every frame examined (delivered or skipped) uses one of the burst's `max` slots.
///
/// **tx.** Every frame is written as a record of a nanosecond pcap, timestamped `now`, straight
/// from the buffer (no allocation). A frame the format cannot hold (longer than
/// [`crate::pcap::SNAPLEN`], or `now` beyond 32-bit seconds) is dropped and counted in
/// `tx_errors`. After the first I/O error the file is considered broken (a partial record may
/// have been written): that frame and every later one are dropped and counted in `tx_errors`,
/// [`PcapPort::tx_error`] says what happened, and [`Port::flush`] returns the error. Without a
/// tx file, transmitted frames are dropped and counted in `tx_errors`. With a size cap
/// ([`PcapPort::with_tx_cap`]), a frame whose record would take the file past it is dropped and
/// counted in `tx_errors` and [`PcapPort::tx_capped`]; the file stays a valid pcap. The tx
/// file's directory is created if missing.
///
/// Output is buffered: call [`Port::flush`] before the run ends (dropping the port flushes too,
/// but ignores errors).
pub struct PcapPort {
    rx: Option<PcapRx>,
    tx: Option<PcapTx<BufWriter<File>>>,
    stats: PortIoStats,
}

impl PcapPort {
    /// Open a pcap port: `rx` is read completely now, `tx` is created (or truncated) and gets
    /// its pcap header. `start` is the time the first rx frame is due when `pace` is set.
    /// Errors name the file; a port with neither `rx` nor `tx` is an `InvalidInput` error.
    pub fn open(
        rx: Option<&Path>,
        tx: Option<&Path>,
        rx_loop: bool,
        pace: bool,
        start: Nanos,
    ) -> io::Result<Self> {
        if rx.is_none() && tx.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a pcap port needs an rx file, a tx file, or both",
            ));
        }
        let rx = rx
            .map(|p| PcapRx::load(p, rx_loop, pace, start))
            .transpose()?;
        let tx = tx.map(PcapTx::create).transpose()?;
        Ok(PcapPort {
            rx,
            tx,
            stats: PortIoStats::default(),
        })
    }

    /// Frames in the rx capture (0 without an rx file).
    pub fn rx_frames(&self) -> usize {
        self.rx.as_ref().map_or(0, |r| r.frames.len())
    }

    /// Cap the tx file at `max_bytes` (pcap header included).
    pub fn with_tx_cap(mut self, max_bytes: u64) -> Self {
        if let Some(t) = self.tx.as_mut() {
            t.max_bytes = max_bytes;
        }
        self
    }

    /// Frames dropped because the tx file reached its cap.
    pub fn tx_capped(&self) -> u64 {
        self.tx.as_ref().map_or(0, |t| t.capped)
    }

    /// The first tx I/O error (naming the file), after which every frame is dropped.
    pub fn tx_error(&self) -> Option<&str> {
        self.tx.as_ref().and_then(|t| t.failed.as_deref())
    }
}

impl<P: BufPool> Port<P> for PcapPort {
    fn rx_burst(&mut self, now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize {
        let Some(rx) = self.rx.as_mut() else {
            return 0;
        };
        let mut added = 0;
        let mut examined = 0;
        while examined < max {
            let Some((i, due)) = rx.peek() else {
                break;
            };
            if due > now {
                break;
            }
            let Some(data) = rx.frames.get(i) else {
                break;
            };
            match pool.alloc_from(data) {
                Some(buf) => {
                    self.stats.rx_pkts += 1;
                    self.stats.rx_bytes += data.len() as u64;
                    out.push(buf);
                    added += 1;
                }
                None if pool.available() == 0 => {
                    self.stats.rx_nobuf += 1;
                    break;
                }
                None => self.stats.rx_errors += 1,
            }
            rx.advance();
            examined += 1;
        }
        added
    }

    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        let Some(tx) = self.tx.as_mut() else {
            drop_all(pkts, pool, &mut self.stats);
            return 0;
        };
        let mut sent = 0;
        for p in pkts.drain(..) {
            match tx.write_frame(now, p.data()) {
                Ok(()) => {
                    self.stats.tx_pkts += 1;
                    self.stats.tx_bytes += p.len() as u64;
                    sent += 1;
                }
                Err(TxFail::Frame | TxFail::Io | TxFail::Cap) => self.stats.tx_errors += 1,
            }
            pool.free(p);
        }
        sent
    }

    fn next_rx(&self) -> Option<Nanos> {
        self.rx.as_ref().and_then(|r| r.peek()).map(|(_, due)| due)
    }

    fn rx_exhausted(&self) -> bool {
        self.rx.as_ref().and_then(PcapRx::peek).is_none()
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.tx.as_mut() {
            Some(t) => t.flush(),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortIoStats {
        self.stats
    }

    fn describe(&self) -> String {
        let mut s = String::from("pcap rx=");
        match &self.rx {
            Some(r) => {
                s.push_str(&r.path.display().to_string());
                if r.rx_loop {
                    s.push_str(" (loop)");
                }
                if r.pace {
                    s.push_str(" (paced)");
                }
            }
            None => s.push('-'),
        }
        s.push_str(" tx=");
        match &self.tx {
            Some(t) => s.push_str(&t.path.display().to_string()),
            None => s.push('-'),
        }
        s
    }
}

// ---------------------------------------------------------------------------------------------
// in-memory rings
// ---------------------------------------------------------------------------------------------

type Ring = Arc<ArrayQueue<Vec<u8>>>;

fn ring(capacity: usize) -> Ring {
    Arc::new(ArrayQueue::new(capacity.max(1)))
}

/// A port on in-memory rings of owned frames, for tests and for wiring switches back to back.
///
/// Frames cross the rings as `Vec<u8>`: rx copies each into a pool buffer (the `Vec` was
/// allocated by whoever injected it, and is dropped here), tx copies each frame into a new
/// `Vec`. That is one allocation per transmitted frame: this port is for tests, not for the fast
/// path.
///
/// A frame that does not fit a pool buffer is dropped (`rx_errors`); when the pool is empty the
/// burst stops (`rx_nobuf`) and the frame is retried on the next call. A full tx ring drops the
/// frame (`tx_errors`). Frames the peer could not inject because the rx ring was full are
/// counted in this port's `rx_errors` too (as a NIC's missed counter).
pub struct MemoryPort {
    rx: Ring,
    tx: Ring,
    rx_missed: Arc<AtomicU64>,
    /// A frame taken off the rx ring that found the pool empty, retried first.
    pending: Option<Vec<u8>>,
    stats: PortIoStats,
    desc: String,
}

/// The other end of a [`MemoryPort`]: injects frames into its rx ring and takes the frames it
/// transmitted. Cheap to clone and `Send`, so it can live on another thread.
#[derive(Clone, Debug)]
pub struct MemoryPeer {
    rx: Ring,
    tx: Ring,
    rx_missed: Arc<AtomicU64>,
}

impl MemoryPort {
    /// A port with rx and tx rings of `capacity` frames each (at least 1), and its peer.
    pub fn new(capacity: usize) -> (MemoryPort, MemoryPeer) {
        let (rx, tx) = (ring(capacity), ring(capacity));
        let rx_missed = Arc::new(AtomicU64::new(0));
        let peer = MemoryPeer {
            rx: rx.clone(),
            tx: tx.clone(),
            rx_missed: rx_missed.clone(),
        };
        let port = MemoryPort {
            rx,
            tx,
            rx_missed,
            pending: None,
            stats: PortIoStats::default(),
            desc: format!("memory capacity={}", capacity.max(1)),
        };
        (port, peer)
    }

    /// Two ports joined by a cable: what one transmits, the other receives (rings of `capacity`
    /// frames each way). A frame sent into a full ring is the sender's `tx_errors`.
    pub fn pair(capacity: usize) -> (MemoryPort, MemoryPort) {
        let (ab, ba) = (ring(capacity), ring(capacity));
        let desc = format!("memory cable capacity={}", capacity.max(1));
        let a = MemoryPort {
            rx: ba.clone(),
            tx: ab.clone(),
            rx_missed: Arc::new(AtomicU64::new(0)),
            pending: None,
            stats: PortIoStats::default(),
            desc: desc.clone(),
        };
        let b = MemoryPort {
            rx: ab,
            tx: ba,
            rx_missed: Arc::new(AtomicU64::new(0)),
            pending: None,
            stats: PortIoStats::default(),
            desc,
        };
        (a, b)
    }

    /// Frames waiting on the rx ring (plus one held back for lack of a buffer).
    pub fn rx_pending(&self) -> usize {
        self.rx.len() + usize::from(self.pending.is_some())
    }
}

impl<P: BufPool> Port<P> for MemoryPort {
    fn rx_burst(&mut self, _now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize {
        let mut added = 0;
        let mut examined = 0;
        while examined < max {
            let Some(frame) = self.pending.take().or_else(|| self.rx.pop()) else {
                break;
            };
            match pool.alloc_from(&frame) {
                Some(buf) => {
                    self.stats.rx_pkts += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    out.push(buf);
                    added += 1;
                }
                None if pool.available() == 0 => {
                    self.stats.rx_nobuf += 1;
                    self.pending = Some(frame);
                    break;
                }
                None => self.stats.rx_errors += 1,
            }
            examined += 1;
        }
        added
    }

    fn tx_burst(&mut self, _now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        let mut sent = 0;
        for p in pkts.drain(..) {
            let len = p.len() as u64;
            if self.tx.push(p.data().to_vec()).is_ok() {
                self.stats.tx_pkts += 1;
                self.stats.tx_bytes += len;
                sent += 1;
            } else {
                self.stats.tx_errors += 1;
            }
            pool.free(p);
        }
        sent
    }

    fn next_rx(&self) -> Option<Nanos> {
        // Anything waiting is available now; otherwise only the peer knows.
        (self.rx_pending() > 0).then_some(0)
    }

    /// Exhausted when nothing is waiting and nobody holds the other end of the rx ring any more
    /// (every peer dropped, or the other port of a pair dropped).
    fn rx_exhausted(&self) -> bool {
        self.pending.is_none() && self.rx.is_empty() && Arc::strong_count(&self.rx) == 1
    }

    fn stats(&self) -> PortIoStats {
        let mut s = self.stats;
        s.rx_errors += self.rx_missed.load(Ordering::Relaxed);
        s
    }

    fn describe(&self) -> String {
        self.desc.clone()
    }
}

impl MemoryPeer {
    /// Put a frame on the port's rx ring; `false` (counted in the port's `rx_errors`) when the
    /// ring is full.
    pub fn inject(&self, bytes: &[u8]) -> bool {
        if self.rx.push(bytes.to_vec()).is_ok() {
            true
        } else {
            self.rx_missed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// The oldest frame the port transmitted that has not been taken yet.
    pub fn take(&self) -> Option<Vec<u8>> {
        self.tx.pop()
    }

    /// Every frame the port transmitted that has not been taken yet, oldest first.
    pub fn drain(&self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.tx.pop()).collect()
    }

    /// Frames lost because the rx ring was full.
    pub fn dropped(&self) -> u64 {
        self.rx_missed.load(Ordering::Relaxed)
    }

    /// Frames injected and not yet received by the port.
    pub fn rx_len(&self) -> usize {
        self.rx.len()
    }
}

// ---------------------------------------------------------------------------------------------
// null
// ---------------------------------------------------------------------------------------------

/// A port that receives nothing and transmits into the void: every frame is freed and counted as
/// sent (as DPDK's `net_null` tx). Its rx is always exhausted.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullPort {
    stats: PortIoStats,
}

impl NullPort {
    /// A new null port.
    pub fn new() -> Self {
        NullPort::default()
    }
}

impl<P: BufPool> Port<P> for NullPort {
    fn rx_burst(
        &mut self,
        _now: Nanos,
        _pool: &mut P,
        _out: &mut Vec<P::Buf>,
        _max: usize,
    ) -> usize {
        0
    }

    fn tx_burst(&mut self, _now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        let n = pkts.len();
        for p in pkts.drain(..) {
            self.stats.tx_pkts += 1;
            self.stats.tx_bytes += p.len() as u64;
            pool.free(p);
        }
        n
    }

    fn rx_exhausted(&self) -> bool {
        true
    }

    fn stats(&self) -> PortIoStats {
        self.stats
    }

    fn describe(&self) -> String {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{HeapBuf, HeapPool};

    /// A writer that accepts `ok` bytes, then fails.
    struct Failing {
        ok: usize,
        got: Vec<u8>,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.got.len() + buf.len() > self.ok {
                return Err(io::Error::other("disk on fire"));
            }
            self.got.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn tx(ok: usize) -> PcapTx<Failing> {
        PcapTx {
            path: PathBuf::from("out.pcap"),
            w: Failing {
                ok,
                got: Vec::new(),
            },
            failed: None,
            written: 24,
            max_bytes: u64::MAX,
            capped: 0,
        }
    }

    #[test]
    fn a_capped_file_takes_whole_records_up_to_the_cap_then_drops() {
        let mut t = tx(usize::MAX);
        // 24 + 2 records of 16 + 100: 256 bytes. A cap of 300 takes two, not a third.
        t.max_bytes = 300;
        assert!(t.write_frame(1, &[0; 100]).is_ok());
        assert!(t.write_frame(2, &[0; 100]).is_ok());
        assert_eq!(t.write_frame(3, &[0; 100]), Err(TxFail::Cap));
        assert!(
            t.write_frame(4, &[0; 20]).is_ok(),
            "a smaller frame still fits"
        );
        assert_eq!(t.written, 24 + 2 * 116 + 36);
        assert_eq!(t.capped, 1);
        assert!(t.failed.is_none(), "a cap is not an I/O error");
        assert_eq!(t.w.got.len() as u64 + 24, t.written);
    }

    #[test]
    fn tx_record_matches_pcap_module_format() {
        let mut t = tx(usize::MAX);
        assert!(t.write_frame(1_500_000_007, &[1, 2, 3]).is_ok());
        let mut expect = Vec::new();
        let mut w = PcapWriter::new(&mut expect).unwrap();
        w.write(&crate::pcap::PcapRecord {
            ts_ns: 1_500_000_007,
            data: vec![1, 2, 3],
        })
        .unwrap();
        w.finish().unwrap();
        assert_eq!(t.w.got, expect[24..]);
    }

    #[test]
    fn tx_io_error_poisons_the_writer() {
        let mut t = tx(20);
        assert!(t.write_frame(1, &[0; 4]).is_ok()); // 16 + 4 bytes
        assert!(matches!(t.write_frame(2, &[0; 4]), Err(TxFail::Io)));
        assert!(t.failed.as_deref().unwrap().contains("out.pcap"));
        // Even a frame that would fit is refused now, and flush reports the first error.
        t.w.ok = usize::MAX;
        assert!(matches!(t.write_frame(3, &[0; 1]), Err(TxFail::Frame)));
        let e = t.flush().unwrap_err().to_string();
        assert!(e.contains("out.pcap") && e.contains("disk on fire"), "{e}");
    }

    #[test]
    fn tx_unrepresentable_frames_are_refused_without_poisoning() {
        let mut t = tx(usize::MAX);
        let big = vec![0u8; SNAPLEN as usize + 1];
        assert!(matches!(t.write_frame(0, &big), Err(TxFail::Frame)));
        assert!(matches!(t.write_frame(u64::MAX, &[1]), Err(TxFail::Frame)));
        assert!(t.failed.is_none() && t.w.got.is_empty());
        assert!(t.write_frame(5, &[1]).is_ok());
    }

    fn rx(offs: &[Nanos], rx_loop: bool, pace: bool) -> PcapRx {
        let mut r = PcapRx {
            path: PathBuf::from("in.pcap"),
            frames: offs.iter().map(|&o| vec![o as u8; 60]).collect(),
            offs: offs.to_vec(),
            next: 0,
            lap_base: 1000,
            period: 1,
            rx_loop,
            pace,
        };
        let span = offs.last().copied().unwrap_or(0);
        let gaps = offs.len().saturating_sub(1) as u64;
        r.period = span
            .saturating_add(span.checked_div(gaps).unwrap_or(0))
            .max(1);
        r
    }

    #[test]
    fn loop_period_is_span_plus_mean_gap() {
        let mut r = rx(&[0, 10, 40], true, true);
        assert_eq!(r.period, 60);
        let mut due = Vec::new();
        for _ in 0..7 {
            due.push(r.peek().unwrap().1);
            r.advance();
        }
        assert_eq!(due, vec![1000, 1010, 1040, 1060, 1070, 1100, 1120]);
        let empty = rx(&[], true, true);
        assert!(empty.peek().is_none());
        let one = rx(&[0], true, true);
        assert_eq!(one.period, 1);
    }

    #[test]
    fn null_port_counts_and_frees() {
        let mut pool = HeapPool::new(4, 128);
        let mut n = NullPort::new();
        let mut v: Vec<HeapBuf> = (0..3).map(|_| pool.alloc_from(&[0; 10]).unwrap()).collect();
        assert_eq!(Port::<HeapPool>::tx_burst(&mut n, 0, &mut v, &mut pool), 3);
        assert!(v.is_empty());
        assert_eq!(pool.available(), 4);
        let mut out = Vec::new();
        assert_eq!(n.rx_burst(0, &mut pool, &mut out, 32), 0);
        let s = Port::<HeapPool>::stats(&n);
        assert_eq!((s.tx_pkts, s.tx_bytes), (3, 30));
        assert!(Port::<HeapPool>::rx_exhausted(&n));
    }
}
