//! Receive: MAC control, the ingress pipeline over a burst, recirculation, the empty-queue
//! bypass runs and the enqueue on the egress traffic manager, and the time-driven work.

use super::*;

impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// Process a burst of packets received on port `idx` at `now`. The burst is drained (the
    /// vector keeps its capacity).
    ///
    /// Stage by stage over the burst: the port's counters and every packet's metadata in one
    /// pass, MAC control taken out, then (for a pipeline with [`Pipeline::BURST_INGRESS`]) its
    /// [`Pipeline::ingress_burst`] over up to [`BURST`] packets at a time, then admission and
    /// enqueue of each packet in order, each followed by what the pipeline emitted while
    /// handling it; otherwise ingress, admission and enqueue one packet at a time.
    pub fn receive_burst(&mut self, idx: usize, now: Nanos, burst: &mut Vec<P::Buf>) {
        let Some(port) = self.st.ports.get_mut(idx) else {
            for p in burst.drain(..) {
                self.st.stats.drops.inc(DropReason::BadPort);
                self.st.stats.arrived_dropped += 1;
                self.st.pool.free(p);
            }
            return;
        };
        let id = port.info.id;
        let mut bytes = 0u64;
        let mut mac_control = false;
        for pkt in burst.iter_mut() {
            // Reading the EtherType brings each frame's first cache line in, ahead of ingress.
            bytes += pkt.len() as u64;
            mac_control |= is_mac_control(pkt.data());
            let m = pkt.meta_mut();
            m.ingress_port = id;
            m.rx_ts = now;
        }
        port.stats.rx_pkts += burst.len() as u64;
        port.stats.rx_bytes += bytes;
        if mac_control {
            // Rare (a link partner's PFC or PAUSE): taken out in place, order kept.
            let mut i = 0;
            while i < burst.len() {
                if self.mac_control(idx, now, burst[i].data()) {
                    let p = burst.remove(i);
                    self.st.stats.consumed += 1;
                    self.st.pool.free(p);
                } else {
                    i += 1;
                }
            }
        }
        if !L::BURST_INGRESS {
            // One packet at a time through ingress and admission, what its ingress emitted or
            // released right after it; the frames to an idle port share its bypass run over the
            // burst, as burst ingress's frames do (the port's checks made once, its counters
            // added once). A run changes its port's link clock and ready frames as each frame
            // alone does, so what a stage reads of the traffic managers (depths, queued bytes)
            // is the same; what could change what a run checked closes it: a frame queued on
            // its port, a PFC frame (every run), [`Ctx::hold_queue`] and
            // [`Ctx::release_queue`] (the port's run).
            for mut pkt in burst.drain(..) {
                let action = {
                    let mut ctx = ctx!(self, now);
                    self.pipeline.ingress(&mut ctx, &mut pkt)
                };
                match action {
                    Action::Forward => self.enqueue_in(now, pkt, true),
                    Action::Release => self.enqueue_in(now, pkt, false),
                    _ => self.act(now, pkt, action),
                }
                if !self.st.emitted.is_empty() {
                    self.flush_emitted_open(now);
                }
            }
            self.close_runs();
            return;
        }
        let mut actions = [Action::Forward; BURST];
        while !burst.is_empty() {
            let n = burst.len().min(BURST);
            // The packets decided (all but when one must wait for the admission of those before
            // it), at least one.
            let n = {
                let mut ctx = ctx!(self, now);
                self.pipeline
                    .ingress_burst(&mut ctx, &mut burst[..n], &mut actions[..n])
                    .clamp(1, n)
            };
            // Admission over the burst: the frames to one idle port share one bypass run (the
            // port's checks made once, its counters added once), one run open per port, so that
            // frames spread over several ports (a ToR spraying packets) keep theirs; anything else that
            // could touch a traffic manager closes the runs first.
            for (i, (pkt, &action)) in burst.drain(..n).zip(actions.iter()).enumerate() {
                if action == Action::Forward {
                    self.enqueue_in(now, pkt, true);
                } else {
                    self.close_runs();
                    self.act(now, pkt, action);
                }
                if self.st.emit_owner.first().is_some_and(|&o| o <= i as u16) {
                    self.close_runs();
                    self.flush_emitted_upto_slow(now, i as u16);
                }
            }
            self.close_runs();
            // A pipeline that did not mark its packets leaves the rest here.
            self.flush_emitted(now);
        }
    }

    /// One received (or recirculated) packet through MAC control and the ingress pipeline.
    pub(super) fn receive_one(&mut self, idx: usize, now: Nanos, pkt: P::Buf) {
        self.receive_one_kept(idx, now, pkt);
    }

    /// [`receive_one`](Self::receive_one), telling whether the packet left untouched every
    /// part of the switch that [`Switch::next_event_but_loop`] reads: it went round the loop
    /// again, or was dropped or consumed, with nothing emitted, no PFC action, no egress queue
    /// held or released by the stage. (What the stage changed of its own state shows in
    /// [`Pipeline::next_deadline`], which the caller asks again.) `receive_one` ignores the
    /// answer (the compiler leaves its computation out there).
    #[inline(always)]
    pub(super) fn receive_one_kept(&mut self, idx: usize, now: Nanos, mut pkt: P::Buf) -> bool {
        if self.mac_control(idx, now, pkt.data()) {
            self.st.stats.consumed += 1;
            self.st.pool.free(pkt);
            return false;
        }
        let touches = self.st.tm_touches;
        let action = {
            let mut ctx = ctx!(self, now);
            self.pipeline.ingress(&mut ctx, &mut pkt)
        };
        let kept = matches!(
            action,
            Action::Recirculate | Action::Drop(_) | Action::Consume
        ) && self.st.emitted.is_empty()
            && self.st.tm_touches == touches
            && self.pfc_actions.is_empty();
        self.act(now, pkt, action);
        self.flush_emitted(now);
        kept
    }

    /// One packet back from the recirculation loop at `now`, if one is due: one turn of
    /// [`Switch::poll`]'s first loop (the packet through ingress as a received one). `None`:
    /// none is due. `Some(true)`: the pass changed nothing [`Switch::next_event_but_loop`]
    /// reads (see [`Switch::receive_one_kept`]), so a value of it asked before the pass still
    /// holds; `Some(false)`: it may have.
    ///
    /// For a virtual-time driver ([`crate::replay::Harness`]) that takes a step in which only
    /// the loop is due without the whole step around it; what is left of the step after such
    /// passes is [`Switch::poll`] (which takes the rest of the loop's packets due by `now`).
    #[inline]
    pub fn recirc_pass(&mut self, now: Nanos) -> Option<bool> {
        let pkt = self.recirc.as_mut()?.pop_ready(now)?;
        let Some((idx, pkt)) = self.recirc_ingress(pkt) else {
            return Some(false);
        };
        Some(self.receive_one_kept(idx, now, pkt))
    }

    /// A packet back from the recirculation loop, counted, with the index of the port it came
    /// in on (where it enters ingress again). `None` when the switch has no such port: the
    /// packet is dropped and counted as [`DropReason::BadPort`].
    #[inline]
    pub(super) fn recirc_ingress(&mut self, pkt: P::Buf) -> Option<(usize, P::Buf)> {
        self.st.stats.recirculated += 1;
        match self.port_idx(pkt.meta().ingress_port) {
            Some(idx) => Some((idx, pkt)),
            None => {
                self.st.stats.drops.inc(DropReason::BadPort);
                self.st.pool.free(pkt);
                None
            }
        }
    }

    /// When the recirculation loop's next packet is back ([`Switch::next_event`]'s part for
    /// the loop); `None`: empty or no loop.
    #[inline]
    pub fn recirc_next(&self) -> Option<Nanos> {
        self.recirc.as_ref().and_then(|r| r.next_ready())
    }

    /// The pipeline's next timer ([`Pipeline::next_deadline`]).
    #[inline]
    pub fn pipeline_deadline(&self) -> Option<Nanos> {
        self.pipeline.next_deadline()
    }

    /// Carry out the ingress pipeline's decision for a packet.
    #[inline(always)]
    pub(super) fn act(&mut self, now: Nanos, pkt: P::Buf, action: Action) {
        match action {
            Action::Forward => self.enqueue(now, pkt, true),
            Action::Release => self.enqueue(now, pkt, false),
            Action::Drop(r) => {
                self.st.stats.drops.inc(r);
                self.st.pool.free(pkt);
            }
            Action::Recirculate => self.recirculate(now, pkt),
            Action::Consume => {
                self.st.stats.consumed += 1;
                self.st.pool.free(pkt);
            }
            Action::Hold => {
                let mut ctx = ctx!(self, now);
                if let Err(pkt) = self.pipeline.hold(&mut ctx, pkt) {
                    self.st.stats.drops.inc(DropReason::Pipeline);
                    self.st.pool.free(pkt);
                }
            }
        }
    }

    /// 802.3 MAC control (EtherType 0x8808, untagged, as the standard requires): PFC and PAUSE
    /// are honored by this port's traffic manager and never forwarded. Returns true when the frame
    /// was MAC control (consumed).
    pub(super) fn mac_control(&mut self, idx: usize, now: Nanos, d: &[u8]) -> bool {
        if !is_mac_control(d) {
            return false;
        }
        let port = &mut self.st.ports[idx];
        match wpfc::parse(d) {
            Ok(wpfc::MacControl::Pfc { enable, times }) => {
                port.tm.on_pfc_received(enable, times, now);
                for c in 0..NUM_CLASSES {
                    if enable & (1 << c) != 0 {
                        port.stats.pfc_rx[c] += 1;
                    }
                }
            }
            Ok(wpfc::MacControl::Pause { time }) => {
                port.tm.on_pause_received(time, now);
                for c in port.stats.pfc_rx.iter_mut() {
                    *c += 1;
                }
            }
            Err(_) => port.stats.mac_control_other += 1,
        }
        true
    }

    /// Honor a PFC or PAUSE frame received on port `idx` by another switch (a reload's new
    /// switch, while this one drains its queues: the link's pauses apply to both). Counts the
    /// frame in `pfc_rx` only, not as received; `false` when `frame` is not MAC control.
    pub fn honor_mac_control(&mut self, idx: usize, now: Nanos, frame: &[u8]) -> bool {
        idx < self.st.ports.len() && self.mac_control(idx, now, frame)
    }

    pub(super) fn recirculate(&mut self, now: Nanos, pkt: P::Buf) {
        match self.recirc.as_mut() {
            Some(r) => {
                if let Err(p) = r.push(pkt, now) {
                    self.st.stats.drops.inc(DropReason::RecircFull);
                    self.st.pool.free(p);
                }
            }
            None => {
                self.st.stats.drops.inc(DropReason::Pipeline);
                self.st.pool.free(pkt);
            }
        }
    }

    #[inline(always)]
    pub(super) fn flush_emitted(&mut self, now: Nanos) {
        if !self.st.emitted.is_empty() {
            self.flush_emitted_slow(now);
        }
    }

    #[inline(never)]
    pub(super) fn flush_emitted_slow(&mut self, now: Nanos) {
        self.flush_emitted_open(now);
        self.close_runs();
    }

    /// [`flush_emitted_slow`](Self::flush_emitted_slow) leaving the bypass runs open.
    #[inline(never)]
    pub(super) fn flush_emitted_open(&mut self, now: Nanos) {
        // In the order emitted (a pipeline's held packets of one flow must not be reordered).
        // The list is moved out and back: no allocation, and `enqueue` never emits. Consecutive
        // frames to one idle port share a bypass run, as a received burst's do (the packets a
        // pipeline releases from its own queues, `Ctx::inject`, come here a poll's worth at a
        // time): the port's checks made once, its counters added once; admission stays per
        // frame.
        let mut list = core::mem::take(&mut self.st.emitted);
        for p in list.drain(..) {
            self.enqueue_in(now, p, false);
        }
        self.st.emitted = list;
        self.st.emit_owner.clear();
    }

    /// Enqueue what was emitted while handling the burst's packets `0..=i` (in emission order).
    /// The caller tests first that something is (`emit_owner`'s first entry at most `i`).
    #[inline(never)]
    pub(super) fn flush_emitted_upto_slow(&mut self, now: Nanos, i: u16) {
        let k = self.st.emit_owner.iter().take_while(|&&o| o <= i).count();
        let mut list = core::mem::take(&mut self.st.emitted);
        for p in list.drain(..k) {
            self.enqueue_in(now, p, false);
        }
        self.close_runs();
        self.st.emitted = list;
        self.st.emit_owner.drain(..k);
    }

    /// Admission (shared buffer, PFC headroom) and enqueue on the egress traffic manager.
    /// `account`: PFC-account the bytes to (ingress port, class) (received packets only).
    pub(super) fn enqueue(&mut self, now: Nanos, pkt: P::Buf, account: bool) {
        self.enqueue_in(now, pkt, account);
        self.close_runs();
    }

    /// Add every open bypass run's frames to its port's counters, and close it.
    #[inline]
    pub(super) fn close_runs(&mut self) {
        let mut m = core::mem::take(&mut self.open_low);
        while m != 0 {
            let e = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(port) = self.st.ports.get_mut(e) {
                Self::close_port_run(port);
            }
        }
        if !self.open_high.is_empty() {
            self.close_high_runs();
        }
    }

    #[inline(never)]
    pub(super) fn close_high_runs(&mut self) {
        for e in self.open_high.drain(..) {
            if let Some(port) = self.st.ports.get_mut(e) {
                Self::close_port_run(port);
                port.run_listed = false;
            }
        }
    }

    /// [`PortState::close_run`].
    #[inline]
    pub(super) fn close_port_run(port: &mut PortState<P::Buf>) {
        port.close_run();
    }

    /// [`enqueue`](Self::enqueue) within a burst's admission: a frame that finds its port idle
    /// takes the empty-queue bypass through the port's run (opened on the frame's queue if it is
    /// not yet; the port's run of another queue is closed first), so that the frames of a burst
    /// to one idle port are checked and counted as a run, also when frames to other ports come
    /// between them (a run checks and changes its own port's traffic manager only). Every other
    /// step is the same as for a frame alone; the port's run is closed before the port's
    /// traffic manager queues a frame, and every run before anything that could change what
    /// they checked (a PFC frame queued, [`Switch::close_runs`]).
    #[inline(always)]
    pub(super) fn enqueue_in(&mut self, now: Nanos, mut pkt: P::Buf, account: bool) {
        let m = *pkt.meta();
        let Some(e) = self.port_idx(m.egress_port) else {
            self.st.stats.drops.inc(DropReason::BadPort);
            self.st.pool.free(pkt);
            return;
        };
        let len = pkt.len() as u64;
        if len > self.st.ports[e].info.mtu as u64 {
            self.st.stats.drops.inc(DropReason::TooBig);
            self.st.pool.free(pkt);
            return;
        }
        if self.st.stats.buffer_bytes + len > self.shared_limit {
            self.st.stats.drops.inc(DropReason::QueueFull);
            self.st.pool.free(pkt);
            return;
        }
        let class = m.class.min(NUM_CLASSES as u8 - 1);
        pkt.meta_mut().class = class;
        let ingress = if account {
            self.port_idx(m.ingress_port)
        } else {
            None
        };
        if let (Some(a), Some(i)) = (self.admission.as_mut(), ingress) {
            match a.on_enqueue(i as u16, class, len, now, &mut self.pfc_actions) {
                None => {}
                Some(Admit::Accept) => pkt.meta_mut().flags |= FLAG_PFC_ACCOUNTED,
                Some(Admit::Drop(r)) => {
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                    self.send_pfc_actions_in(now);
                    return;
                }
            }
        }
        let queue = pkt.meta().egress_queue();
        let port = &mut self.st.ports[e];
        if port.run.as_ref().is_some_and(|r| r.queue() != queue) {
            Self::close_port_run(port);
        }
        let pkt = if port.ready.len() < BYPASS_RING {
            if port.run.is_none() {
                port.run = port.tm.open_run(queue, now);
                if port.run.is_some() {
                    if e < 64 {
                        self.open_low |= 1 << e;
                    } else if !port.run_listed {
                        port.run_listed = true;
                        self.open_high.push(e);
                    }
                }
            }
            match port.run.as_mut() {
                Some(r) => match port.tm.bypass_in_run(r, pkt, now) {
                    Ok(p) => {
                        match port.ready.push_back(p) {
                            Ok(()) => {
                                port.run_bypassed += 1;
                                self.st.stats.buffer_in(len);
                            }
                            // Unreachable (room checked above), but never lose a frame
                            // uncounted.
                            Err(p) => {
                                self.release_pfc(now, &p);
                                self.st.stats.drops.inc(DropReason::QueueFull);
                                self.st.pool.free(p);
                            }
                        }
                        self.send_pfc_actions_in(now);
                        return;
                    }
                    Err(p) => {
                        // The link is busy or the frame does not fit: it takes the queue, and
                        // the port is no longer idle.
                        Self::close_port_run(port);
                        p
                    }
                },
                None => pkt,
            }
        } else {
            pkt
        };
        // The frame is queued: the port's run still open (its bypassed frames fill the ring)
        // ends.
        let port = &mut self.st.ports[e];
        Self::close_port_run(port);
        match port.tm.enqueue(pkt, now) {
            Ok(_) => {
                self.st.stats.buffer_in(len);
            }
            Err((p, r)) => {
                self.release_pfc(now, &p);
                self.st.stats.drops.inc(r);
                self.st.pool.free(p);
            }
        }
        self.send_pfc_actions_in(now);
    }

    /// Time-driven work at `now`: recirculated packets coming back, PFC refreshes, pipeline timers.
    pub fn poll(&mut self, now: Nanos) {
        while let Some(pkt) = self.recirc.as_mut().and_then(|r| r.pop_ready(now)) {
            if let Some((idx, pkt)) = self.recirc_ingress(pkt) {
                self.receive_one(idx, now, pkt);
            }
        }
        if let Some(a) = self.admission.as_mut() {
            a.on_time(Timer::Loop, now, &mut self.pfc_actions);
            self.send_pfc_actions(now);
        }
        self.poll_slot_timer(now);
        if self.pipeline.next_deadline().is_some_and(|t| t <= now) {
            let mut ctx = ctx!(self, now);
            self.pipeline.on_time(&mut ctx);
            self.flush_emitted(now);
        }
    }

    /// Whether the switch has a slot timer (an admission stage's, [`Timer::Slot`]): a period of
    /// a few microseconds that a live worker checks between small chunks of its bursts
    /// ([`Switch::poll_slot_timer`]), not once per loop iteration.
    pub fn has_slot_timer(&self) -> bool {
        self.admission
            .as_ref()
            .is_some_and(|a| a.has_timer(Timer::Slot))
    }

    /// When the slot timer ([`Switch::has_slot_timer`]) is next due; `None` while it is
    /// disarmed (every governed pair at rest) or there is none.
    #[inline]
    pub fn slot_deadline(&self) -> Option<Nanos> {
        self.admission
            .as_ref()
            .and_then(|a| a.next_deadline(Timer::Slot))
    }

    /// The slot timer's work if it is due at `now` (its PFC frames queued for sending); the
    /// rest of [`Switch::poll`] is left for the next call of that. `now` must not go backwards.
    #[inline]
    pub fn poll_slot_timer(&mut self, now: Nanos) {
        if let Some(a) = self.admission.as_mut() {
            a.on_time(Timer::Slot, now, &mut self.pfc_actions);
            self.send_pfc_actions(now);
        }
    }
}
