//! Themis-D's proxy bitmap: the double-length, variable-base bitmap of appendix A (paper 002),
//! over the 24-bit PSN space.
//!
//! The bitmap holds `2 * W` bits for a TX window of `W` packets, as two halves of `W` bits; PSN
//! `p` lives at bit `p mod 2W` (so `W` must be a power of two: `2W` then divides 2^24 and the
//! mapping survives PSN wrap-around). Each half has a base bit: a PSN counts as delivered when its
//! bit differs from its half's base. Setting a PSN writes `!base`; when the start pointer (the
//! receiver's ePSN, learned from ACKs and NAKs) leaves a half, that half's base flips, which turns
//! every bit of it back into "not delivered" without clearing them one by one (section 5,
//! "Maintaining bitmap").
//!
//! Which PSNs the bitmap can answer for: those before the start pointer are delivered by
//! definition (the RNIC's ePSN is past them); from the start of the start pointer's half, `2W`
//! PSNs are represented; anything further ahead is outside the sender's window and is neither
//! recorded nor reported delivered ([`SetOutcome::BeyondWindow`]).
//!
//! Where appendix A is silent (our choices, tested below):
//! - the flip is only right when every PSN of the half left behind was delivered through the
//!   ToR, which holds when the ToR saw the whole flow. When it did not (state created mid-flow, a
//!   PSN beyond the window), the flip would turn the holes into "delivered"; we check the half
//!   while flipping (W/64 word reads once per W packets) and rewrite it to "not delivered" when
//!   it had holes, counting it ([`Advance::repaired`]).
//! - a start pointer that jumps two halves or more at once (beyond the window) resets both halves.
//!
//! Storage is one slice of `u64` words per QP inside a register array owned by the caller, plus
//! the start pointer and the two base bits: nothing is allocated per packet.

use longhaul_dataplane::wire::roce::{psn_diff, PSN_MASK};

/// Bits per storage word.
const WORD: u32 = 64;

/// What [`ProxyBitmap::set`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// Recorded as delivered.
    Set,
    /// Before the start pointer: already delivered, nothing to record.
    BeforeStart,
    /// Too far ahead of the start pointer (outside the window): not recorded.
    BeyondWindow,
}

/// What [`ProxyBitmap::advance`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advance {
    /// Halves whose base bit flipped (appendix A).
    pub flipped: u32,
    /// Halves that still had holes when left (rewritten to "not delivered").
    pub repaired: u32,
}

/// The per-QP bitmap state other than the words: start pointer and the two base bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitmapHead {
    /// The start pointer: the receiver's ePSN as far as the ToR knows.
    pub start: u32,
    /// Base bit of the first half (bit 0) and the second half (bit 1).
    pub bases: u8,
}

/// The geometry of every QP's bitmap (window `W`), operating on caller-owned storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyBitmap {
    window: u32,
}

impl ProxyBitmap {
    /// A bitmap geometry for TX window `window` (a power of two, 64 ..= 2^22).
    pub fn new(window: u32) -> Option<Self> {
        if !window.is_power_of_two() || !(WORD..=(1 << 22)).contains(&window) {
            return None;
        }
        Some(ProxyBitmap { window })
    }

    /// The TX window `W`.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Storage words per QP (`2W / 64`).
    pub fn words(&self) -> usize {
        (2 * self.window / WORD) as usize
    }

    #[inline]
    fn half_start(&self, psn: u32) -> u32 {
        psn & !(self.window - 1) & PSN_MASK
    }

    #[inline]
    fn half_of(&self, psn: u32) -> usize {
        ((psn / self.window) & 1) as usize
    }

    /// A fresh head whose start pointer is `start` (both halves read "not delivered").
    pub fn head(&self, start: u32) -> BitmapHead {
        BitmapHead {
            start: start & PSN_MASK,
            bases: 0,
        }
    }

