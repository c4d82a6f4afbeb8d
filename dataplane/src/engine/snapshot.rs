//! Snapshots: a copy of every counter of a switch ([`SwitchSnapshot`]), the merge of several
//! workers', and what the switch tells a driver of itself (its next event, its ledger, what it
//! holds).

use super::*;

/// One port in a [`SwitchSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    pub id: u16,
    pub name: String,
    pub stats: PortStats,
    /// Per class: the traffic manager's counters (depth, marks, drops).
    pub classes: [crate::tm::ClassStats; NUM_CLASSES],
}

/// A copy of every counter of a switch, taken by its worker and read by the control thread
/// (DESIGN.md section 7: per-lcore counters published periodically). `Switch::snapshot_into`
/// reuses the snapshot's memory, so publishing does not allocate after the first time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchSnapshot {
    /// Engine time of the snapshot.
    pub taken_at: Nanos,
    pub ports: Vec<PortSnapshot>,
    pub stats: SwitchStats,
    pub control: ControlStats,
    pub pfc: Option<crate::asic::pfc::PfcGenStats>,
    /// The counters of the admission stages a mechanism adds ([`Admission::snapshot_into`]),
    /// by type.
    pub admission: Extensions,
    pub pipeline: Vec<(&'static str, u64)>,
    pub tables: Vec<(&'static str, TableCounters)>,
    /// (occupancy, capacity) of the command ring and the punt ring.
    pub command_ring: (usize, usize),
    pub punt_ring: (usize, usize),
    /// Bytes the pipeline holds in its own queues ([`Pipeline::held_bytes`]: per-flow queues).
    pub held_bytes: u64,
    /// Frames inside the switch ([`Switch::buffered_packets`]).
    pub queued_pkts: u64,
    /// Live runs: the worker's loop iterations so far (its progress, for `/health` and
    /// `longhaul_worker_loops_total`); 0 elsewhere.
    pub loops: u64,
    /// Live runs: the port I/O's own counters, by port index (what the files, rings or NICs
    /// took: `rx_nobuf`, `rx_errors`, `tx_errors`); empty elsewhere.
    pub io: Vec<crate::port::PortIoStats>,
}

impl SwitchSnapshot {
    /// The ledger of the snapshot's switch (or of the workers merged into it).
    pub fn ledger(&self) -> Ledger {
        let (received, sent) = self.ports.iter().fold((0, 0), |(r, t), p| {
            (r + p.stats.rx_pkts, t + p.stats.tx_pkts)
        });
        self.stats.ledger(received, sent, self.queued_pkts)
    }
}

impl SwitchSnapshot {
    /// Add `o` (another worker's switch, same config) into this one: counters add up by port,
    /// class, name, table and admission stage; depths add (the workers' queues of one port
    /// together); peaks and table sizes take the larger (each worker holds a copy of every
    /// table); rings keep this worker's.
    pub fn merge(&mut self, o: &SwitchSnapshot) {
        self.taken_at = self.taken_at.max(o.taken_at);
        for (p, q) in self.ports.iter_mut().zip(o.ports.iter()) {
            p.stats.merge(&q.stats);
            for (x, y) in p.classes.iter_mut().zip(q.classes.iter()) {
                x.merge(y);
            }
        }
        self.held_bytes += o.held_bytes;
        self.queued_pkts += o.queued_pkts;
        self.loops += o.loops;
        if self.io.len() < o.io.len() {
            self.io
                .resize(o.io.len(), crate::port::PortIoStats::default());
        }
        for (a, b) in self.io.iter_mut().zip(o.io.iter()) {
            a.merge(b);
        }
        self.stats.merge(&o.stats);
        self.control.merge(&o.control);
        if let (Some(a), Some(b)) = (self.pfc.as_mut(), o.pfc.as_ref()) {
            a.merge(b);
        }
        self.admission.merge(&o.admission);
        for (name, v) in &o.pipeline {
            match self.pipeline.iter_mut().find(|(n, _)| n == name) {
                Some((_, x)) => *x += v,
                None => self.pipeline.push((name, *v)),
            }
        }
        for (name, t) in &o.tables {
            match self.tables.iter_mut().find(|(n, _)| n == name) {
                Some((_, x)) => x.merge(t),
                None => self.tables.push((name, *t)),
            }
        }
    }
}

impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// Copy every counter into `snap` (reusing its memory).
    pub fn snapshot_into(&self, now: Nanos, snap: &mut SwitchSnapshot) {
        snap.taken_at = now;
        if snap.ports.len() != self.st.ports.len() {
            snap.ports = self
                .st
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    id: p.info.id,
                    name: p.info.name.clone(),
                    ..PortSnapshot::default()
                })
                .collect();
        }
        for (s, p) in snap.ports.iter_mut().zip(self.st.ports.iter()) {
            s.stats = p.stats;
            for (c, cs) in s.classes.iter_mut().enumerate() {
                *cs = p.tm.class_stats(c as u8);
            }
        }
        snap.stats.clone_from(&self.st.stats);
        snap.control.clone_from(&self.st.ctl);
        A::snapshot_into(self.admission.as_ref(), snap);
        snap.pipeline.clear();
        self.pipeline
            .counters(&mut |n, v| snap.pipeline.push((n, v)));
        snap.tables.clear();
        self.pipeline.tables(&mut |n, t| snap.tables.push((n, t)));
        snap.command_ring = (
            self.channel.commands.len(),
            self.channel.commands.capacity(),
        );
        snap.punt_ring = (self.channel.punts.len(), self.channel.punts.capacity());
        snap.held_bytes = self.pipeline.held_bytes();
        snap.queued_pkts = self.buffered_packets();
    }

    /// The earliest time after which `poll` or `transmit` has work without new input.
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        self.next_event_parts(now, true, true)
    }

    /// [`Switch::next_event`] without its parts for the recirculation loop
    /// ([`Switch::recirc_next`]) and the pipeline's timer ([`Switch::pipeline_deadline`]):
    /// the ports, the admission stages' timers and the commands. A driver keeps it across recirculation passes
    /// that leave it as it was ([`Switch::recirc_pass`]); the minimum of the three is
    /// `next_event`.
    pub fn next_event_but_loop(&self, now: Nanos) -> Option<Nanos> {
        self.next_event_parts(now, false, false)
    }

    #[inline(always)]
    pub(super) fn next_event_parts(&self, now: Nanos, recirc: bool, timer: bool) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut take = |x: Option<Nanos>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        // Most ports are idle at most steps (the emulator asks at every one): an idle port
        // costs two emptiness checks, not a call into its traffic manager. A port with
        // bypassed frames is due now, the earliest its queues could be.
        for p in &self.st.ports {
            if !p.ready.is_empty() {
                take(Some(now));
            } else if !p.tm.is_empty() {
                take(p.tm.next_event(now));
            }
        }
        if recirc {
            take(self.recirc.as_ref().and_then(|r| r.next_ready()));
        }
        if let Some(a) = self.admission.as_ref() {
            take(a.next_deadline(Timer::Loop));
            take(a.next_deadline(Timer::Slot));
        }
        if timer {
            take(self.pipeline.next_deadline());
        }
        // A held command blocks the ring behind it (commands apply in order), so only its time
        // counts; otherwise queued commands (and punts for the inline control) are due now.
        match &self.held {
            Some(e) => take(Some(e.at)),
            None if !self.channel.commands.is_empty() => take(Some(now)),
            None => {}
        }
        if self.inline_control.is_some() && !self.channel.punts.is_empty() {
            take(Some(now));
        }
        t
    }

    /// Frame counts for packet conservation ([`crate::conservation`]): balanced whenever no
    /// frame was lost without a counter. Cheap (no allocation): tests check it after every step.
    pub fn ledger(&self) -> Ledger {
        let (received, sent) = self.st.ports.iter().fold((0, 0), |(r, t), p| {
            (r + p.stats.rx_pkts, t + p.stats.tx_pkts)
        });
        self.st
            .stats
            .ledger(received, sent, self.buffered_packets())
    }

    /// Packets held in egress queues (control frames included), bypassed frames not yet handed to
    /// `transmit`, the recirculation loop and the pipeline's own queues.
    pub fn buffered_packets(&self) -> u64 {
        let q: u64 = self
            .st
            .ports
            .iter()
            .map(|p| p.tm.queued_pkts() + p.ready.len() as u64)
            .sum();
        q + self.recirc.as_ref().map_or(0, |r| r.len() as u64) + self.pipeline.held_packets()
    }

    /// Packets in egress queues, the recirculation loop and the pipeline's own queues.
    pub fn buffered_bytes(&self) -> u64 {
        self.st.stats.buffer_bytes
            + self.recirc.as_ref().map_or(0, |r| r.bytes())
            + self.pipeline.held_bytes()
    }
}
