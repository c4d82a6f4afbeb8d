//! The virtual-time driver: runs captured or scripted traffic through a [`Switch`]
//! deterministically.
//!
//! Inputs are merged by timestamp (ties: the input listed first, then file order). Time jumps
//! from event to event: the next input arrival or the switch's own next event (a queue that can
//! transmit, a recirculated packet coming back, a PFC refresh, a pipeline timer), so shapers,
//! queue drains and timers advance exactly as on links of the configured rates. Every packet
//! leaves with its virtual departure time (the start of its transmission). Nothing reads the wall
//! clock, so the same input gives the same bytes and timestamps on every run.
//!
//! Front ends share the one event loop ([`advance`]): [`run`] takes pcap records from slices,
//! [`Streams`] reads them from any [`FrameSource`] as they are needed (a pcap file of any size in
//! bounded memory: `longhaul replay`), and [`Harness`] (`harness.rs`) lets a test or the
//! emulator put packets on ports at given times, advance time and collect what each port emitted.

use crate::asic::pfc::PfcGenerator;
use crate::counters::DropReason;
use crate::engine::{Admission, Pipeline, Switch};
use crate::packet::{BufPool, PacketBuf};
use crate::pcap::{PcapReader, PcapRecord};
use crate::time::{earlier, Nanos};
use std::collections::VecDeque;
use std::io::{self, BufRead};

use crate::port::BURST;

mod harness;

pub use harness::{Emitted, FramePool, Harness};

/// Where emitted frames go: `(port index, departure time, frame)`.
pub trait Sink<B: PacketBuf> {
    fn emit(&mut self, port_idx: usize, ts: Nanos, pkt: &B);

    /// The driver's call: the frame itself, which the sink frees to `pool` (or keeps what the
    /// pool gives back: [`BufPool::free_to_vec`]). Default: [`Sink::emit`], then free.
    #[inline]
    fn emit_owned<P: BufPool<Buf = B>>(
        &mut self,
        port_idx: usize,
        ts: Nanos,
        pkt: B,
        pool: &mut P,
    ) {
        self.emit(port_idx, ts, &pkt);
        pool.free(pkt);
    }
}

impl<B: PacketBuf, F: FnMut(usize, Nanos, &B)> Sink<B> for F {
    fn emit(&mut self, port_idx: usize, ts: Nanos, pkt: &B) {
        self(port_idx, ts, pkt)
    }
}

/// Frames waiting to arrive, in arrival order.
pub trait InputSource {
    /// Arrival time of the next frame (a reading source may read ahead to learn it).
    fn peek_ts(&mut self) -> Option<Nanos>;
    /// Take the next frame: (ingress port index, bytes).
    fn next_frame(&mut self) -> Option<(usize, &[u8])>;

    /// Whether the frames are owned `Vec`s the driver may take ([`InputSource::next_frame_vec`]
    /// instead of [`InputSource::next_frame`]): the [`Harness`]'s, which the packet buffer
    /// adopts without a copy ([`BufPool::alloc_from_vec`]). Default: no.
    #[inline]
    fn owns_frames(&self) -> bool {
        false
    }

    /// As [`InputSource::next_frame`], the frame as a `Vec` the caller may take the allocation
    /// of (`mem::take`); asked only when [`InputSource::owns_frames`].
    fn next_frame_vec(&mut self) -> Option<(usize, &mut Vec<u8>)> {
        None
    }
}

/// Replay limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplayOptions {
    /// Stop at this virtual time even if the switch still has work (e.g. periodic timers).
    pub until: Option<Nanos>,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Input frames offered.
    pub offered: u64,
    /// Frames emitted on all ports.
    pub emitted: u64,
    /// Virtual time of the last event.
    pub end_ns: Nanos,
    /// Event steps taken.
    pub steps: u64,
    /// Stopped because `until` was reached with work left.
    pub truncated: bool,
    /// Stopped because the switch reported work at the same instant over and over without
    /// making progress (a bug in some `next_event`; never expected).
    pub stalled: bool,
}

/// Steps at one instant after which the driver declares a stall.
const MAX_STEPS_PER_INSTANT: u32 = 1_000_000;

