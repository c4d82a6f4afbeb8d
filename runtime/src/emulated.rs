//! A switch for the closed-loop emulator: the real engine and pipeline of a config on virtual
//! time, behind a trait without its types (made by the registry entry of its pipeline,
//! [`ErasedPipeline::emulated`](crate::ErasedPipeline::emulated)), so that one emulation can hold
//! switches of different pipelines. Each call drives the monomorphized switch; the dynamic
//! call is per event, not per stage.

use longhaul_dataplane::engine::{Admission, Pipeline, PortInfo, SwitchSnapshot};
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::replay::{Emitted, FramePool, Harness};
use longhaul_dataplane::time::Nanos;

/// One switch of an emulation.
pub trait EmulatedSwitch {
    /// Its ports, index = port index.
    fn ports(&self) -> &[PortInfo];
    /// Frame `frame` arrives on port index `port_idx` at `ts` (not before the current time).
    fn put(&mut self, port_idx: usize, ts: Nanos, frame: Vec<u8>);
    /// Run everything due at or before `t`; returns [`EmulatedSwitch::next_event`] after that
    /// (known then without asking the switch again). The frames put come back in their own
    /// allocations when the switch emits them; a frame the switch makes is copied into one
    /// from `frames`, and the allocation of a frame it did not take goes there.
    fn advance_to(&mut self, t: Nanos, frames: &mut FramePool) -> Option<Nanos>;
    /// After [`EmulatedSwitch::advance_to`] (which returned `next`) emitted nothing, when
    /// nothing else happens before `limit`: `advance_to` at each next event before `limit`
    /// until one emits a frame ([`Harness::advance_quiet_with`]). Returns its next event and
    /// the time of the last call.
    fn advance_quiet(
        &mut self,
        next: Option<Nanos>,
        limit: Nanos,
        frames: &mut FramePool,
    ) -> (Option<Nanos>, Nanos);
    /// The next time something is due, `None` when idle.
    fn next_event(&self) -> Option<Nanos>;
    /// Whether a step in which only the recirculation loop is due is taken without the
    /// driver's step around it ([`Harness::set_loop_steps`]; on by default).
    fn set_loop_steps(&mut self, on: bool);
    /// Every frame emitted since the last call (port index, start of transmission, bytes),
    /// appended to `out` (the caller reuses it: no allocation per call).
    fn take_into(&mut self, out: &mut Vec<Emitted>);
    /// The switch's counters now; panics when its packet conservation ledger does not
    /// balance (checked here, at every sample and at the end, not at every step).
    fn snapshot(&self) -> SwitchSnapshot;
    /// The link of port index `port_idx` went down or came back up ([`Switch::set_link`]).
    ///
    /// [`Switch::set_link`]: longhaul_dataplane::engine::Switch::set_link
    fn set_link(&mut self, port_idx: usize, up: bool);
}

impl<L: Pipeline<HeapPool>, A: Admission> EmulatedSwitch for Harness<HeapPool, L, A> {
    fn ports(&self) -> &[PortInfo] {
        self.sw.ports()
    }
    fn put(&mut self, port_idx: usize, ts: Nanos, frame: Vec<u8>) {
        Harness::put_owned(self, port_idx, ts, frame)
    }
    fn advance_to(&mut self, t: Nanos, frames: &mut FramePool) -> Option<Nanos> {
        Harness::advance_and_next_with(self, t, frames)
    }
    fn advance_quiet(
        &mut self,
        next: Option<Nanos>,
        limit: Nanos,
        frames: &mut FramePool,
    ) -> (Option<Nanos>, Nanos) {
        Harness::advance_quiet_with(self, next, limit, frames)
    }
    fn next_event(&self) -> Option<Nanos> {
        Harness::next_event(self)
    }
    fn set_loop_steps(&mut self, on: bool) {
        Harness::set_loop_steps(self, on)
    }
    fn take_into(&mut self, out: &mut Vec<Emitted>) {
        Harness::take_into(self, out)
    }
    fn snapshot(&self) -> SwitchSnapshot {
        self.check_ledger();
        let mut s = SwitchSnapshot::default();
        self.sw.snapshot_into(self.now(), &mut s);
        s
    }
    fn set_link(&mut self, port_idx: usize, up: bool) {
        self.sw.set_link(port_idx, up)
    }
}
