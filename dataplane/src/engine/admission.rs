//! Admission: the buffer accounting of a packet's (ingress port, class) before the traffic
//! manager takes it, and the pause frames that accounting sends upstream.
//!
//! A switch runs one chain of [`Admission`] stages, a type ([`Chain`]) monomorphized into the
//! engine: for each packet the first stage whose (ingress port, class) pairs include the
//! packet's accounts it (and may refuse it), and the same stage gets its bytes back when it
//! leaves. Classic PFC (802.1Qbb XOFF/XON with headroom, [`PfcGenerator`]) is the dataplane's
//! own stage; a mechanism adds another (a pause-frame scheme of its own on the pairs it
//! governs) as a type at the chain's head in the registry and its parameters in
//! [`SwitchSpec::admission`] from its `extend_spec`.

use super::{Pipeline, Switch, SwitchSnapshot, SwitchSpec};
use crate::asic::pfc::{ActionBuf, Admit, PfcAction, PfcGenerator};
use crate::counters::{Counters, DropReason};
use crate::packet::{BufPool, PacketBuf, FLAG_CONTROL, FLAG_GENERATED, FLAG_PFC_ACCOUNTED};
use crate::time::Nanos;
use crate::wire::pfc as wpfc;
use core::any::Any;
use core::fmt;

/// The two kinds of timer an admission stage may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Looked at once per loop iteration ([`crate::engine::Switch::poll`]): PFC's XOFF
    /// refreshes.
    Loop,
    /// A slot timer: a period of a few microseconds that a live worker looks at between small
    /// chunks of its bursts ([`crate::engine::Switch::poll_slot_timer`]).
    Slot,
}

