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
//! bounded memory: `longhaul replay`), and [`Harness`] lets a test put packets on ports at given
//! times, advance time and collect what each port emitted.

use crate::asic::pfc::PfcGenerator;
use crate::counters::DropReason;
use crate::engine::{Admission, Pipeline, Switch};
use crate::packet::{BufPool, PacketBuf};
use crate::pcap::{PcapReader, PcapRecord};
use crate::time::{earlier, Nanos};
use std::collections::VecDeque;
use std::io::{self, BufRead};

/// Packets are handed to the switch in bursts of at most this many (as an rx burst would).
pub use crate::port::BURST;

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
            sw.apply_commands(now, now);
        } else {
            // Debug builds (every test that drives a switch) make the call skipped and check
            // that it did nothing.
            #[cfg(debug_assertions)]
            {
                let n = sw.apply_commands(now, now);
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

/// Scripted input for [`Harness`]: frames kept sorted by (time, insertion order).
#[derive(Default)]
struct Script {
    q: VecDeque<(Nanos, u64, usize, Vec<u8>)>,
    seq: u64,
    /// The frame taken last; its allocation is usually adopted by the switch's packet buffer
    /// ([`BufPool::alloc_from_vec`]) and comes back with the frame when the switch emits it.
    taken: Vec<u8>,
    /// The allocations of frames taken but not adopted (a pool that copies, a frame refused),
    /// kept for the frames the switch makes ([`Harness::drive`] moves them to the spare
    /// frames after each run).
    used: Vec<Vec<u8>>,
}

impl InputSource for Script {
    fn peek_ts(&mut self) -> Option<Nanos> {
        self.q.front().map(|e| e.0)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        self.next_frame_vec().map(|(port, v)| (port, &v[..]))
    }
    #[inline]
    fn owns_frames(&self) -> bool {
        true
    }
    fn next_frame_vec(&mut self) -> Option<(usize, &mut Vec<u8>)> {
        let (_, _, port, bytes) = self.q.pop_front()?;
        // The frame before, unless the switch adopted its allocation.
        let old = std::mem::replace(&mut self.taken, bytes);
        if old.capacity() > 0 {
            self.used.push(old);
        }
        Some((port, &mut self.taken))
    }
}

/// The [`Harness`]'s sink: an emitted frame the switch's buffer adopted comes back as its own
/// allocation; any other (a frame the switch made, a pool that copies) is copied into a
/// recycled one.
struct Collect<'a> {
    emitted: &'a mut Vec<Emitted>,
    spare: &'a mut FramePool,
}

impl<B: PacketBuf> Sink<B> for Collect<'_> {
    fn emit(&mut self, port_idx: usize, ts: Nanos, p: &B) {
        let mut data = self.spare.get();
        data.extend_from_slice(p.data());
        self.emitted.push(Emitted {
            port_idx,
            ts,
            data,
            meta: *p.meta(),
        })
    }
    #[inline]
    fn emit_owned<P: BufPool<Buf = B>>(
        &mut self,
        port_idx: usize,
        ts: Nanos,
        pkt: B,
        pool: &mut P,
    ) {
        let meta = *pkt.meta();
        match pool.free_to_vec(pkt) {
            Ok(data) => self.emitted.push(Emitted {
                port_idx,
                ts,
                data,
                meta,
            }),
            Err(pkt) => {
                self.emit(port_idx, ts, &pkt);
                pool.free(pkt);
            }
        }
    }
}

/// A frame a port emitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emitted {
    pub port_idx: usize,
    pub ts: Nanos,
    pub data: Vec<u8>,
    pub meta: crate::packet::Meta,
}

/// A switch on virtual time for tests: put frames on ports at given times, advance, collect.
pub struct Harness<P: BufPool, L: Pipeline<P>, A: Admission = PfcGenerator> {
    pub sw: Switch<P, L, A>,
    driver: Driver<P::Buf>,
    script: Script,
    emitted: Vec<Emitted>,
    /// Empty frame buffers the emitted frames are copied into (see [`Script::used`]).
    spare: FramePool,
    /// The switch's next event without its loop's and its pipeline's timer
    /// ([`Switch::next_event_but_loop`]) as the last step found it, kept across the steps
    /// [`Harness::loop_step`] took since (each left it as it was); `None`: not known.
    others: Option<Option<Nanos>>,
    /// Whether [`Harness::advance_and_next_with`] takes the steps in which only the loop is
    /// due by [`Harness::loop_step`] (on by default; off, every step is the driver's: the same
    /// run, more slowly: the emulator's tests compare the two).
    loop_steps: bool,
}