/// The driver's own state between calls of [`advance`].
pub struct Driver<B> {
    now: Nanos,
    started: bool,
    same_instant: u32,
    burst: Vec<B>,
    out: Vec<B>,
    /// The switch's own next event when [`advance`] last returned (see
    /// [`Harness::advance_and_next`]).
    sw_next: Option<Nanos>,
    /// `Some(sw_next)`: the switch has not changed since [`advance`] returned it, so the next
    /// call starts from it instead of asking the switch (set by
    /// [`Harness::advance_and_next`] only; taken by the next call).
    known_next: Option<Option<Nanos>>,
    pub summary: ReplaySummary,
}

impl<B: PacketBuf> Default for Driver<B> {
    fn default() -> Self {
        Driver {
            now: 0,
            started: false,
            same_instant: 0,
            burst: Vec::with_capacity(BURST),
            out: Vec::with_capacity(BURST),
            sw_next: None,
            known_next: None,
            summary: ReplaySummary::default(),
        }
    }
}

impl<B: PacketBuf> Driver<B> {
    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }
}

/// Run the event loop until neither the inputs nor the switch have anything at or before
/// `until` (`None`: until both are idle). Returns with `driver.now()` at the last event handled.
///
/// Input frames that do not fit a pool buffer (or arrive when the pool is empty) are counted as
/// `pool_empty` drops. A timestamp that goes backwards is taken as "now": capture order wins, a
/// capture is never reordered.
pub fn advance<P, L, A, I, S>(
    d: &mut Driver<P::Buf>,
    sw: &mut Switch<P, L, A>,
    inputs: &mut I,
    until: Option<Nanos>,
    sink: &mut S,
) where
    P: BufPool,
    L: Pipeline<P>,
    A: Admission,
    I: InputSource + ?Sized,
    S: Sink<P::Buf>,
{
    if !d.started {
        if let Some(t) = inputs.peek_ts() {
            d.now = t;
        }
        d.started = true;
    }
    loop {
        // The emulator's switches take one step per call, so the value it already has saves
        // half of the (port-scanning) `next_event` calls.
        let sw_next = match d.known_next.take() {
            Some(n) => {
                debug_assert_eq!(n, sw.next_event(d.now), "a stale next event at {}", d.now);
                n
            }
            None => sw.next_event(d.now),
        };
        d.sw_next = sw_next;
        let t = match (inputs.peek_ts(), sw_next) {
            (None, None) => break,
            (Some(a), None) | (None, Some(a)) => a,
            (Some(a), Some(b)) => a.min(b),
        };
        if until.is_some_and(|u| t > u) {
            d.summary.truncated = true;
            break;
        }
        if t <= d.now && d.summary.steps > 0 {
            d.same_instant += 1;
            if d.same_instant > MAX_STEPS_PER_INSTANT {
                d.summary.stalled = true;
                break;
            }
        } else {
            d.same_instant = 0;
        }
        d.summary.truncated = false;
        let now = d.now.max(t);
        d.now = now;
        d.summary.steps += 1;

        // 0. Control commands due by now (before the packets of this instant: a command takes
        // effect on the next packets and not before).
        if sw.commands_pending() {
            sw.apply_commands(now, || now);
        } else {
            // Debug builds (every test that drives a switch) make the call skipped and check
            // that it did nothing.
            #[cfg(debug_assertions)]
            {
                let n = sw.apply_commands(now, || now);
                assert!(
                    n == 0 && !sw.commands_pending(),
                    "skipped commands at {now}"
                );
            }
        }

        // 1. Every input frame that has arrived by `now`, in bursts per port.
        let mut burst_port = usize::MAX;
        while inputs.peek_ts().is_some_and(|ts| ts <= now) {
            // A frame of another port, or a full burst, sends the burst so far first.
            let mut next_port = |port: usize, sw: &mut Switch<P, L, A>, d: &mut Driver<P::Buf>| {
                d.summary.offered += 1;
                if (port != burst_port || d.burst.len() == BURST) && !d.burst.is_empty() {
                    sw.receive_burst(burst_port, now, &mut d.burst);
                }
                burst_port = port;
            };
            let buf = if inputs.owns_frames() {
                let Some((port, frame)) = inputs.next_frame_vec() else {
                    break;
                };
                next_port(port, sw, d);
                sw.pool().alloc_from_vec(frame)
            } else {
                let Some((port, bytes)) = inputs.next_frame() else {
                    break;
                };
                next_port(port, sw, d);
                sw.pool().alloc_from(bytes)
            };
            match buf {
                Some(b) => d.burst.push(b),
                None => sw.note_drop(DropReason::PoolEmpty),
            }
        }
        if !d.burst.is_empty() {
            sw.receive_burst(burst_port, now, &mut d.burst);
        }

        // 2. Time-driven work.
        sw.poll(now);

        // 3. Transmit what can start by now.
        transmit_due(d, sw, now, sink);
        d.summary.end_ns = now;
    }
}