/// One admission stage, or a chain of them. Port arguments are port indices (the switch's
/// order), classes are below [`crate::packet::NUM_CLASSES`]. Every method is called on the
/// per-packet path or the loop's: no allocation, no panics.
pub trait Admission: Send + 'static {
    /// The stage of a switch built from `spec`; `None` when `spec` does not configure it.
    fn build(spec: &SwitchSpec) -> Option<Self>
    where
        Self: Sized;

    /// A packet of `len` bytes arrived on `port` in `class` at `now` and wants buffer space.
    /// `None`: the pair is not this stage's (the next stage is asked). Pause frames to send go
    /// to `actions`.
    fn on_enqueue(
        &mut self,
        port: u16,
        class: u8,
        len: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> Option<Admit>;

    /// `bytes` that this stage accounted to (`port`, `class`) left the buffer. `false`: the
    /// pair is not this stage's.
    fn on_dequeue(
        &mut self,
        port: u16,
        class: u8,
        bytes: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> bool;

    /// The one timer a stage runs on (`None`: it has none). A stage with a timer gives its
    /// [`Admission::deadline`] and [`Admission::poll`]; the three methods after them follow.
    const TIMER: Option<Timer> = None;

    /// When its timer is next due, if armed.
    #[inline]
    fn deadline(&self) -> Option<Nanos> {
        None
    }

    /// Its timer is due at `now`: do what is due (pause frames to `actions`).
    #[inline]
    fn poll(&mut self, _now: Nanos, _actions: &mut ActionBuf) {}

    /// When its `timer` is next due, if armed.
    #[inline]
    fn next_deadline(&self, timer: Timer) -> Option<Nanos> {
        if Self::TIMER == Some(timer) {
            self.deadline()
        } else {
            None
        }
    }

    /// Run its `timer` if due at `now`.
    #[inline]
    fn on_time(&mut self, timer: Timer, now: Nanos, actions: &mut ActionBuf) {
        if Self::TIMER == Some(timer) && self.deadline().is_some_and(|t| t <= now) {
            self.poll(now, actions);
        }
    }

    /// Whether it has a `timer` at all.
    #[inline]
    fn has_timer(&self, timer: Timer) -> bool {
        Self::TIMER == Some(timer)
    }

    /// Copy its counters into `snap` (`this`: the stage, `None` when the switch has none, so
    /// that a snapshot reused across switches forgets it).
    fn snapshot_into(_this: Option<&Self>, _snap: &mut SwitchSnapshot)
    where
        Self: Sized,
    {
    }
}

/// Classic PFC: every lossless (ingress port, class) pair (`[pfc]`, `spec.pfc`).
impl Admission for PfcGenerator {
    fn build(spec: &SwitchSpec) -> Option<Self> {
        spec.pfc.map(|p| PfcGenerator::new(spec.ports.len(), p))
    }

    #[inline(always)]
    fn on_enqueue(
        &mut self,
        port: u16,
        class: u8,
        len: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> Option<Admit> {
        Some(PfcGenerator::on_enqueue(
            self, port, class, len, now, actions,
        ))
    }

    #[inline(always)]
    fn on_dequeue(
        &mut self,
        port: u16,
        class: u8,
        bytes: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> bool {
        PfcGenerator::on_dequeue(self, port, class, bytes, now, actions);
        true
    }

    /// XOFF refreshes, checked every pass of the loop.
    const TIMER: Option<Timer> = Some(Timer::Loop);

    #[inline]
    fn deadline(&self) -> Option<Nanos> {
        PfcGenerator::next_deadline(self)
    }

    #[inline]
    fn poll(&mut self, now: Nanos, actions: &mut ActionBuf) {
        PfcGenerator::poll(self, now, actions);
    }

    fn snapshot_into(this: Option<&Self>, snap: &mut SwitchSnapshot) {
        snap.pfc = this.map(|p| *p.stats());
    }
}

/// Stage `H` on the pairs it takes, then `T` (a stage or a chain) on the rest. Either may be
/// absent from a switch whose spec does not configure it.
pub struct Chain<H, T>(Option<H>, Option<T>);

impl<H, T> Chain<H, T> {
    /// The head stage, if the switch has it.
    pub fn head(&self) -> Option<&H> {
        self.0.as_ref()
    }

    /// The rest of the chain, if the switch has any of it.
    pub fn tail(&self) -> Option<&T> {
        self.1.as_ref()
    }
}

impl<H: Admission, T: Admission> Admission for Chain<H, T> {
    /// `None` when no stage of the chain is configured.
    fn build(spec: &SwitchSpec) -> Option<Self> {
        let (h, t) = (H::build(spec), T::build(spec));
        (h.is_some() || t.is_some()).then_some(Chain(h, t))
    }

    #[inline(always)]
    fn on_enqueue(
        &mut self,
        port: u16,
        class: u8,
        len: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> Option<Admit> {
        if let Some(h) = self.0.as_mut() {
            if let Some(a) = h.on_enqueue(port, class, len, now, actions) {
                return Some(a);
            }
        }
        self.1.as_mut()?.on_enqueue(port, class, len, now, actions)
    }

    #[inline(always)]
    fn on_dequeue(
        &mut self,
        port: u16,
        class: u8,
        bytes: u64,
        now: Nanos,
        actions: &mut ActionBuf,
    ) -> bool {
        if let Some(h) = self.0.as_mut() {
            if h.on_dequeue(port, class, bytes, now, actions) {
                return true;
            }
        }
        self.1
            .as_mut()
            .is_some_and(|t| t.on_dequeue(port, class, bytes, now, actions))
    }

    #[inline]
    fn next_deadline(&self, timer: Timer) -> Option<Nanos> {
        let h = self.0.as_ref().and_then(|h| h.next_deadline(timer));
        let t = self.1.as_ref().and_then(|t| t.next_deadline(timer));
        match (h, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    #[inline]
    fn on_time(&mut self, timer: Timer, now: Nanos, actions: &mut ActionBuf) {
        if let Some(h) = self.0.as_mut() {
            h.on_time(timer, now, actions);
        }
        if let Some(t) = self.1.as_mut() {
            t.on_time(timer, now, actions);
        }
    }

    fn has_timer(&self, timer: Timer) -> bool {
        self.0.as_ref().is_some_and(|h| h.has_timer(timer))
            || self.1.as_ref().is_some_and(|t| t.has_timer(timer))
    }

    fn snapshot_into(this: Option<&Self>, snap: &mut SwitchSnapshot) {
        H::snapshot_into(this.and_then(|c| c.0.as_ref()), snap);
        T::snapshot_into(this.and_then(|c| c.1.as_ref()), snap);
    }
}

/// A value an [`Extensions`] holds: any `'static` type with `Clone`, `Debug` and `PartialEq`.
pub trait Extension: Any + fmt::Debug + Send + Sync {
    fn clone_box(&self) -> Box<dyn Extension>;
    fn eq_dyn(&self, other: &dyn Extension) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + fmt::Debug + PartialEq + Send + Sync> Extension for T {
    fn clone_box(&self) -> Box<dyn Extension> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn Extension) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Values of types the dataplane does not know, at most one per type: the parameters of the
/// admission stages a mechanism adds ([`SwitchSpec::admission`]) and their counters
/// ([`SwitchSnapshot::admission`], set with [`Extensions::set_counters`] so that
/// [`Extensions::merge`] adds them up across workers).
#[derive(Default)]
pub struct Extensions(Vec<Entry>);

/// One value of an [`Extensions`], and how another's value of its type adds into it (counters).
struct Entry {
    v: Box<dyn Extension>,
    merge: Option<fn(&mut dyn Any, &dyn Any)>,
}

/// [`Counters::merge`] on two values of type `T` (the merge of an [`Entry`] of counters).
fn merge_as<T: Counters + 'static>(a: &mut dyn Any, b: &dyn Any) {
    if let (Some(a), Some(b)) = (a.downcast_mut::<T>(), b.downcast_ref::<T>()) {
        a.merge(b);
    }
}

impl Extensions {
    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of type `T`, if any.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.iter().find_map(|e| e.v.as_any().downcast_ref::<T>())
    }

    /// Set the value of type `T`.
    pub fn insert<T: Extension>(&mut self, v: T) {
        match self.get_mut::<T>() {
            Some(x) => *x = v,
            None => self.0.push(Entry {
                v: Box::new(v),
                merge: None,
            }),
        }
    }

    /// Set the value of type `T` to a copy of `v`, reusing the memory of the one it replaces.
    pub fn set_from<T: Extension + Clone>(&mut self, v: &T) {
        self.set_with(v, None);
    }

    /// [`Extensions::set_from`] for counters: [`Extensions::merge`] adds another worker's
    /// value of `T` into this one.
    pub fn set_counters<T: Extension + Clone + Counters>(&mut self, v: &T) {
        self.set_with(v, Some(merge_as::<T>));
    }

    fn set_with<T: Extension + Clone>(&mut self, v: &T, merge: Option<fn(&mut dyn Any, &dyn Any)>) {
        match self.get_mut::<T>() {
            Some(x) => x.clone_from(v),
            None => self.0.push(Entry {
                v: Box::new(v.clone()),
                merge,
            }),
        }
    }

    /// Remove the value of type `T`, if any.
    pub fn remove<T: 'static>(&mut self) {
        self.0.retain(|e| !e.v.as_any().is::<T>());
    }

    /// Add `o`'s counters (another worker's, [`Extensions::set_counters`]) into this one's of
    /// the same type, or copy them when this one has none; other values stay this one's.
    pub fn merge(&mut self, o: &Extensions) {
        for b in &o.0 {
            let Some(merge) = b.merge else { continue };
            let t = b.v.as_any().type_id();
            match self.0.iter_mut().find(|a| a.v.as_any().type_id() == t) {
                Some(a) => merge(a.v.as_any_mut(), b.v.as_any()),
                None => self.0.push(Entry {
                    v: b.v.clone_box(),
                    merge: b.merge,
                }),
            }
        }
    }

    fn get_mut<T: 'static>(&mut self) -> Option<&mut T> {
        self.0
            .iter_mut()
            .find_map(|e| e.v.as_any_mut().downcast_mut::<T>())
    }
}

impl Clone for Extensions {
    fn clone(&self) -> Self {
        Extensions(
            self.0
                .iter()
                .map(|e| Entry {
                    v: e.v.clone_box(),
                    merge: e.merge,
                })
                .collect(),
        )
    }
}

impl PartialEq for Extensions {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .all(|a| other.0.iter().any(|b| a.v.eq_dyn(b.v.as_ref())))
    }
}

impl Eq for Extensions {}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|e| &e.v)).finish()
    }
}

