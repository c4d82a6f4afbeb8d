//! Write-behind: a file written by a thread of its own, in blocks, while the replay goes on.
//!
//! The mirror of [`crate::readahead`]: a replay's outputs go through `write(2)`, whose copy into
//! the page cache (and any wait for the disk) would otherwise run on the thread that runs the
//! switch. [`WriteBehind`] gathers what it is given into blocks of `block` bytes and hands full
//! ones to a writer thread through a bounded channel of `depth` blocks; written blocks come back
//! to be filled again, so nothing is allocated after the first `depth + 2` blocks.
//!
//! [`Write::flush`] hands over the partial block and waits until the thread has written
//! everything and flushed the file. The first write error stops the thread; the next `write` or
//! `flush` returns it (as `BufWriter` would, later than the call that caused it). Dropping a
//! `WriteBehind` flushes it, ignoring errors, as `BufWriter` does; call `flush` to see them.

use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

pub use crate::readahead::{BLOCK, DEPTH};

/// What the writer thread is asked to do.
enum Job {
    /// Write the block, then give it back.
    Write(Vec<u8>),
    /// Flush the file and answer.
    Flush,
}

/// A [`Write`] whose writes to `inner` happen on a thread of its own (see the module).
pub struct WriteBehind {
    jobs: SyncSender<Job>,
    /// Written blocks coming back.
    free: Receiver<Vec<u8>>,
    /// The thread's answer to a [`Job::Flush`], or its error when it stopped.
    answers: Receiver<io::Result<()>>,
    cur: Vec<u8>,
    block: usize,
    /// The thread stopped (its error was returned once).
    stopped: bool,
}

impl WriteBehind {
    /// Start a writer thread named `name` for `inner`, in blocks of `block` bytes (at least 1),
    /// at most `depth` (at least 1) blocks behind.
    pub fn new<W: Write + Send + 'static>(
        inner: W,
        name: &str,
        block: usize,
        depth: usize,
    ) -> io::Result<Self> {
        let (block, depth) = (block.max(1), depth.max(1));
        let (jobs, jobs_rx) = sync_channel(depth);
        let (free_tx, free) = sync_channel(depth + 1);
        let (answers_tx, answers) = sync_channel(1);
        thread::Builder::new()
            .name(name.into())
            .spawn(move || drain(inner, &jobs_rx, &free_tx, &answers_tx))?;
        Ok(WriteBehind {
            jobs,
            free,
            answers,
            cur: Vec::with_capacity(block),
            block,
            stopped: false,
        })
    }

    /// Hand the current block to the thread and take an empty one (a recycled block, or a new
    /// one while fewer than `depth + 1` exist).
    fn hand_over(&mut self) -> io::Result<()> {
        let next = match self.free.try_recv() {
            Ok(b) => b,
            Err(_) => Vec::with_capacity(self.block),
        };
        let full = std::mem::replace(&mut self.cur, next);
        if self.jobs.send(Job::Write(full)).is_err() {
            return Err(self.stopped_error());
        }
        Ok(())
    }

    /// The error the thread stopped with (once; afterwards a generic one).
    fn stopped_error(&mut self) -> io::Error {
        if !self.stopped {
            self.stopped = true;
            if let Ok(Err(e)) = self.answers.try_recv() {
                return e;
            }
        }
        io::Error::other("the write-behind thread stopped")
    }
}

/// The writer thread: write each block, give it back; flush and answer when asked. Stops at the
/// first error, after answering with it.
fn drain<W: Write>(
    mut inner: W,
    jobs: &Receiver<Job>,
    free: &SyncSender<Vec<u8>>,
    answers: &SyncSender<io::Result<()>>,
) {
    while let Ok(job) = jobs.recv() {
        let res = match job {
            Job::Write(mut b) => {
                let r = inner.write_all(&b);
                b.clear();
                let _ = free.try_send(b);
                r
            }
            Job::Flush => {
                let r = inner.flush();
                let ok = r.is_ok();
                if answers.send(r).is_err() || !ok {
                    return;
                }
                continue;
            }
        };
        if let Err(e) = res {
            let _ = answers.send(Err(e));
            return;
        }
    }
    let _ = inner.flush();
}

impl Write for WriteBehind {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.block - self.cur.len();
        if buf.len() <= room {
            self.cur.extend_from_slice(buf);
            if self.cur.len() == self.block {
                self.hand_over()?;
            }
            return Ok(buf.len());
        }
        self.cur.extend_from_slice(&buf[..room]);
        self.hand_over()?;
        Ok(room)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.cur.is_empty() {
            self.hand_over()?;
        }
        if self.jobs.send(Job::Flush).is_err() {
            return Err(self.stopped_error());
        }
        match self.answers.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.stopped = true;
                Err(e)
            }
            Err(_) => Err(self.stopped_error()),
        }
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::{Arc, Mutex};

    /// Collects what is written; fails once `fail_after` bytes are in.
    #[derive(Clone)]
    struct Shared {
        out: Arc<Mutex<Vec<u8>>>,
        flushes: Arc<Mutex<u32>>,
        fail_after: Option<usize>,
    }

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut out = self.out.lock().unwrap();
            if self.fail_after.is_some_and(|f| out.len() + buf.len() > f) {
                return Err(io::Error::other("disk full"));
            }
            out.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            *self.flushes.lock().unwrap() += 1;
            Ok(())
        }
    }

    fn shared(fail_after: Option<usize>) -> Shared {
        Shared {
            out: Arc::new(Mutex::new(Vec::new())),
            flushes: Arc::new(Mutex::new(0)),
            fail_after,
        }
    }

    proptest! {
        /// Whatever the block size, depth and pieces, every byte arrives in order by the time
        /// `flush` returns, and the file was flushed.
        #[test]
        fn flush_means_written(
            pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..30),
            block in 1usize..500,
            depth in 1usize..4,
        ) {
            let s = shared(None);
            let mut w = WriteBehind::new(s.clone(), "test-write", block, depth).unwrap();
            let mut want = Vec::new();
            for p in &pieces {
                w.write_all(p).unwrap();
                want.extend_from_slice(p);
            }
            w.flush().unwrap();
            prop_assert_eq!(&*s.out.lock().unwrap(), &want);
            prop_assert!(*s.flushes.lock().unwrap() >= 1);
            drop(w);
            prop_assert_eq!(&*s.out.lock().unwrap(), &want);
        }
    }

    #[test]
    fn an_error_is_returned_and_sticks() {
        let s = shared(Some(100));
        let mut w = WriteBehind::new(s.clone(), "test-write", 64, 2).unwrap();
        let mut err = None;
        for _ in 0..100 {
            if let Err(e) = w.write_all(&[7; 40]) {
                err = Some(e);
                break;
            }
        }
        let e = match err {
            Some(e) => e,
            None => w.flush().unwrap_err(),
        };
        assert!(
            e.to_string().contains("disk full") || e.to_string().contains("stopped"),
            "{e}"
        );
        assert!(w.flush().is_err(), "still failing");
        assert!(s.out.lock().unwrap().len() <= 100);
    }

    #[test]
    fn dropped_without_flush_still_writes() {
        let s = shared(None);
        let mut w = WriteBehind::new(s.clone(), "test-write", 1 << 10, 2).unwrap();
        w.write_all(b"tail of a run").unwrap();
        drop(w);
        assert_eq!(&*s.out.lock().unwrap(), b"tail of a run");
    }
}