/// Frame buffers for reuse: a frame taken in becomes the next frame made, so a simulated hop
/// allocates nothing. The [`Harness`] keeps one for what its switch emits; the emulator keeps
/// one for what its hosts build.
#[derive(Debug, Default)]
pub struct FramePool(Vec<Vec<u8>>);

/// At most this many buffers wait in a [`FramePool`] (one whose owner drops or consumes more
/// than it makes would otherwise collect them all).
const MAX_POOLED: usize = 1024;

impl FramePool {
    /// An empty buffer (recycled when one is there).
    pub fn get(&mut self) -> Vec<u8> {
        let mut v = self.0.pop().unwrap_or_default();
        v.clear();
        v
    }

    /// Give back a buffer no longer needed.
    pub fn put(&mut self, v: Vec<u8>) {
        if self.0.len() < MAX_POOLED && v.capacity() > 0 {
            self.0.push(v);
        }
    }
}

impl<P: BufPool, L: Pipeline<P>, A: Admission> Harness<P, L, A> {
    pub fn new(sw: Switch<P, L, A>) -> Self {
        Harness {
            sw,
            driver: Driver::default(),
            script: Script::default(),
            emitted: Vec::new(),
            spare: FramePool::default(),
            others: None,
            loop_steps: true,
        }
    }

    /// Whether the steps in which only the recirculation loop is due are taken without the
    /// driver's step around them ([`Harness::loop_step`]); on by default.
    pub fn set_loop_steps(&mut self, on: bool) {
        self.loop_steps = on;
    }

    /// Frame `bytes` arrives on port index `port_idx` at time `ts` (not before the current time).
    pub fn put(&mut self, port_idx: usize, ts: Nanos, bytes: &[u8]) {
        self.put_owned(port_idx, ts, bytes.to_vec())
    }

    /// As [`Harness::put`], taking the frame's buffer (the emulator's frames): a heap pool's
    /// packet buffer adopts it, and the frame comes back in the same allocation when the switch
    /// emits it ([`Emitted::data`]): no copy in or out.
    pub fn put_owned(&mut self, port_idx: usize, ts: Nanos, frame: Vec<u8>) {
        let ts = ts.max(self.driver.now);
        let seq = self.script.seq;
        self.script.seq += 1;
        let q = &mut self.script.q;
        // Frames usually come in time order (the emulator's): then the new one, with the
        // highest sequence number, goes last without a search.
        if q.back().is_none_or(|e| e.0 <= ts) {
            q.push_back((ts, seq, port_idx, frame));
        } else {
            let pos = q.partition_point(|e| (e.0, e.1) <= (ts, seq));
            q.insert(pos, (ts, seq, port_idx, frame));
        }
    }

    /// Run everything due at or before `t`.
    pub fn advance_to(&mut self, t: Nanos) {
        self.drive(Some(t));
        self.driver.now = self.driver.now.max(t);
    }

    /// As [`Harness::advance_to`], returning [`Harness::next_event`] afterwards without asking
    /// the switch again (the emulator's every step): the loop that stopped past `t` has just
    /// computed it. It stopped because every part of the switch's next event lay after `t`, and
    /// a part that depends on the time asked at (a queue's `max(now, busy_until)`, "now" for
    /// pending work) cannot lie after `t` unless it is the same at any time up to `t`; so the
    /// value asked at the last step's time is the value at `t`.
    ///
    /// The next run starts from that value too, without asking the switch: between two calls,
    /// change the switch only through this harness (`put`, `advance_to`), not through
    /// [`Harness::sw`] (debug builds check it).
    pub fn advance_and_next(&mut self, t: Nanos) -> Option<Nanos> {
        let mut spare = std::mem::take(&mut self.spare);
        let next = self.advance_and_next_with(t, &mut spare);
        self.spare = spare;
        next
    }

