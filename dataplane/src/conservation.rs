//! Packet conservation (issue 20): every frame a switch took in is accounted for.
//!
//! A switch's [`Ledger`] balances when
//!
//! ```text
//! received + arrived_dropped + injected + generated + control_generated
//!     = sent + dropped + consumed + queued
//! ```
//!
//! - `received`: frames the ports handed to the switch (the ports' `rx_pkts`);
//! - `arrived_dropped`: frames that arrived but never reached the ingress stage (no buffer for
//!   them, no such port); they are in `dropped` too, by reason;
//! - `injected`: frames the control thread injected (`Command::Inject`), a buffer found or not;
//! - `generated`: frames the stages generated (CNPs, NACKs, pseudo-ACKs, ARP requests, ...);
//! - `control_generated`: 802.1Qbb / PAUSE frames of the PFC and Bifrost generators;
//! - `sent`: frames handed to the ports (`tx_pkts`);
//! - `dropped`: every drop by reason plus the generated frames a full emit list lost;
//! - `consumed`: frames used up on purpose: MAC control honored, ARP/ND learned from, a control
//!   message taken by a pipeline, what a test's direct stage call emitted;
//! - `queued`: frames still inside: egress queues (control FIFOs included), frames that bypassed
//!   an empty queue and wait for the next transmit, the recirculation loop, the pipeline's own
//!   queues (MLCC's PFQs).
//!
//! A frame that vanishes without a counter (a buffer dropped on the floor, a queue that loses a
//! packet) unbalances the ledger. The replay driver's test harness checks it after every step of
//! every test, `longhaul replay` prints it and fails on an unbalanced one, and the emulator checks
//! every switch at the end of a scenario.

use core::fmt;

/// Frame counts of one switch (or several workers' switches added up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub received: u64,
    pub arrived_dropped: u64,
    pub injected: u64,
    pub generated: u64,
    pub control_generated: u64,
    pub sent: u64,
    pub dropped: u64,
    pub consumed: u64,
    pub queued: u64,
}

impl Ledger {
    /// Frames that entered the switch or were made by it.
    pub fn inputs(&self) -> u64 {
        self.received
            + self.arrived_dropped
            + self.injected
            + self.generated
            + self.control_generated
    }

    /// Frames that left it, were dropped or consumed, or are still in it.
    pub fn outputs(&self) -> u64 {
        self.sent + self.dropped + self.consumed + self.queued
    }

    /// `Ok` when every frame is accounted for.
    pub fn check(&self) -> Result<(), Unbalanced> {
        if self.inputs() == self.outputs() {
            Ok(())
        } else {
            Err(Unbalanced(*self))
        }
    }

    /// Add another worker's ledger.
    pub fn add(&mut self, o: &Ledger) {
        self.received += o.received;
        self.arrived_dropped += o.arrived_dropped;
        self.injected += o.injected;
        self.generated += o.generated;
        self.control_generated += o.control_generated;
        self.sent += o.sent;
        self.dropped += o.dropped;
        self.consumed += o.consumed;
        self.queued += o.queued;
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in {} (received {} + arrived and dropped {} + injected {} + generated {} + pfc {}) \
             = out {} (sent {} + dropped {} + consumed {} + queued {})",
            self.inputs(),
            self.received,
            self.arrived_dropped,
            self.injected,
            self.generated,
            self.control_generated,
            self.outputs(),
            self.sent,
            self.dropped,
            self.consumed,
            self.queued
        )
    }
}

/// An unbalanced ledger: frames were lost (or made) without a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unbalanced(pub Ledger);

impl fmt::Display for Unbalanced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.0;
        let (i, o) = (l.inputs(), l.outputs());
        let what = if i > o {
            format!("{} frames unaccounted for", i - o)
        } else {
            format!("{} more frames accounted than came in", o - i)
        };
        write!(f, "packet conservation violated, {what}: {l}")
    }
}

impl std::error::Error for Unbalanced {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_and_says_what_is_missing() {
        let mut l = Ledger {
            received: 10,
            generated: 2,
            control_generated: 1,
            sent: 8,
            dropped: 2,
            consumed: 1,
            queued: 2,
            ..Ledger::default()
        };
        assert_eq!(l.check(), Ok(()));
        l.queued = 0;
        let e = l.check().unwrap_err().to_string();
        assert!(e.contains("2 frames unaccounted for"), "{e}");
        l.queued = 5;
        let e = l.check().unwrap_err().to_string();
        assert!(e.contains("3 more frames accounted"), "{e}");
        let mut sum = Ledger::default();
        sum.add(&l);
        sum.add(&l);
        assert_eq!(sum.received, 20);
        assert_eq!(sum.queued, 10);
    }
}