/// The engine's side of admission: the bytes given back, and the pause frames sent.
impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// [`send_pfc_actions`](Self::send_pfc_actions) with bypass runs open: a PFC frame goes on
    /// a port's control queue, which a run checked was empty, so the runs are closed first.
    #[inline(always)]
    pub(super) fn send_pfc_actions_in(&mut self, now: Nanos) {
        if !self.pfc_actions.is_empty() {
            self.close_runs();
            self.send_pfc_actions_slow(now);
        }
    }

    /// The packet leaves the buffer: give its bytes back to PFC accounting.
    #[inline]
    pub(super) fn release_pfc(&mut self, now: Nanos, pkt: &P::Buf) {
        let m = pkt.meta();
        if m.flags & FLAG_PFC_ACCOUNTED == 0 {
            return;
        }
        self.release_pfc_bytes(now, m.ingress_port, m.class, pkt.len() as u64);
    }

    /// Give `bytes` of (ingress port id, class) back to the admission stage that accounted
    /// them: what [`release_pfc`](Self::release_pfc) does for one packet, or for a run of
    /// packets of the same pair leaving together ([`transmit_bypassed`](Self::transmit_bypassed)).
    #[inline]
    pub(super) fn release_pfc_bytes(
        &mut self,
        now: Nanos,
        ingress_port: u16,
        class: u8,
        bytes: u64,
    ) {
        let ingress = self.port_idx(ingress_port);
        if let (Some(a), Some(i)) = (self.admission.as_mut(), ingress) {
            a.on_dequeue(i as u16, class, bytes, now, &mut self.pfc_actions);
        }
    }

    /// Turn pending PFC actions into 802.1Qbb frames on the control queue of their port.
    /// Called after every packet: the usual nothing-to-do test is inlined, the work is not.
    #[inline(always)]
    pub(super) fn send_pfc_actions(&mut self, now: Nanos) {
        if !self.pfc_actions.is_empty() {
            self.send_pfc_actions_slow(now);
        }
    }

    #[inline(never)]
    pub(super) fn send_pfc_actions_slow(&mut self, now: Nanos) {
        // ActionBuf is Copy-sized and small; index instead of borrowing across the loop.
        for k in 0..self.pfc_actions.len() {
            let a: PfcAction = self.pfc_actions.as_slice()[k];
            self.send_pfc(now, a);
        }
        self.pfc_actions.clear();
    }

    pub(super) fn send_pfc(&mut self, now: Nanos, a: PfcAction) {
        let idx = a.port as usize;
        let Some(port) = self.st.ports.get_mut(idx) else {
            return;
        };
        self.st.stats.control_generated += 1;
        let Some(mut pkt) = self.st.pool.alloc() else {
            self.st.stats.drops.inc(DropReason::PoolEmpty);
            return;
        };
        let Some(buf) = pkt.append(wpfc::PFC_FRAME_LEN) else {
            self.st.stats.drops.inc(DropReason::PoolEmpty);
            self.st.pool.free(pkt);
            return;
        };
        if wpfc::build_pfc(buf, port.info.mac, a.class_enable, a.times).is_err() {
            // Unreachable (the buffer was sized for the frame), but never lose one uncounted.
            self.st.stats.drops.inc(DropReason::Pipeline);
            self.st.pool.free(pkt);
            return;
        }
        let m = pkt.meta_mut();
        m.flags |= FLAG_CONTROL | FLAG_GENERATED;
        m.egress_port = port.info.id;
        m.class = 7;
        match port.tm.enqueue_control(pkt, now) {
            Ok(()) => port.stats.pfc_tx += 1,
            Err((p, r)) => {
                self.st.stats.drops.inc(r);
                self.st.pool.free(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asic::pfc::PfcParams;

    #[derive(Clone, Debug, PartialEq)]
    struct Params(u64);

    crate::counters! {
        /// [`Cap`]'s counters.
        #[derive(Copy)]
        struct CapStats: "cap" {
            admitted: u64,
            peak_bytes: u64 => max,
        }
    }

    /// A stage on class 3 only: accounts up to `limit` bytes, refuses above.
    struct Cap {
        limit: u64,
        bytes: u64,
        stats: CapStats,
    }

    impl Admission for Cap {
        fn build(spec: &SwitchSpec) -> Option<Self> {
            spec.admission.get::<Params>().map(|p| Cap {
                limit: p.0,
                bytes: 0,
                stats: CapStats::default(),
            })
        }
        fn on_enqueue(
            &mut self,
            _: u16,
            c: u8,
            len: u64,
            _: Nanos,
            _: &mut ActionBuf,
        ) -> Option<Admit> {
            (c == 3).then(|| {
                if self.bytes + len > self.limit {
                    Admit::Drop(DropReason::HeadroomOverflow)
                } else {
                    self.bytes += len;
                    self.stats.admitted += 1;
                    self.stats.peak_bytes = self.stats.peak_bytes.max(self.bytes);
                    Admit::Accept
                }
            })
        }
        fn on_dequeue(&mut self, _: u16, c: u8, b: u64, _: Nanos, _: &mut ActionBuf) -> bool {
            if c == 3 {
                self.bytes -= b;
            }
            c == 3
        }
        fn snapshot_into(this: Option<&Self>, snap: &mut SwitchSnapshot) {
            match this {
                Some(c) => snap.admission.set_counters(&c.stats),
                None => snap.admission.remove::<CapStats>(),
            }
        }
    }

    fn pfc() -> PfcParams {
        PfcParams {
            enabled_classes: 0b1000,
            xoff_bytes: 1_000,
            xon_bytes: 500,
            headroom_bytes: 1_000,
            pause_quanta: 0xffff,
            refresh_ns: 0,
            dynamic: None,
        }
    }

    #[test]
    fn the_first_stage_that_takes_a_pair_accounts_it() {
        let mut spec = SwitchSpec {
            pfc: Some(pfc()),
            ..SwitchSpec::default()
        };
        spec.admission.insert(Params(100));
        let mut a = <Chain<Cap, PfcGenerator>>::build(&spec).expect("configured");
        let mut acts = ActionBuf::new();
        // Class 3 is the head's: refused above its limit, PFC never sees it.
        assert_eq!(a.on_enqueue(0, 3, 80, 0, &mut acts), Some(Admit::Accept));
        assert_eq!(
            a.on_enqueue(0, 3, 80, 0, &mut acts),
            Some(Admit::Drop(DropReason::HeadroomOverflow))
        );
        assert!(a.on_dequeue(0, 3, 80, 0, &mut acts));
        assert_eq!(a.head().map(|c| c.bytes), Some(0));
        assert_eq!(a.tail().map(|p| p.counter(0, 3)), Some(0));
        // Class 2 goes on to PFC (which takes every pair, accounting the lossless ones).
        assert_eq!(a.on_enqueue(0, 2, 80, 0, &mut acts), Some(Admit::Accept));
        assert!(a.on_dequeue(0, 2, 80, 0, &mut acts));
        assert!(a.has_timer(Timer::Loop) && !a.has_timer(Timer::Slot));
        // Without PFC, class 2 is nobody's.
        spec.pfc = None;
        let mut a = <Chain<Cap, PfcGenerator>>::build(&spec).expect("configured");
        assert_eq!(a.on_enqueue(0, 2, 80, 0, &mut acts), None);
        assert!(!a.on_dequeue(0, 2, 80, 0, &mut acts));
        // Without either, no chain at all.
        spec.admission.remove::<Params>();
        assert!(<Chain<Cap, PfcGenerator>>::build(&spec).is_none());
    }

    #[test]
    fn extensions_hold_one_value_per_type() {
        let mut e = Extensions::default();
        assert_eq!(e.get::<Params>(), None);
        e.insert(Params(1));
        e.set_from(&Params(2));
        e.insert(7u32);
        assert_eq!(e.get::<Params>(), Some(&Params(2)));
        assert_eq!(e.get::<u32>(), Some(&7));
        let c = e.clone();
        assert_eq!(c, e);
        e.remove::<u32>();
        assert_ne!(c, e);
        assert_eq!(format!("{e:?}"), "[Params(2)]");
    }

    #[test]
    fn two_workers_admission_counters_merge() {
        let mut spec = SwitchSpec::default();
        spec.admission.insert(Params(1_000));
        let mut acts = ActionBuf::new();
        let mut snaps = [SwitchSnapshot::default(), SwitchSnapshot::default()];
        for (w, snap) in snaps.iter_mut().enumerate() {
            let mut a = <Chain<Cap, PfcGenerator>>::build(&spec).expect("configured");
            for _ in 0..=w {
                assert_eq!(a.on_enqueue(0, 3, 100, 0, &mut acts), Some(Admit::Accept));
            }
            snap.admission.insert(Params(w as u64));
            <Chain<Cap, PfcGenerator>>::snapshot_into(Some(&a), snap);
        }
        let [mut total, other] = snaps;
        total.merge(&other);
        // Worker 0 admitted 1 frame (peak 100 bytes), worker 1 two (peak 200).
        let want = CapStats {
            admitted: 3,
            peak_bytes: 200,
        };
        assert_eq!(total.admission.get::<CapStats>(), Some(&want));
        // What is not counters stays this worker's.
        assert_eq!(total.admission.get::<Params>(), Some(&Params(0)));
        // Counters only the other worker has are copied.
        let mut empty = SwitchSnapshot::default();
        empty.merge(&other);
        let want = CapStats {
            admitted: 2,
            peak_bytes: 200,
        };
        assert_eq!(empty.admission.get::<CapStats>(), Some(&want));
        assert_eq!(empty.admission.get::<Params>(), None);
    }
}