/// A step's transmissions: every frame of every port that can start by `now`, to `sink`. A
/// port's transmission may release PFC state that sends a frame on a port already visited; the
/// next step (at the same `now`) sends it. A port whose link is busy past `now` is not asked
/// ([`Switch::next_port_to_transmit`]: it would send nothing and change nothing).
#[inline(always)]
fn transmit_due<P, L, A, S>(
    d: &mut Driver<P::Buf>,
    sw: &mut Switch<P, L, A>,
    now: Nanos,
    sink: &mut S,
) where
    P: BufPool,
    L: Pipeline<P>,
    A: Admission,
    S: Sink<P::Buf>,
{
    let mut from = 0;
    while let Some(idx) = sw.next_port_to_transmit(from, now) {
        from = idx + 1;
        loop {
            let out = &mut d.out;
            let n = sw.transmit(idx, now, BURST, &mut |p| out.push(p));
            // In transmission order, without a `Drain` (which the compiler leaves out of
            // line here, about 50 instructions per frame of a replay).
            d.out.reverse();
            while let Some(p) = d.out.pop() {
                sink.emit_owned(idx, now, p, sw.pool());
                d.summary.emitted += 1;
            }
            if n < BURST {
                break;
            }
        }
    }
}

/// Pcap records of several ports merged by timestamp (ties: lower input index first).
struct Merged<'a> {
    inputs: &'a [(usize, &'a [PcapRecord])],
    cursor: Vec<usize>,
}

impl Merged<'_> {
    fn best(&self) -> Option<(usize, Nanos)> {
        let mut best: Option<(usize, Nanos)> = None;
        for (k, (_, recs)) in self.inputs.iter().enumerate() {
            if let Some(r) = recs.get(self.cursor[k]) {
                if best.is_none_or(|(_, t)| r.ts_ns < t) {
                    best = Some((k, r.ts_ns));
                }
            }
        }
        best
    }
}

impl InputSource for Merged<'_> {
    fn peek_ts(&mut self) -> Option<Nanos> {
        self.best().map(|(_, t)| t)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        let (k, _) = self.best()?;
        let (port, recs) = self.inputs[k];
        let rec = recs.get(self.cursor[k])?;
        self.cursor[k] += 1;
        Some((port, &rec.data))
    }
}

/// Replay `inputs` (port index, its frames in capture order) through `sw`, sending every frame
/// the switch transmits to `sink`.
pub fn run<P, L, A, S>(
    sw: &mut Switch<P, L, A>,
    inputs: &[(usize, &[PcapRecord])],
    opts: ReplayOptions,
    sink: &mut S,
) -> ReplaySummary
where
    P: BufPool,
    L: Pipeline<P>,
    A: Admission,
    S: Sink<P::Buf>,
{
    let mut src = Merged {
        inputs,
        cursor: vec![0; inputs.len()],
    };
    let mut d = Driver::default();
    advance(&mut d, sw, &mut src, opts.until, sink);
    d.summary
}

/// Timestamped frames read one at a time (a pcap file being read, records in memory), in two
/// steps so that several sources can be merged by timestamp without copying frames aside.
pub trait FrameSource {
    /// The next frame's timestamp (`None` at the end); asking again before [`FrameSource::take`]
    /// gives the same answer. After an error the source is at its end.
    fn peek(&mut self) -> io::Result<Option<Nanos>>;
    /// The frame [`FrameSource::peek`] announced, consumed; valid until the next call on the
    /// source.
    fn take(&mut self) -> io::Result<&[u8]>;
}

impl<R: BufRead> FrameSource for PcapReader<R> {
    fn peek(&mut self) -> io::Result<Option<Nanos>> {
        PcapReader::peek_record(self)
    }
    fn take(&mut self) -> io::Result<&[u8]> {
        PcapReader::take_frame(self)
    }
}

/// Records held in memory, as a [`FrameSource`].
pub struct Records {
    rest: std::vec::IntoIter<PcapRecord>,
    next: Option<PcapRecord>,
    taken: Vec<u8>,
}

impl Records {
    pub fn new(records: Vec<PcapRecord>) -> Self {
        Records {
            rest: records.into_iter(),
            next: None,
            taken: Vec::new(),
        }
    }
}