    /// As [`Harness::advance_and_next`], the frames the switch makes copied into buffers from
    /// `frames`, and the frames it did not adopt given to `frames` (the emulator's pool: the
    /// emulator's frames cross the switch in their own allocations, so the harness has no
    /// spare ones of its own).
    ///
    /// The packet conservation ledger is checked after each run in debug builds only: call
    /// [`Harness::check_ledger`] from time to time (its counters are cumulative, so a packet
    /// lost without a counter still shows at the end).
    pub fn advance_and_next_with(&mut self, t: Nanos, frames: &mut FramePool) -> Option<Nanos> {
        if self.loop_steps {
            while let Some(next) = self.loop_step(t, frames) {
                if next.is_none_or(|n| n > t) {
                    self.driver.now = self.driver.now.max(t);
                    debug_assert_eq!(next, self.next_event(), "the switch's next event at {t}");
                    return next;
                }
            }
        }
        self.drive_with(Some(t), frames, cfg!(debug_assertions));
        self.driver.now = self.driver.now.max(t);
        self.driver.known_next = Some(self.driver.sw_next);
        let next = earlier(self.script.q.front().map(|e| e.0), self.driver.sw_next);
        debug_assert_eq!(next, self.next_event(), "the switch's next event at {t}");
        next
    }

    /// The driver's next step ([`advance`] up to `t`) when only the recirculation loop is
    /// due in it, taken without the step around the loop's packets: a THEMIS throttled packet
    /// goes round the loop many times, and each pass was a whole step (the next event of every
    /// part of the switch asked again, the step's checks, the transmit scan) for one pass
    /// through the pipeline. Returns the next event ([`Harness::next_event`]) after the step;
    /// `None` when the step is not such a step (nothing taken: the driver takes it).
    ///
    /// Such a step: the switch is as the last call left it (the driver's known next event),
    /// its next event is the loop's next packet, by then no frame is put, no command is
    /// pending, and the other parts of the switch (ports, PFC, Bifrost, the pipeline's timer)
    /// are due later. The driver's step would apply no command, take no input, and in
    /// [`Switch::poll`] take the loop's packets due (each through ingress), then find nothing
    /// else due; this takes the packets one at a time ([`Switch::recirc_pass`]). Each pass
    /// tells whether it left the other parts as they were (the packet looped again, or was
    /// dropped, with nothing emitted or changed in a port); while they are, the value of
    /// [`Switch::next_event_but_loop`] found before still holds, and the next event is its
    /// minimum with the loop's next packet and the pipeline's timer, asked again. A pass that
    /// may have changed them gives the rest of the step to the driver's own code
    /// ([`Switch::poll`], which takes the rest of the loop's packets, and everything after
    /// it), and the next event is asked of the whole switch. The transmit stage runs as the
    /// driver's does (it finds nothing to send while the ports are due later, and is kept for
    /// exactness: a paused port's scheduler is asked). The step's bookkeeping (the steps, the
    /// stall count, the time) is the driver's. Debug builds check the kept value and the next
    /// event against the switch's at every step.
    fn loop_step(&mut self, t: Nanos, frames: &mut FramePool) -> Option<Option<Nanos>> {
        let d = &mut self.driver;
        let Some(Some(s)) = d.known_next else {
            return None;
        };
        if s > t || !d.started || self.sw.recirc_next() != Some(s) || self.sw.commands_pending() {
            return None;
        }
        let now = d.now.max(s);
        let same = s <= d.now && d.summary.steps > 0;
        if (same && d.same_instant >= MAX_STEPS_PER_INSTANT)
            || self.script.q.front().is_some_and(|e| e.0 <= now)
            || self.sw.pipeline_deadline().is_some_and(|p| p <= now)
        {
            return None;
        }
        let others = match self.others {
            Some(o) => {
                debug_assert!(
                    o.is_some_and(|o| o <= now) || o == self.sw.next_event_but_loop(now),
                    "a stale kept next event at {now}"
                );
                o
            }
            None => {
                let o = self.sw.next_event_but_loop(now);
                self.others = Some(o);
                o
            }
        };
        if others.is_some_and(|o| o <= now) {
            return None;
        }
        // The step, as `advance` takes it.
        d.known_next = None;
        d.same_instant = if same { d.same_instant + 1 } else { 0 };
        d.summary.truncated = false;
        d.now = now;
        d.summary.steps += 1;
        let mut kept = true;
        while let Some(k) = self.sw.recirc_pass(now) {
            if !k {
                kept = false;
                break;
            }
        }
        let mut sink = Collect {
            emitted: &mut self.emitted,
            spare: frames,
        };
        let sent = d.summary.emitted;
        if !kept
            || self.sw.commands_pending()
            || self.sw.pipeline_deadline().is_some_and(|p| p <= now)
        {
            // The rest of the step is the driver's.
            self.sw.poll(now);
            transmit_due(d, &mut self.sw, now, &mut sink);
            self.others = None;
            d.sw_next = self.sw.next_event(now);
        } else {
            // The rest of `poll` finds nothing due (PFC's and Bifrost's deadlines are in
            // `others`, the pipeline's timer was just asked).
            transmit_due(d, &mut self.sw, now, &mut sink);
            d.sw_next = if d.summary.emitted != sent {
                self.others = None;
                self.sw.next_event(now)
            } else {
                // Pairwise, not `[..].into_iter().flatten().min()`: that iterator is built on
                // the stack with 8-byte stores and read back with 16-byte loads, a store-
                // forwarding stall at every loop step.
                earlier(
                    earlier(others, self.sw.recirc_next()),
                    self.sw.pipeline_deadline(),
                )
            };
        }
        d.summary.end_ns = now;
        debug_assert_eq!(d.sw_next, self.sw.next_event(now), "the loop step at {now}");
        if cfg!(debug_assertions) {
            self.check_ledger();
        }
        let d = &mut self.driver;
        d.known_next = Some(d.sw_next);
        let next = earlier(self.script.q.front().map(|e| e.0), d.sw_next);
        d.summary.truncated = next.is_some();
        Some(next)
    }

