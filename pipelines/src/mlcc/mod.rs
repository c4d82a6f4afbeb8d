//! MLCC (paper ../shared/papers/001_faa74aeae06b485b.txt, section 3): cross-DC congestion
//! control with short control loops around the DCI switches.
//!
//! [`dci::MlccDci`] is the DCI pipeline (`switch.pipeline = "mlcc"`, `[mlcc]`), both roles in
//! one (every DCI is the sender-side DCI of the flows leaving its DC and the receiver-side DCI of
//! those entering it), on the baseline's forwarding:
//! - [`feedback`]: the near-source feedback loop (section 3.2.1): inter-DC data leaving the DC
//!   has its INT stack read and stripped, and the stack goes back to the sender in a Switch-INT;
//! - [`receiver`]: the receiver-driven loop (section 3.2.2): a PFQ per inter-DC flow entering the
//!   DC, dequeued at the receiver's `R_credit`, `C_D` in the data, `C_R` from the ACKs; and
//!   [`dqm`] (section 3.3.1), the end-to-end rate written into the ACKs.
//!
//! The INT the intra-DC switches add is the baseline's `[int]` stage
//! (`crate::baseline::int`). Formats: `longhaul_dataplane::wire::mlcc` and
//! docs/wire-formats.md; rules and the choices where the paper is silent: docs/mlcc.md.
pub mod config;
pub mod dci;
pub mod dqm;
pub mod feedback;
pub mod host;
pub mod hpcc;
pub mod mechanism;
pub mod receiver;

/// An inter-DC flow: (IP source, IP destination, the responder's QPN) of its data packets, IPv4
/// addresses as IPv4-mapped IPv6. Data gives the QPN from its BTH.DestQP; an ACK from its
/// MCETH (with the addresses swapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    pub src: u128,
    pub dst: u128,
    pub qpn: u32,
}

impl FlowKey {
    /// The three fields folded into one 128-bit word for the PFQs' flow map: the source, the
    /// destination turned by 64 bits, and the QPN (24 bits) at bits 40 to 63. One hasher
    /// update where the derived `Hash` made three (two 128-bit, one 32-bit: about 20
    /// instructions of the map's lookup per data packet). For
    /// IPv4-mapped addresses (the high 64 bits 0, bits 32 to 47 0xffff, 48 to 63 0) nothing is
    /// lost: the high half is the destination's low 64 bits, the low half the source's with the
    /// QPN above it, so two IPv4 flows never share a word. IPv6 flows may, which costs a probe,
    /// not a wrong answer (the map compares whole keys).
    #[inline]
    pub fn folded(&self) -> u128 {
        self.src ^ self.dst.rotate_left(64) ^ ((self.qpn as u128) << 40)
    }
}

impl core::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        state.write_u128(self.folded());
    }
}

#[cfg(test)]
mod tests {
    use super::FlowKey;
    use proptest::prelude::*;

    fn v4(a: u32) -> u128 {
        0xffff_0000_0000 | a as u128
    }

    proptest! {
        /// Two IPv4 flows that differ in any field fold to different words (the fold loses
        /// nothing for them, so the flow map's probes stay as short as with the derived hash).
        #[test]
        fn ipv4_flows_fold_apart(
            a in (any::<u32>(), any::<u32>(), 0u32..1 << 24),
            b in (any::<u32>(), any::<u32>(), 0u32..1 << 24),
            which in 0u8..4,
        ) {
            // Half the cases differ in one field only (the others are the first key's).
            let b = match which {
                0 => (b.0, a.1, a.2),
                1 => (a.0, b.1, a.2),
                2 => (a.0, a.1, b.2),
                _ => b,
            };
            let ka = FlowKey { src: v4(a.0), dst: v4(a.1), qpn: a.2 };
            let kb = FlowKey { src: v4(b.0), dst: v4(b.1), qpn: b.2 };
            prop_assert_eq!(ka == kb, ka.folded() == kb.folded());
        }
    }
}
