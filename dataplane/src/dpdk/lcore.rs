//! EAL lcores: which exist, and running a Rust closure on a worker lcore
//! (`rte_eal_remote_launch`), where it runs on EAL's thread for that lcore, pinned to the lcore's
//! CPU set, with the lcore's id (so mempool operations use the per-lcore cache).

use super::eal::{DpdkError, Eal};
use longhaul_dpdk_sys as sys;
use std::any::Any;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Mutex;

/// Worker lcores with a closure launched and not yet joined (a lcore runs one at a time).
static BUSY: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// RTE_MAX_LCORE as `rte_get_next_lcore` reports "no more".
const MAX_LCORE: u32 = 1024;

type Job = Box<dyn FnOnce() + Send + 'static>;

impl Eal {
    /// The main lcore (the thread that called [`Eal::init`]).
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: reads EAL's configuration; EAL is up (`self` proves it).
        unsafe { sys::rte_get_main_lcore() }
    }

    /// The worker lcores (every enabled lcore but the main one), in increasing order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut out = Vec::new();
        // SAFETY: reads EAL's configuration; EAL is up. -1 as unsigned starts the iteration.
        let mut i = unsafe { sys::rte_get_next_lcore(u32::MAX, 1, 0) };
        while i < MAX_LCORE && out.len() < MAX_LCORE as usize {
            out.push(i);
            // SAFETY: as above.
            i = unsafe { sys::rte_get_next_lcore(i, 1, 0) };
        }
        out
    }

    /// The CPU a lcore is pinned to (its first CPU), if EAL knows the lcore.
    pub fn lcore_cpu(&self, lcore: u32) -> Option<u32> {
        let id = c_int::try_from(lcore).ok()?;
        // SAFETY: reads EAL's configuration; out-of-range ids return -1.
        let cpu = unsafe { sys::rte_lcore_to_cpu_id(id) };
        u32::try_from(cpu).ok()
    }

    /// Run `f` on worker lcore `lcore` (EAL's thread for it, pinned to the lcore's CPU set).
    /// Err when `lcore` is not a worker lcore or already runs something. [`LcoreJoin::join`]
    /// waits for the result without spinning.
    pub fn launch<T, F>(&self, lcore: u32, f: F) -> Result<LcoreJoin<T>, DpdkError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let ctx = || format!("EAL lcore {lcore}");
        if !self.worker_lcores().contains(&lcore) {
            return Err(DpdkError::msg(
                ctx(),
                format!(
                    "not a worker lcore (main lcore {}, worker lcores {:?}; give EAL more with -l)",
                    self.main_lcore(),
                    self.worker_lcores()
                ),
            ));
        }
        {
            let mut busy = BUSY.lock().unwrap_or_else(|e| e.into_inner());
            if busy.contains(&lcore) {
                return Err(DpdkError::msg(ctx(), "already running a job"));
            }
            busy.push(lcore);
        }
        let (tx, rx) = mpsc::sync_channel::<T>(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        let arg = Box::into_raw(Box::new(job)).cast::<c_void>();
        // SAFETY: `trampoline` takes ownership of `arg` (a leaked `Box<Job>`) exactly once when
        // the launch succeeds; the lcore is a worker lcore and no other launch on it is in
        // progress (BUSY).
        let ret = unsafe { sys::rte_eal_remote_launch(trampoline, arg, lcore) };
        if ret != 0 {
            // SAFETY: the launch failed, so the lcore never saw `arg`: it is still ours.
            drop(unsafe { Box::from_raw(arg.cast::<Job>()) });
            release(lcore);
            return Err(DpdkError::from_errno(
                format!("{}: rte_eal_remote_launch", ctx()),
                -ret,
            ));
        }
        Ok(LcoreJoin {
            lcore,
            rx,
            joined: false,
        })
    }
}

/// Runs the job `arg` (a `Box<Job>`) on the lcore; a panic is caught (it must not cross FFI) and
/// reported as -1 (the job's result channel is dropped, which `join` sees).
unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Box<Job>` leaked by `launch`, handed to us once.
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(()) => 0,
        Err(p) => {
            drop::<Box<dyn Any + Send>>(p);
            -1
        }
    }
}

fn release(lcore: u32) {
    let mut busy = BUSY.lock().unwrap_or_else(|e| e.into_inner());
    busy.retain(|&l| l != lcore);
}

/// A closure running on a worker lcore; [`LcoreJoin::join`] waits for its result. Dropping it
/// without joining waits too (the lcore is free again afterwards).
pub struct LcoreJoin<T> {
    lcore: u32,
    rx: mpsc::Receiver<T>,
    joined: bool,
}

impl<T> LcoreJoin<T> {
    /// The lcore it runs on.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }

    /// Wait for the closure to finish (blocking on a channel, not spinning) and return its
    /// result; Err when it panicked.
    pub fn join(mut self) -> Result<T, DpdkError> {
        self.wait()
    }

    fn wait(&mut self) -> Result<T, DpdkError> {
        let res = self.rx.recv();
        if !self.joined {
            self.joined = true;
            // The job has finished (it sent its result or dropped the sender while unwinding):
            // the lcore is back, or about to be, in WAIT state; this returns at once.
            // SAFETY: `lcore` is a worker lcore we launched on; waiting on it is always allowed.
            unsafe { sys::rte_eal_wait_lcore(self.lcore) };
            release(self.lcore);
        }
        res.map_err(|_| DpdkError::msg(format!("EAL lcore {}", self.lcore), "the job panicked"))
    }
}

impl<T> Drop for LcoreJoin<T> {
    fn drop(&mut self) {
        if !self.joined {
            let _ = self.wait();
        }
    }
}