    /// Reset `words` so that every PSN reads "not delivered" under `head`'s bases.
    pub fn clear(&self, head: &BitmapHead, words: &mut [u64]) {
        let per_half = self.words() / 2;
        for h in 0..2 {
            let v = if head.bases >> h & 1 == 1 {
                u64::MAX
            } else {
                0
            };
            for w in words.iter_mut().skip(h * per_half).take(per_half) {
                *w = v;
            }
        }
    }

    /// Offset of `psn` from the start of the start pointer's half (mod 2^24).
    #[inline]
    fn offset(&self, head: &BitmapHead, psn: u32) -> u32 {
        psn.wrapping_sub(self.half_start(head.start)) & PSN_MASK
    }

    #[inline]
    fn bit(&self, psn: u32) -> (usize, u64) {
        let i = psn & (2 * self.window - 1);
        ((i / WORD) as usize, 1u64 << (i % WORD))
    }

    /// Record `psn` as delivered to the RNIC (Algorithm 1, line 20).
    #[inline]
    pub fn set(&self, head: &BitmapHead, words: &mut [u64], psn: u32) -> SetOutcome {
        let psn = psn & PSN_MASK;
        if psn_diff(psn, head.start) < 0 {
            return SetOutcome::BeforeStart;
        }
        if self.offset(head, psn) >= 2 * self.window {
            return SetOutcome::BeyondWindow;
        }
        let (w, m) = self.bit(psn);
        let Some(word) = words.get_mut(w) else {
            return SetOutcome::BeyondWindow;
        };
        if head.bases >> self.half_of(psn) & 1 == 1 {
            *word &= !m;
        } else {
            *word |= m;
        }
        SetOutcome::Set
    }

    /// Whether `psn` was delivered to the RNIC (Algorithm 1, line 6: condition C1).
    #[inline]
    pub fn delivered(&self, head: &BitmapHead, words: &[u64], psn: u32) -> bool {
        let psn = psn & PSN_MASK;
        if psn_diff(psn, head.start) < 0 {
            return true;
        }
        if self.offset(head, psn) >= 2 * self.window {
            return false;
        }
        let (w, m) = self.bit(psn);
        let Some(word) = words.get(w) else {
            return false;
        };
        let bit = *word & m != 0;
        let base = head.bases >> self.half_of(psn) & 1 == 1;
        bit != base
    }