impl FrameSource for Records {
    fn peek(&mut self) -> io::Result<Option<Nanos>> {
        if self.next.is_none() {
            self.next = self.rest.next();
        }
        Ok(self.next.as_ref().map(|r| r.ts_ns))
    }
    fn take(&mut self) -> io::Result<&[u8]> {
        self.taken = self.next.take().map(|r| r.data).unwrap_or_default();
        Ok(&self.taken)
    }
}

/// One input of [`Streams`]: its port, its source, and its next frame's timestamp (`stale`: not
/// asked since the last frame was taken).
struct Stream<'a> {
    port: usize,
    src: Box<dyn FrameSource + 'a>,
    next: Option<Nanos>,
    stale: bool,
}

/// Several [`FrameSource`]s merged by timestamp (ties: the input listed first), each read one
/// record header ahead: memory is the sources' own buffers whatever the inputs' sizes, and a
/// frame goes from a source's buffer into the switch's packet buffer with one copy. A read error
/// ends that input; [`Streams::error`] then names it (input index and the error), and the caller
/// reports the replay as failed.
pub struct Streams<'a> {
    inputs: Vec<Stream<'a>>,
    /// The input whose frame comes next, and its timestamp; known while `!dirty`.
    head: Option<(usize, Nanos)>,
    /// A frame was taken since `head` was found.
    dirty: bool,
    error: Option<(usize, io::Error)>,
    /// Frames handed out, and the first one's timestamp.
    pub taken_frames: u64,
    pub first_ts: Option<Nanos>,
}

impl<'a> Streams<'a> {
    /// Inputs as (port index, source), in priority order for equal timestamps.
    pub fn new(inputs: Vec<(usize, Box<dyn FrameSource + 'a>)>) -> Self {
        Streams {
            inputs: inputs
                .into_iter()
                .map(|(port, src)| Stream {
                    port,
                    src,
                    next: None,
                    stale: true,
                })
                .collect(),
            head: None,
            dirty: true,
            error: None,
            taken_frames: 0,
            first_ts: None,
        }
    }

    /// The input whose frame comes next and its timestamp, reading the next record header of
    /// every input whose frame was taken since the last call.
    #[inline]
    fn head(&mut self) -> Option<(usize, Nanos)> {
        if self.dirty {
            self.find_head();
        }
        self.head
    }

    /// [`Streams::head`]'s reading part (out of line: the answer is usually known).
    #[inline(never)]
    fn find_head(&mut self) {
        self.dirty = false;
        let mut best: Option<(usize, Nanos)> = None;
        for (k, st) in self.inputs.iter_mut().enumerate() {
            if st.stale {
                st.stale = false;
                st.next = match st.src.peek() {
                    Ok(t) => t,
                    Err(e) => {
                        self.error.get_or_insert((k, e));
                        None
                    }
                };
            }
            if let Some(t) = st.next {
                if best.is_none_or(|(_, b)| t < b) {
                    best = Some((k, t));
                }
            }
        }
        self.head = best;
    }

    /// The first read error: (input index, error).
    pub fn error(&self) -> Option<(usize, &io::Error)> {
        self.error.as_ref().map(|(k, e)| (*k, e))
    }
}

impl InputSource for Streams<'_> {
    #[inline]
    fn peek_ts(&mut self) -> Option<Nanos> {
        self.head().map(|(_, t)| t)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        let (k, ts) = self.head()?;
        self.taken_frames += 1;
        self.first_ts.get_or_insert(ts);
        self.dirty = true;
        let st = &mut self.inputs[k];
        st.stale = true;
        st.next = None;
        let port = st.port;
        match st.src.take() {
            Ok(frame) => Some((port, frame)),
            Err(e) => {
                // The source is at its end after an error (FrameSource::peek).
                self.error.get_or_insert((k, e));
                None
            }
        }
    }
}

/// Replay what `src` yields through `sw`, sending every frame the switch transmits to `sink`.
pub fn run_streams<P, L, A, I, S>(
    sw: &mut Switch<P, L, A>,
    src: &mut I,
    opts: ReplayOptions,
    sink: &mut S,
) -> ReplaySummary
where
    P: BufPool,
    L: Pipeline<P>,
    A: Admission,
    I: InputSource,
    S: Sink<P::Buf>,
{
    let mut d = Driver::default();
    advance(&mut d, sw, src, opts.until, sink);
    d.summary
}