    /// After [`Harness::advance_and_next_with`] (which returned `next`), when nothing else
    /// can happen before `limit` (the emulator: no frame arrives, no other switch or host
    /// acts, no sample is taken): `advance_and_next_with` again at each next event before
    /// `limit`, exactly the calls the emulator's loop would make, until one emits a frame
    /// (which the caller must send on before anything later happens). Returns the switch's
    /// next event and the time of the last call ([`Harness::now`]).
    ///
    /// A recirculation pass is such a call: THEMIS's throttled packets go round the loop
    /// several times, and each pass was an iteration of the emulator's loop of its own.
    pub fn advance_quiet_with(
        &mut self,
        mut next: Option<Nanos>,
        limit: Nanos,
        frames: &mut FramePool,
    ) -> (Option<Nanos>, Nanos) {
        while let Some(t) = next.filter(|&t| t < limit && self.emitted.is_empty()) {
            next = self.advance_and_next_with(t, frames);
        }
        (next, self.driver.now)
    }

    /// Run until the inputs are used up and the switch is idle.
    pub fn run_to_idle(&mut self) {
        self.drive(None);
    }

    fn drive(&mut self, until: Option<Nanos>) {
        let mut spare = std::mem::take(&mut self.spare);
        self.drive_with(until, &mut spare, true);
        self.spare = spare;
    }

    fn drive_with(&mut self, until: Option<Nanos>, spare: &mut FramePool, check: bool) {
        self.others = None;
        let mut sink = Collect {
            emitted: &mut self.emitted,
            spare,
        };
        advance(
            &mut self.driver,
            &mut self.sw,
            &mut self.script,
            until,
            &mut sink,
        );
        // The frames taken in this run and not adopted are the next run's emission buffers.
        for v in self.script.used.drain(..) {
            spare.put(v);
        }
        assert!(
            !self.driver.summary.stalled,
            "the switch stalled (a next_event bug)"
        );
        // Every test that drives a switch through the harness checks packet conservation.
        if check {
            self.check_ledger();
        }
    }

    /// Panics when the switch's packet conservation ledger does not balance (a packet lost or
    /// made without a counter).
    pub fn check_ledger(&self) {
        if let Err(e) = self.sw.ledger().check() {
            panic!("{e}");
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Nanos {
        self.driver.now
    }

    /// The next time something is due: a frame put on a port, or the switch's own next event
    /// (a queue that can transmit, a timer); `None` when idle.
    pub fn next_event(&self) -> Option<Nanos> {
        earlier(
            self.script.q.front().map(|e| e.0),
            self.sw.next_event(self.driver.now),
        )
    }

    /// Everything emitted so far (all ports, in emission order), taken out.
    pub fn take(&mut self) -> Vec<Emitted> {
        std::mem::take(&mut self.emitted)
    }

    /// As [`Harness::take`], appending to `out` (an empty `out` swaps buffers with this harness:
    /// no frame is moved).
    pub fn take_into(&mut self, out: &mut Vec<Emitted>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.emitted);
        } else {
            out.append(&mut self.emitted);
        }
    }

    /// What the driver did so far.
    pub fn summary(&self) -> ReplaySummary {
        self.driver.summary
    }
}
