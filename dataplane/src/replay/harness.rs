//! A switch on virtual time driven by hand ([`Harness`]): frames put on ports at given
//! times, time advanced, what each port emitted collected. The emulator's switches and the
//! tests' run on it.

use super::*;

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
