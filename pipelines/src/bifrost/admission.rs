//! Bifrost as an admission stage of the engine: on the governed (ingress port, priority) pairs
//! its L and r accounting (Algorithm 1, [`BifrostGenerator`]) takes the place of classic XOFF/XON,
//! and its slot timer sends the pause frames. The registry puts it at the head of the chain
//! (`longhaul_pipelines::Admission`); its parameters come from `[bifrost]` through the
//! mechanism's `extend_spec` ([`BifrostParams`] in `SwitchSpec::admission`).

use super::generator::{BifrostGenerator, BifrostParams, BifrostStats};
use longhaul_dataplane::asic::pfc::{ActionBuf, Admit};
use longhaul_dataplane::engine::{
    Admission, Chain, Pipeline, Switch, SwitchSnapshot, SwitchSpec, Timer,
};
use longhaul_dataplane::packet::BufPool;
use longhaul_dataplane::time::Nanos;

impl Admission for BifrostGenerator {
    fn build(spec: &SwitchSpec) -> Option<Self> {
        let p = spec.admission.get::<BifrostParams>()?;
        Some(BifrostGenerator::new(spec.ports.len(), p.clone()))
    }

    /// The governed pairs only: r counted, L accounted or the packet refused above the limit.
    #[inline(always)]
    fn on_enqueue(
        &mut self,
        port: u16,
        class: u8,
        len: u64,
        now: Nanos,
        _actions: &mut ActionBuf,
    ) -> Option<Admit> {
        self.governs(port, class)
            .then(|| BifrostGenerator::on_enqueue(self, port, class, len, now))
    }

    #[inline(always)]
    fn on_dequeue(
        &mut self,
        port: u16,
        class: u8,
        bytes: u64,
        _now: Nanos,
        _actions: &mut ActionBuf,
    ) -> bool {
        let governed = self.governs(port, class);
        if governed {
            BifrostGenerator::on_dequeue(self, port, class, bytes);
        }
        governed
    }

    /// The slot timer (every T while a governed pair is not at rest).
    const TIMER: Option<Timer> = Some(Timer::Slot);

    #[inline]
    fn deadline(&self) -> Option<Nanos> {
        BifrostGenerator::next_deadline(self)
    }

    #[inline]
    fn poll(&mut self, now: Nanos, actions: &mut ActionBuf) {
        BifrostGenerator::poll(self, now, actions);
    }

    /// Its counters as a [`BifrostStats`] in `snap.admission`.
    fn snapshot_into(this: Option<&Self>, snap: &mut SwitchSnapshot) {
        match this {
            Some(b) => snap.admission.set_counters(b.stats()),
            None => snap.admission.remove::<BifrostStats>(),
        }
    }
}

/// The Bifrost generator of a switch whose admission chain has it at its head
/// (`longhaul_pipelines::Admission`), if `[bifrost]` configures it.
pub trait BifrostOf {
    fn bifrost(&self) -> Option<&BifrostGenerator>;
}

impl<P, L, T> BifrostOf for Switch<P, L, Chain<BifrostGenerator, T>>
where
    P: BufPool,
    L: Pipeline<P>,
    T: Admission,
{
    fn bifrost(&self) -> Option<&BifrostGenerator> {
        self.admission().and_then(|c| c.head())
    }
}

/// Bifrost's counters in a snapshot, if the switch had `[bifrost]`.
pub fn stats(snap: &SwitchSnapshot) -> Option<&BifrostStats> {
    snap.admission.get::<BifrostStats>()
}
