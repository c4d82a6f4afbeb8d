//! Decoding a fuzz input by hand, arbitrary-crate style: every read succeeds (zeros once the
//! input is used up), so any byte string is a valid program for a target.

/// A cursor over the fuzz input.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// Nothing left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) << 32 | self.u32() as u64
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 256 {
            self.u8() as usize % n
        } else {
            self.u16() as usize % n
        }
    }

    /// Up to `n` bytes (fewer when the input ends).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    /// A length-prefixed (u16) byte string of at most `max` bytes.
    pub fn blob(&mut self, max: usize) -> &'a [u8] {
        let n = self.u16() as usize % (max + 1);
        self.bytes(n)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// A small deterministic generator (SplitMix64) for the smoke test's pseudo-random inputs.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `len` pseudo-random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// `base` with a few bytes changed, cut or extended (mutations like a fuzzer's).
    pub fn mutate(&mut self, base: &[u8]) -> Vec<u8> {
        let mut v = base.to_vec();
        let n = 1 + self.next_u64() % 8;
        for _ in 0..n {
            let r = self.next_u64();
            match r % 5 {
                0..=2 if !v.is_empty() => {
                    let i = (r >> 8) as usize % v.len();
                    v[i] = (r >> 40) as u8;
                }
                3 if !v.is_empty() => {
                    let i = (r >> 8) as usize % v.len();
                    v.truncate(i);
                }
                _ => {
                    let k = (r >> 8) as usize % 16;
                    v.extend(self.bytes(k));
                }
            }
        }
        v
    }
}
