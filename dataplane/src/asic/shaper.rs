//! Token-bucket shaper: a port's or queue's rate (every egress port, MLCC PFQ dequeue rates).
//!
//! Tokens are kept in exact integers: one token is 10^-9 bit, so a bucket gains exactly `rate_bps`
//! tokens per nanosecond and a frame of `len` bytes costs `len * 8 * 10^9` tokens. Nothing is ever
//! rounded while accumulating, so a shaper running for days has no drift. The only rounding is in
//! [`Shaper::next_conforming`], which rounds the waiting time *up* to a whole nanosecond (so the
//! returned time always conforms, and one nanosecond earlier does not).
//!
//! The bucket holds at most `burst_bytes`. A frame conforms when the bucket holds at least its
//! cost, or is full when the frame is larger than the bucket (so a frame longer than the burst is
//! not blocked forever). [`Shaper::consume`] may drive the bucket negative (debt), which later
//! refills before anything conforms again: the long-run rate never exceeds `rate_bps`.
//!
//! Size the burst to at least one maximum frame: with a burst smaller than a frame, credit earned
//! beyond the burst while a frame waits for the next whole nanosecond is lost, so the long-run
//! rate falls slightly below `rate_bps`.
//!
//! `rate_bps == 0` stops the shaper: the bucket no longer fills and [`Shaper::next_conforming`]
//! returns `Nanos::MAX` for a frame that does not conform yet. Time going backwards (a `now` older
//! than the last update) is treated as the last update time.

use crate::time::{Nanos, NS_PER_SEC};

/// Tokens per byte: 8 bits of 10^9 tokens each.
const TOKENS_PER_BYTE: i128 = 8 * NS_PER_SEC as i128;

/// The bucket of a [`Shaper`] at the `now` a frame was found to conform
/// ([`Shaper::conforming`]), to consume it with ([`Shaper::consume_conforming`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Conforming(i128);

/// A token bucket of `rate_bps` and depth `burst_bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaper {
    rate_bps: u64,
    burst_bytes: u64,
    /// `burst_bytes` in tokens (kept beside it: every conformance test compares with it, and the
    /// 128-bit product was recomputed each time).
    cap_tokens: i128,
    /// Tokens (10^-9 bit) at `last`; may be negative (debt).
    tokens: i128,
    last: Nanos,
    consumed_bytes: u64,
}

