//! Transmit: what each port hands to its driver, the egress stage, and the release of the
//! bytes the admission stages accounted.

use super::*;

/// The PFC-accounted frames of one (ingress port id, class, bytes) that left in a row and are
/// not yet released ([`Switch::transmit_bypassed`]).
#[derive(Default)]
struct ReleaseRun(Option<(u16, u8, u64)>);

impl ReleaseRun {
    /// Add a leaving frame: the run it ended, if any, to be released now.
    #[inline(always)]
    fn add(&mut self, m: &Meta, len: u64) -> Option<(u16, u8, u64)> {
        if m.flags & FLAG_PFC_ACCOUNTED == 0 {
            return None;
        }
        match self.0.as_mut() {
            Some(r) if r.0 == m.ingress_port && r.1 == m.class => {
                r.2 += len;
                None
            }
            _ => self.0.replace((m.ingress_port, m.class, len)),
        }
    }
}

impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// The first port index `from` or later that [`Switch::port_has_frames`], if any: one scan
    /// of the ports for a driver that visits those with frames in order (the replay driver
    /// asked port by port, a bounds check and a call's worth more per port and step).
    #[inline]
    pub fn next_port_with_frames(&self, from: usize) -> Option<usize> {
        let next = self
            .st
            .ports
            .get(from..)?
            .iter()
            .position(|p| !p.ready.is_empty() || !p.tm.is_empty())
            .map(|k| from + k);
        #[cfg(debug_assertions)]
        assert_eq!(
            next,
            (from..self.st.ports.len()).find(|&i| self.port_has_frames(i)),
            "next_port_with_frames({from})"
        );
        next
    }

    /// As [`Switch::next_port_with_frames`], leaving out the ports whose link is busy past
    /// `now` with nothing past the bypass: [`Switch::transmit`] at `now` would hand over
    /// nothing there and change nothing (the traffic manager's dequeue returns before looking
    /// at a queue while the link is busy), so a driver's transmit stage need not ask. A port
    /// whose link is free is found even if its queues cannot send (paused, held): asking its
    /// scheduler may change its state (a deficit round), as the driver always did. In the
    /// emulator a long link's port is usually busy with frames queued: a step's call for it
    /// was about 150 instructions for nothing.
    #[inline]
    pub fn next_port_to_transmit(&self, from: usize, now: Nanos) -> Option<usize> {
        let ports = self.st.ports.get(from..)?;
        for (k, p) in ports.iter().enumerate() {
            if !p.ready.is_empty() || (!p.tm.is_empty() && p.tm.busy_until() <= now) {
                return Some(from + k);
            }
            // What is left out has nothing to send by `now`.
            debug_assert!(
                p.tm.is_empty() || p.tm.next_event(now).is_none_or(|t| t > now),
                "a port left out with frames due at {now}"
            );
        }
        None
    }

    /// Whether port `idx` has frames waiting to be sent (queued, or past the empty-queue bypass).
    #[inline]
    pub fn port_has_frames(&self, idx: usize) -> bool {
        self.st
            .ports
            .get(idx)
            .is_some_and(|p| !p.ready.is_empty() || !p.tm.is_empty())
    }

    /// Hand every packet of port `idx` whose transmission starts at or before `now` to `tx`
    /// (at most `max` packets). Returns how many were handed over.
    pub fn transmit(
        &mut self,
        idx: usize,
        now: Nanos,
        max: usize,
        tx: &mut impl FnMut(P::Buf),
    ) -> usize {
        let mut n = self.transmit_bypassed(idx, now, max, tx);
        while n < max {
            let Some(port) = self.st.ports.get_mut(idx) else {
                return n;
            };
            let id = port.info.id;
            let Some(mut pkt) = port.ready.pop_front().or_else(|| port.tm.dequeue(now)) else {
                break;
            };
            let len = pkt.len() as u64;
            let data = pkt.meta().flags & FLAG_CONTROL == 0;
            if data {
                self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(len);
                self.release_pfc(now, &pkt);
            }
            if data && self.pipeline.egress_active_on(id) {
                let mut ctx = ctx!(self, now);
                let action = self.pipeline.egress(&mut ctx, &mut pkt);
                if action != Action::Forward {
                    let r = match action {
                        Action::Drop(r) => r,
                        _ => DropReason::Pipeline,
                    };
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                    self.send_pfc_actions(now);
                    self.flush_emitted(now);
                    continue;
                }
            }
            // An egress stage may have grown or shrunk the frame (INT): the wire time and the
            // port's bytes are those of what is sent.
            let sent = pkt.len() as u64;
            let port = &mut self.st.ports[idx];
            if sent != len {
                port.tm.resize_tx(len, sent);
            }
            let st = &mut port.stats;
            st.tx_pkts += 1;
            st.tx_bytes += sent;
            tx(pkt);
            n += 1;
            self.send_pfc_actions(now);
            self.flush_emitted(now);
        }
        n
    }

    /// The bypassed frames of port `idx` (at most `max`) as one burst: what
    /// [`transmit`](Self::transmit)'s loop does with them one at a time, with the per-frame
    /// bookkeeping done once for the burst. The port's counters take the burst's sums; the
    /// admission stages get back the bytes of each run of frames of one (ingress port, class) in one
    /// call, and the PFC frames that release causes are queued when the run ends, before
    /// anything an egress stage emitted is enqueued, or after the burst. Same result as frame by
    /// frame: the counts only fall, an XON is due at the same `now` whatever the steps, a PFC
    /// frame queued on this port's control queue leaves after the bypassed frames either way
    /// (they go first, [`PortState::ready`]), and an emitted frame meets the control queues as
    /// it would. Only an accounting underflow (never expected) is counted once per run instead
    /// of once per frame. Frames the egress stage drops are not counted in the result, as in
    /// `transmit`.
    pub(super) fn transmit_bypassed(
        &mut self,
        idx: usize,
        now: Nanos,
        max: usize,
        tx: &mut impl FnMut(P::Buf),
    ) -> usize {
        let Some(port) = self.st.ports.get(idx) else {
            return 0;
        };
        let k = port.ready.len().min(max);
        if k == 0 {
            return 0;
        }
        let egress = self.pipeline.egress_active_on(port.info.id);
        let mut bytes = 0u64;
        let mut run = ReleaseRun::default();
        let mut sent = 0usize;
        if !egress {
            // No egress stage: nothing is emitted and nothing dropped here, so the shared buffer
            // takes the burst's sum too.
            let mut data_bytes = 0u64;
            for _ in 0..k {
                let Some(pkt) = self.st.ports[idx].ready.pop_front() else {
                    break;
                };
                let len = pkt.len() as u64;
                let m = pkt.meta();
                bytes += len;
                if m.flags & FLAG_CONTROL == 0 {
                    data_bytes += len;
                    if let Some((i, c, b)) = run.add(m, len) {
                        self.release_pfc_bytes(now, i, c, b);
                        self.send_pfc_actions(now);
                    }
                }
                tx(pkt);
                sent += 1;
            }
            self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(data_bytes);
        } else {
            for _ in 0..k {
                let Some(mut pkt) = self.st.ports[idx].ready.pop_front() else {
                    break;
                };
                let len = pkt.len() as u64;
                let m = pkt.meta();
                if m.flags & FLAG_CONTROL != 0 {
                    bytes += len;
                    tx(pkt);
                    sent += 1;
                    continue;
                }
                // Before egress, as `transmit` does: what it emits meets the buffer as it is.
                self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(len);
                if let Some((i, c, b)) = run.add(m, len) {
                    self.release_pfc_bytes(now, i, c, b);
                    self.send_pfc_actions(now);
                }
                let action = {
                    let mut ctx = ctx!(self, now);
                    self.pipeline.egress(&mut ctx, &mut pkt)
                };
                if action == Action::Forward {
                    // An egress stage may have grown or shrunk the frame (INT): the wire time
                    // and the port's bytes are those of what is sent.
                    let out = pkt.len() as u64;
                    if out != len {
                        self.st.ports[idx].tm.resize_tx(len, out);
                    }
                    bytes += out;
                    tx(pkt);
                    sent += 1;
                } else {
                    let r = match action {
                        Action::Drop(r) => r,
                        _ => DropReason::Pipeline,
                    };
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                }
                if !self.st.emitted.is_empty() {
                    if let Some((i, c, b)) = run.0.take() {
                        self.release_pfc_bytes(now, i, c, b);
                    }
                    self.send_pfc_actions(now);
                    self.flush_emitted_slow(now);
                }
            }
        }
        let st = &mut self.st.ports[idx].stats;
        st.tx_pkts += sent as u64;
        st.tx_bytes += bytes;
        if let Some((i, c, b)) = run.0 {
            self.release_pfc_bytes(now, i, c, b);
        }
        self.send_pfc_actions(now);
        sent
    }
}
