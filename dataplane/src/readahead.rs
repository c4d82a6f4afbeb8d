//! Read-ahead: a file read on a thread of its own, in blocks, while the replay works on the
//! blocks already read.
//!
//! A replay reads its pcaps with `read(2)`, and each call copies from the page cache into the
//! process: about 30 ns of the replay's ~250 ns per 314-byte frame, on the thread that runs the
//! switch. [`ReadAhead`] moves that copy (and any wait for the disk) to a reader thread: it
//! fills blocks of `block` bytes and hands them over through a bounded channel of `depth`
//! blocks; the blocks come back through a second channel to be filled again, so nothing is
//! allocated after the first `depth` blocks. The replay sees an ordinary [`BufRead`]
//! ([`crate::pcap::PcapReader::peek_record`] takes its frames straight from the block).
//!
//! A read error is handed over in order, after the bytes read before it, and ends the stream.
//! Dropping the [`ReadAhead`] closes the channels; the thread ends at its next hand-over.

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

/// Blocks of 1 MiB, 4 of them in flight: the reader is at most 4 MiB ahead.
pub const BLOCK: usize = 1 << 20;
pub const DEPTH: usize = 4;

/// A [`BufRead`] over `inner` read by a thread of its own (see the module).
pub struct ReadAhead {
    full: Receiver<io::Result<Vec<u8>>>,
    free: SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    /// Start reading `inner` on a new thread named `name`, in blocks of `block` bytes (at least
    /// 1), at most `depth` (at least 1) blocks ahead.
    pub fn new<R: Read + Send + 'static>(
        inner: R,
        name: &str,
        block: usize,
        depth: usize,
    ) -> io::Result<Self> {
        let (block, depth) = (block.max(1), depth.max(1));
        let (full_tx, full) = sync_channel(depth);
        let (free, free_rx) = sync_channel(depth);
        for _ in 0..depth {
            // Capacity only; `fill` sizes the block as it reads.
            let _ = free.try_send(Vec::with_capacity(block));
        }
        thread::Builder::new()
            .name(name.into())
            .spawn(move || fill(inner, block, &full_tx, &free_rx))?;
        Ok(ReadAhead {
            full,
            free,
            cur: Vec::new(),
            pos: 0,
            done: false,
        })
    }
}

/// The reader thread: fill each free block, hand it over; an empty block is the end.
fn fill<R: Read>(
    mut inner: R,
    block: usize,
    full: &SyncSender<io::Result<Vec<u8>>>,
    free: &Receiver<Vec<u8>>,
) {
    while let Ok(mut buf) = free.recv() {
        buf.clear();
        // `read_to_end` on `take` fills the block's spare capacity as `read(2)` writes it: no
        // zeroing first. It retries `Interrupted`; on another error the bytes before it stay.
        let res = (&mut inner).take(block as u64).read_to_end(&mut buf);
        let got = buf.len();
        let err = res.err();
        let end = got == 0;
        if got > 0 && full.send(Ok(buf)).is_err() {
            return;
        }
        if let Some(e) = err {
            let _ = full.send(Err(e));
            return;
        }
        if end {
            let _ = full.send(Ok(Vec::new()));
            return;
        }
    }
}

impl ReadAhead {
    /// The next block, the one read returned to the reader thread (out of line: once a block).
    #[inline(never)]
    fn next_block(&mut self) -> io::Result<()> {
        let used = std::mem::take(&mut self.cur);
        if used.capacity() > 0 {
            // The reader may have ended (its end or an error): then the block is not needed.
            let _ = self.free.try_send(used);
        }
        self.pos = 0;
        match self.full.recv() {
            Ok(Ok(b)) if b.is_empty() => self.done = true,
            Ok(Ok(b)) => self.cur = b,
            Ok(Err(e)) => {
                self.done = true;
                return Err(e);
            }
            Err(_) => {
                self.done = true;
                return Err(io::Error::other("the read-ahead thread ended unexpectedly"));
            }
        }
        Ok(())
    }
}

impl BufRead for ReadAhead {
    #[inline]
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.cur.len() && !self.done {
            self.next_block()?;
        }
        Ok(self.cur.get(self.pos..).unwrap_or_default())
    }

    #[inline]
    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.cur.len());
    }
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reads in pieces of the given sizes (cycled); fails with `fail` after `fail_after` bytes.
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
        k: usize,
        fail_after: Option<usize>,
    }

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.fail_after.is_some_and(|f| self.at >= f) {
                return Err(io::Error::other("disk on fire"));
            }
            let want = self.sizes[self.k % self.sizes.len()].max(1);
            self.k += 1;
            let mut n = want.min(out.len()).min(self.data.len() - self.at);
            if let Some(f) = self.fail_after {
                n = n.min(f - self.at);
            }
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    proptest! {
        /// Whatever the block size, depth and the inner reader's short reads, the bytes come
        /// out as they went in; an error comes after every byte read before it, then the end.
        #[test]
        fn bytes_in_order_then_the_error(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            sizes in proptest::collection::vec(1usize..700, 1..5),
            block in 1usize..600,
            depth in 1usize..4,
            fail in proptest::option::of(any::<proptest::sample::Index>()),
        ) {
            let fail_after = fail.map(|i| i.index(data.len() + 1));
            let src = Pieces { data: data.clone(), at: 0, sizes, k: 0, fail_after };
            let mut r = ReadAhead::new(src, "test-read", block, depth).unwrap();
            let mut got = Vec::new();
            let res = r.read_to_end(&mut got);
            match fail_after {
                None => {
                    prop_assert!(res.is_ok());
                    prop_assert_eq!(&got, &data);
                }
                Some(f) => {
                    prop_assert_eq!(res.unwrap_err().to_string(), "disk on fire");
                    prop_assert_eq!(&got[..], &data[..f]);
                }
            }
            prop_assert_eq!(r.fill_buf().unwrap().len(), 0, "ended");
        }
    }

    #[test]
    fn dropped_early_the_thread_ends() {
        // An endless reader: the thread must stop (and drop it) once the ReadAhead is gone.
        struct Endless(std::sync::mpsc::Sender<()>);
        impl Read for Endless {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                out.fill(7);
                Ok(out.len())
            }
        }
        impl Drop for Endless {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let mut r = ReadAhead::new(Endless(tx), "test-read", 64, 2).unwrap();
        assert_eq!(r.fill_buf().unwrap(), &[7; 64][..]);
        drop(r);
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the reader thread ended and dropped its reader");
    }
}