impl Shaper {
    /// A shaper whose bucket is full at time `now`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Nanos) -> Self {
        Shaper {
            rate_bps,
            burst_bytes,
            cap_tokens: burst_bytes as i128 * TOKENS_PER_BYTE,
            tokens: burst_bytes as i128 * TOKENS_PER_BYTE,
            last: now,
            consumed_bytes: 0,
        }
    }

    #[inline]
    fn cap(&self) -> i128 {
        self.cap_tokens
    }

    /// Tokens needed for a frame of `len` bytes to conform.
    #[inline]
    fn need(&self, len: u64) -> i128 {
        (len as i128 * TOKENS_PER_BYTE).min(self.cap())
    }

    #[inline]
    fn tokens_at(&self, now: Nanos) -> i128 {
        let dt = now.saturating_sub(self.last) as i128;
        let t = self.tokens.saturating_add(dt * self.rate_bps as i128);
        // Only clamp what refilled: a bucket above its (lowered) cap drains through consume.
        if t > self.cap() {
            self.cap().max(self.tokens)
        } else {
            t
        }
    }

    #[inline]
    fn refill(&mut self, now: Nanos) {
        if now > self.last {
            self.tokens = self.tokens_at(now);
            self.last = now;
        }
    }

    /// Does a frame of `len` bytes conform at `now`?
    #[inline]
    pub fn conforms(&self, len: u64, now: Nanos) -> bool {
        self.tokens_at(now) >= self.need(len)
    }

    /// [`conforms`](Self::conforms), keeping the bucket it computed at `now` for
    /// [`consume_conforming`](Self::consume_conforming) (one refill computed for both; the
    /// 128-bit refill was computed twice by `conforms` then `consume`). `None`: it does not
    /// conform.
    #[inline]
    pub fn conforming(&self, len: u64, now: Nanos) -> Option<Conforming> {
        let t = self.tokens_at(now);
        (t >= self.need(len)).then_some(Conforming(t))
    }

    /// [`consume`](Self::consume) of `len` bytes at `now` with the bucket
    /// [`conforming`](Self::conforming) found at this same `now`, the shaper unchanged since:
    /// the same state as `consume` leaves (the refill of `consume` is that bucket: when `now`
    /// is not after the last update, the bucket is the tokens as they are).
    #[inline]
    pub fn consume_conforming(&mut self, c: Conforming, len: u64, now: Nanos) {
        debug_assert_eq!(
            c.0,
            self.tokens_at(now),
            "a bucket of another time or shaper"
        );
        if now > self.last {
            self.last = now;
        }
        self.tokens = c.0.saturating_sub(len as i128 * TOKENS_PER_BYTE);
        self.consumed_bytes = self.consumed_bytes.saturating_add(len);
    }

    /// Take `len` bytes' worth of tokens at `now` (whether or not the frame conformed; the
    /// bucket may go into debt).
    #[inline]
    pub fn consume(&mut self, len: u64, now: Nanos) {
        self.refill(now);
        self.tokens = self.tokens.saturating_sub(len as i128 * TOKENS_PER_BYTE);
        self.consumed_bytes = self.consumed_bytes.saturating_add(len);
    }

    /// If the frame conforms at `now`, consume it and return `true`; else `false`, untouched.
    #[inline]
    pub fn try_consume(&mut self, len: u64, now: Nanos) -> bool {
        if self.conforms(len, now) {
            self.consume(len, now);
            true
        } else {
            false
        }
    }

    /// The earliest time `t >= now` at which a frame of `len` bytes conforms (assuming no other
    /// consumption and no rate change): `now` if it conforms already, `Nanos::MAX` if the rate is
    /// 0 and it does not. Exact: `conforms(len, t)` holds and, when `t` is later than both `now`
    /// and the last update, `conforms(len, t - 1)` does not.
    #[inline]
    pub fn next_conforming(&self, len: u64, now: Nanos) -> Nanos {
        let have = self.tokens_at(now);
        let need = self.need(len);
        if have >= need {
            return now;
        }
        if self.rate_bps == 0 {
            return Nanos::MAX;
        }
        let base = now.max(self.last);
        let missing = (need - have) as u128;
        // A frame's worth of tokens fits 64 bits (a 9 KB frame is 7.2e13): the 64-bit division
        // is one instruction where the 128-bit one is a library call; same quotient.
        let dt = match u64::try_from(missing) {
            Ok(m) => m.div_ceil(self.rate_bps),
            Err(_) => {
                Nanos::try_from(missing.div_ceil(self.rate_bps as u128)).unwrap_or(Nanos::MAX)
            }
        };
        base.saturating_add(dt)
    }

    /// Change the rate at `now`: tokens earned up to `now` count at the old rate.
    pub fn set_rate(&mut self, rate_bps: u64, now: Nanos) {
        self.refill(now);
        self.rate_bps = rate_bps;
    }

    /// Change the bucket depth at `now` (tokens above the new depth are kept until consumed).
    pub fn set_burst(&mut self, burst_bytes: u64, now: Nanos) {
        self.refill(now);
        self.burst_bytes = burst_bytes;
        self.cap_tokens = burst_bytes as i128 * TOKENS_PER_BYTE;
    }

    /// Refill to full at `now` (e.g. when a queue is reassigned to a new flow).
    pub fn reset(&mut self, now: Nanos) {
        self.tokens = self.cap();
        self.last = now;
    }

    /// The rate.
    #[inline]
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// The bucket depth.
    #[inline]
    pub fn burst_bytes(&self) -> u64 {
        self.burst_bytes
    }

    /// Whole bytes of credit at `now` (negative = debt), rounded toward zero.
    pub fn tokens_bytes(&self, now: Nanos) -> i64 {
        let t = self.tokens_at(now) / TOKENS_PER_BYTE;
        t.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Bytes consumed so far.
    pub fn consumed_bytes(&self) -> u64 {
        self.consumed_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::serialization_ns;
    use proptest::prelude::*;

    #[test]
    fn burst_then_rate() {
        // 10 Gb/s, 3000 B burst: two 1500 B frames at t=0, the third 1200 ns later.
        let mut s = Shaper::new(10_000_000_000, 3000, 0);
        assert!(s.try_consume(1500, 0));
        assert!(s.try_consume(1500, 0));
        assert!(!s.conforms(1500, 0));
        assert_eq!(s.next_conforming(1500, 0), 1200);
        assert!(!s.conforms(1500, 1199));
        assert!(s.conforms(1500, 1200));
        assert_eq!(s.tokens_bytes(1200), 1500);
        // Full bucket caps at burst.
        assert_eq!(s.tokens_bytes(1_000_000), 3000);
        assert_eq!(s.consumed_bytes(), 3000);
    }

    #[test]
    fn fractional_rates_do_not_drift() {
        // 1 byte per 0.8 ns at 10 Gb/s; 1 B frames, 2 B burst: exactly 1.25 bytes per ns over
        // many frames although frames leave on whole nanoseconds.
        let mut s = Shaper::new(10_000_000_000, 2, 0);
        let mut t = 0;
        let mut n = 0u64;
        while t < 1_000_000 {
            t = s.next_conforming(1, t);
            s.consume(1, t);
            n += 1;
        }
        // In 1 ms: 1_250_000 bytes (+2 for the initial burst).
        assert!(n.abs_diff(1_250_002) <= 1, "{n}");
    }

    #[test]
    fn larger_than_burst_and_debt() {
        let mut s = Shaper::new(8_000_000_000, 1000, 0); // 1 B/ns
        assert!(s.conforms(5000, 0)); // full bucket: a jumbo frame may go
        s.consume(5000, 0);
        assert_eq!(s.tokens_bytes(0), -4000);
        // Needs min(5000, 1000) = 1000 B: 5000 ns.
        assert_eq!(s.next_conforming(5000, 0), 5000);
        assert_eq!(s.next_conforming(100, 0), 4100);
    }

    #[test]
    fn zero_rate_and_set_rate() {
        let mut s = Shaper::new(0, 100, 0);
        assert!(s.try_consume(100, 0));
        assert_eq!(s.next_conforming(1, 10), Nanos::MAX);
        s.set_rate(8_000_000_000, 10);
        assert_eq!(s.next_conforming(1, 10), 11);
        assert_eq!(s.rate_bps(), 8_000_000_000);
        s.set_burst(10, 20);
        assert_eq!(s.burst_bytes(), 10);
        assert_eq!(s.tokens_bytes(1000), 10);
        s.reset(2000);
        assert_eq!(s.tokens_bytes(2000), 10);
    }

    #[test]
    fn time_going_backwards() {
        let mut s = Shaper::new(8_000_000_000, 0, 100);
        s.consume(10, 100);
        assert!(!s.conforms(1, 50));
        assert_eq!(s.next_conforming(1, 50), 110);
    }

    #[test]
    fn matches_serialization() {
        let mut s = Shaper::new(25_000_000_000, 0, 0);
        s.consume(1024, 0);
        assert_eq!(
            s.next_conforming(64, 0),
            serialization_ns(1024, 25_000_000_000)
        );
    }

    proptest! {
        /// `conforming` then `consume_conforming` answer as `conforms` and leave the state
        /// `consume` leaves, over random rates, depths, rate and depth changes, lengths and times
        /// (going backwards too).
        #[test]
        fn consume_conforming_is_conforms_then_consume(
            rate in 0u64..400_000_000_000,
            burst in 0u64..20_000,
            ops in proptest::collection::vec((0u8..8, 1u64..9000, 0u64..3000, any::<bool>()), 1..300),
        ) {
            let mut a = Shaper::new(rate, burst, 1_000);
            let mut b = a.clone();
            let mut now = 1_000u64;
            for &(op, len, gap, back) in &ops {
                now = if back { now.saturating_sub(gap / 4) } else { now + gap };
                match op {
                    0 => {
                        a.set_rate(len * 10_000_000, now);
                        b.set_rate(len * 10_000_000, now);
                    }
                    1 => {
                        a.set_burst(len, now);
                        b.set_burst(len, now);
                    }
                    _ => {
                        let ok = a.conforms(len, now);
                        if ok {
                            a.consume(len, now);
                        }
                        let c = b.conforming(len, now);
                        prop_assert_eq!(ok, c.is_some());
                        if let Some(c) = c {
                            b.consume_conforming(c, len, now);
                        }
                    }
                }
                prop_assert_eq!(&a, &b);
            }
        }

        /// next_conforming is exact, and the long-run rate never exceeds rate + burst.
        #[test]
        fn exact_and_bounded(
            rate in 1_000_000u64..400_000_000_000,
            burst in 0u64..20_000,
            lens in proptest::collection::vec(1u64..9000, 1..200),
            gaps in proptest::collection::vec(0u64..2000, 200),
        ) {
            let mut s = Shaper::new(rate, burst, 0);
            let mut now = 0u64;
            let mut sent = 0u128;
            let mut maxlen = 0u64;
            for (i, &len) in lens.iter().enumerate() {
                now += gaps[i];
                let t = s.next_conforming(len, now);
                prop_assert!(t >= now);
                prop_assert!(s.conforms(len, t));
                if t > now {
                    prop_assert!(!s.conforms(len, t - 1));
                }
                s.consume(len, t);
                sent += len as u128;
                maxlen = maxlen.max(len);
                now = t;
            }
            // bytes * 8e9 <= rate * elapsed + (burst + maxlen) * 8e9
            prop_assert!(sent * 8_000_000_000 <= rate as u128 * now as u128 + (burst + maxlen) as u128 * 8_000_000_000);
        }
    }
}