    /// Move the start pointer forward to `epsn` (an ACK or NAK from the RNIC). A pointer that does
    /// not move forward is ignored (stale or duplicate ACK). Leaving a half flips its base.
    pub fn advance(&self, head: &mut BitmapHead, words: &mut [u64], epsn: u32) -> Advance {
        let epsn = epsn & PSN_MASK;
        let mut out = Advance::default();
        if psn_diff(epsn, head.start) <= 0 {
            return out;
        }
        let from = self.half_start(head.start);
        let to = self.half_start(epsn);
        let halves = (to.wrapping_sub(from) & PSN_MASK) / self.window;
        if halves >= 2 {
            // Beyond the window: nothing recorded is still meaningful.
            head.start = epsn;
            head.bases = 0;
            self.clear(head, words);
            out.repaired = 2;
            return out;
        }
        if halves == 1 {
            let h = self.half_of(from);
            let per_half = self.words() / 2;
            let base = head.bases >> h & 1 == 1;
            // Delivered bits are !base: a complete half is all ones when base = 0, all zeros
            // when base = 1.
            let full = if base { 0 } else { u64::MAX };
            let range = h * per_half..(h + 1) * per_half;
            let complete = words
                .get(range.clone())
                .is_some_and(|s| s.iter().all(|w| *w == full));
            head.bases ^= 1 << h;
            out.flipped = 1;
            if !complete {
                // Holes would read "delivered" after the flip: rewrite the half as empty.
                let empty = if head.bases >> h & 1 == 1 {
                    u64::MAX
                } else {
                    0
                };
                if let Some(s) = words.get_mut(range) {
                    s.iter_mut().for_each(|w| *w = empty);
                }
                out.repaired = 1;
            }
        }
        head.start = epsn;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::roce::psn_add;

    fn new(w: u32, start: u32) -> (ProxyBitmap, BitmapHead, Vec<u64>) {
        let b = ProxyBitmap::new(w).unwrap();
        let h = b.head(start);
        let mut words = vec![0; b.words()];
        b.clear(&h, &mut words);
        (b, h, words)
    }

    #[test]
    fn geometry() {
        assert!(ProxyBitmap::new(512).is_some());
        assert!(ProxyBitmap::new(500).is_none());
        assert!(ProxyBitmap::new(32).is_none());
        assert_eq!(ProxyBitmap::new(512).unwrap().words(), 16); // 128 bytes (appendix B)
    }

    #[test]
    fn set_and_query() {
        let (b, h, mut w) = new(64, 0);
        assert!(!b.delivered(&h, &w, 0));
        assert_eq!(b.set(&h, &mut w, 3), SetOutcome::Set);
        assert!(b.delivered(&h, &w, 3));
        assert!(!b.delivered(&h, &w, 2));
        assert_eq!(b.set(&h, &mut w, 127), SetOutcome::Set);
        assert_eq!(b.set(&h, &mut w, 128), SetOutcome::BeyondWindow);
        assert!(!b.delivered(&h, &w, 128));
    }

    #[test]
    fn flip_reuses_half() {
        let (b, mut h, mut w) = new(64, 0);
        for p in 0..64 {
            b.set(&h, &mut w, p);
        }
        b.set(&h, &mut w, 70);
        let a = b.advance(&mut h, &mut w, 64);
        assert_eq!(
            a,
            Advance {
                flipped: 1,
                repaired: 0
            }
        );
        assert_eq!(h.bases, 1);
        // Half 0 now stands for PSNs 128..192: all "not delivered", without being cleared.
        assert!(w[0] == u64::MAX);
        for p in 128..192 {
            assert!(!b.delivered(&h, &w, p), "{p}");
        }
        assert!(b.delivered(&h, &w, 70));
        assert!(!b.delivered(&h, &w, 71));
        assert!(b.delivered(&h, &w, 63)); // before the start pointer
        assert_eq!(b.set(&h, &mut w, 130), SetOutcome::Set);
        assert!(b.delivered(&h, &w, 130));
        assert_eq!(w[0], !(1u64 << 2)); // base 1: delivered = 0
    }

    #[test]
    fn holes_are_repaired_not_flipped_into_delivered() {
        let (b, mut h, mut w) = new(64, 0);
        for p in 0..64 {
            if p != 10 {
                b.set(&h, &mut w, p);
            }
        }
        let a = b.advance(&mut h, &mut w, 64);
        assert_eq!(
            a,
            Advance {
                flipped: 1,
                repaired: 1
            }
        );
        assert!(!b.delivered(&h, &w, 128 + 10));
    }

    #[test]
    fn stale_ack_and_big_jump() {
        let (b, mut h, mut w) = new(64, 100);
        b.set(&h, &mut w, 110);
        assert_eq!(b.advance(&mut h, &mut w, 90), Advance::default());
        assert_eq!(h.start, 100);
        let a = b.advance(&mut h, &mut w, 100 + 300);
        assert_eq!(a.repaired, 2);
        assert!(!b.delivered(&h, &w, 401));
    }

    #[test]
    fn wraps_at_2_pow_24() {
        let start = PSN_MASK - 100; // 0xffff9b
        let (b, mut h, mut w) = new(64, start);
        let mut p = start;
        for _ in 0..300 {
            assert_eq!(b.set(&h, &mut w, p), SetOutcome::Set, "{p:#x}");
            assert!(b.delivered(&h, &w, p));
            let nxt = psn_add(p, 1);
            if !b.delivered(&h, &w, nxt) {
                // fine: the next one is not there yet
            }
            b.advance(&mut h, &mut w, nxt);
            p = nxt;
        }
        assert!(p < 300);
        assert!(!b.delivered(&h, &w, psn_add(p, 1)));
        assert!(b.delivered(&h, &w, PSN_MASK)); // long before the start pointer
    }
}
