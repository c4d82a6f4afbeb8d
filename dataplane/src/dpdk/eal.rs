//! The DPDK Environment Abstraction Layer, started once per process.

use longhaul_dpdk_sys as sys;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::sync::{Mutex, OnceLock};

/// A DPDK failure: what was being done (`context`, naming the port or the call) and DPDK's error
/// text for `errno` (`rte_strerror`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkError {
    context: String,
    errno: i32,
    text: String,
}

impl DpdkError {
    /// An error with DPDK's text for `errno` (a positive errno or `E_RTE_*`).
    pub(crate) fn from_errno(context: impl Into<String>, errno: i32) -> Self {
        DpdkError {
            context: context.into(),
            errno,
            text: strerror(errno),
        }
    }

    /// An error from the calling thread's `rte_errno`.
    pub(crate) fn rte(context: impl Into<String>) -> Self {
        // SAFETY: reads the calling thread's rte_errno (a per-lcore TLS variable); no arguments.
        let errno = unsafe { sys::lh_errno() };
        Self::from_errno(context, errno)
    }

    /// An error with errno and longhaul's own text for it.
    pub(crate) fn new(context: impl Into<String>, errno: i32, text: impl Into<String>) -> Self {
        DpdkError {
            context: context.into(),
            errno,
            text: text.into(),
        }
    }

    /// An error found by longhaul itself (no errno).
    pub(crate) fn msg(context: impl Into<String>, text: impl Into<String>) -> Self {
        DpdkError {
            context: context.into(),
            errno: 0,
            text: text.into(),
        }
    }

    /// What failed, e.g. `DPDK port 'net_null0': rte_eth_dev_configure(1 rxq, 1 txq)`.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The errno DPDK reported (0 when the error is longhaul's own).
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// DPDK's error text (`rte_strerror(errno)`), or longhaul's explanation.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.text)?;
        if self.errno != 0 {
            write!(f, " (errno {})", self.errno)?;
        }
        Ok(())
    }
}

impl std::error::Error for DpdkError {}

/// `rte_strerror(errno)`, copied.
fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror accepts any int and returns a NUL-terminated string, either static or
    // in a per-thread buffer that stays valid until this thread's next call; we copy it at once.
    let p = unsafe { sys::rte_strerror(errno) };
    if p.is_null() {
        return format!("error {errno}");
    }
    // SAFETY: `p` is non-null and NUL-terminated (above), and not freed while we copy it.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The level of a DPDK log message, from DPDK's eight (`RTE_LOG_EMERG` ..= `RTE_LOG_DEBUG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `EMERG`, `ALERT`, `CRIT`, `ERR`.
    Error,
    /// `WARNING`.
    Warn,
    /// `NOTICE`, `INFO`.
    Info,
    /// `DEBUG`.
    Debug,
}

impl LogLevel {
    fn from_rte(level: u32) -> LogLevel {
        match level {
            0..=4 => LogLevel::Error,
            5 => LogLevel::Warn,
            6 | 7 => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

/// Where DPDK's log lines go once [`route_logs`] is called: each line (without its newline),
/// with its level, on the thread that logged it.
pub type LogSink = fn(LogLevel, &str);

static LOG_SINK: OnceLock<LogSink> = OnceLock::new();
/// What DPDK wrote after its last newline (a message written in pieces).
static LOG_PENDING: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Send every DPDK log message to `sink`, one call per line, instead of DPDK's stderr/syslog
/// stream: call it before [`Eal::init`] and EAL's own lines go there too (`longhaul run` hands
/// them to its logger, so with `LONGHAUL_LOG_FORMAT=json` they are JSON like every other line).
/// Once per process: a later call keeps the first sink and returns `Ok`.
pub fn route_logs(sink: LogSink) -> Result<(), DpdkError> {
    if LOG_SINK.set(sink).is_err() {
        return Ok(());
    }
    // SAFETY: `log_write` has the C signature `lh_log_to_callback` expects, never unwinds into C
    // (it catches panics) and stays valid for the life of the process, as the stream does (DPDK
    // may log until exit; the shim never closes it).
    let ret = unsafe { sys::lh_log_to_callback(log_write) };
    if ret != 0 {
        return Err(DpdkError::from_errno(
            "DPDK log stream: rte_openlog_stream(fopencookie)",
            -ret,
        ));
    }
    Ok(())
}

/// The stream's write callback: DPDK (rte_vlog) wrote `len` bytes of a message of `level`.
unsafe extern "C" fn log_write(level: u32, buf: *const c_char, len: usize) {
    if buf.is_null() || len == 0 {
        return;
    }
    // SAFETY: the shim passes on what glibc hands a fopencookie write function: `len` readable
    // bytes at `buf`, valid for the duration of this call (copied below before returning).
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    let _ = std::panic::catch_unwind(|| log_lines(LogLevel::from_rte(level), bytes));
}

/// The complete lines of what has been written so far, to the sink (outside the lock).
fn log_lines(level: LogLevel, bytes: &[u8]) {
    let Some(sink) = LOG_SINK.get() else {
        return;
    };
    let lines: Vec<String> = {
        let mut pending = LOG_PENDING.lock().unwrap_or_else(|e| e.into_inner());
        pending.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..i]);
            let text = text.trim_end();
            if !text.is_empty() {
                lines.push(text.to_owned());
            }
        }
        lines
    };
    for l in &lines {
        sink(level, l);
    }
}

/// The EAL of this process: the first `Eal::init`'s arguments and outcome.
static EAL: OnceLock<(Vec<String>, Result<(), DpdkError>)> = OnceLock::new();

/// Proof that DPDK's EAL is up in this process (a zero-sized, copyable handle).
///
/// EAL can be started once per process: it stays up until exit (no `rte_eal_cleanup`, which would
/// leave a process that can never use DPDK again).
#[derive(Clone, Copy, Debug)]
pub struct Eal {
    _private: (),
}

impl Eal {
    /// Start EAL with `args` (the EAL arguments only, e.g. `["-l", "0-1", "--no-huge",
    /// "--no-pci", "--vdev=net_null0"]`; the program name is supplied here). Once per process: a
    /// second call with the same arguments returns the same handle (or the same error), one with
    /// different arguments is an error.
    ///
    /// Calling thread: becomes EAL's main lcore (and is pinned to its CPU set).
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        let (first, res) = EAL.get_or_init(|| (args.to_vec(), start(args)));
        if first.as_slice() != args {
            return Err(DpdkError::msg(
                "EAL",
                format!(
                    "already started in this process with {first:?}; it cannot be started again \
                     with {args:?}"
                ),
            ));
        }
        res.clone().map(|()| Eal { _private: () })
    }

    /// The handle, if EAL was started successfully.
    pub fn get() -> Option<Eal> {
        match EAL.get() {
            Some((_, Ok(()))) => Some(Eal { _private: () }),
            _ => None,
        }
    }

    /// The arguments EAL was started with.
    pub fn args(&self) -> &'static [String] {
        EAL.get().map_or(&[], |(a, _)| a.as_slice())
    }

    /// The calling thread's lcore id (`u32::MAX`, LCORE_ID_ANY, on a thread EAL did not create).
    pub fn lcore_id(&self) -> u32 {
        // SAFETY: reads a per-thread variable EAL set up (EAL is up: `self` proves it).
        unsafe { sys::lh_lcore_id() }
    }

    /// The calling thread's NUMA socket (`SOCKET_ID_ANY` = -1 on a non-EAL thread).
    pub fn socket_id(&self) -> i32 {
        // SAFETY: reads a per-thread variable; EAL is up.
        unsafe { sys::rte_socket_id() as i32 }
    }

    /// The time stamp counter (`rte_rdtsc`).
    #[inline]
    pub fn tsc(&self) -> u64 {
        // SAFETY: executes rdtsc (or the platform's counter read); no memory is touched.
        unsafe { sys::lh_rdtsc() }
    }

    /// TSC ticks per second, as EAL calibrated it.
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: reads a value EAL computed at init; EAL is up.
        unsafe { sys::lh_tsc_hz() }
    }

    /// Names of the ethdev ports that exist (probed PCI devices, vdevs, ring pairs), by port id.
    pub fn port_names(&self) -> Vec<(u16, String)> {
        let mut ids = [0u16; 1024];
        // SAFETY: `ids` has room for 1024 entries and we pass that bound; EAL is up.
        let n = unsafe { sys::lh_port_list(ids.as_mut_ptr(), ids.len() as i32) };
        let n = usize::try_from(n).unwrap_or(0).min(ids.len());
        ids[..n]
            .iter()
            .filter_map(|&id| port_name(id).map(|name| (id, name)))
            .collect()
    }

    /// Create two ethdev ports `a` and `b` joined back to back by two `rte_ring`s of `depth`
    /// (a power of two; depth - 1 usable) entries, as net_ring's `rte_eth_from_rings`: what one
    /// transmits the other receives. Returns the ethdev names DPDK gave them (`net_ring_<a>`,
    /// `net_ring_<b>`), to open with [`DpdkPort::open`](super::DpdkPort::open).
    pub fn ring_pair(&self, a: &str, b: &str, depth: u32) -> Result<(String, String), DpdkError> {
        let ctx = || format!("DPDK ring pair '{a}' <-> '{b}'");
        let (ca, cb) = match (CString::new(a), CString::new(b)) {
            (Ok(ca), Ok(cb)) => (ca, cb),
            _ => return Err(DpdkError::msg(ctx(), "name contains a NUL byte")),
        };
        let (mut pa, mut pb) = (0u16, 0u16);
        // SAFETY: `ca`/`cb` are NUL-terminated and outlive the call; `pa`/`pb` are valid u16 out
        // pointers; EAL is up.
        let ret = unsafe {
            sys::lh_ring_pair(
                ca.as_ptr(),
                cb.as_ptr(),
                depth,
                self.socket_id(),
                &mut pa,
                &mut pb,
            )
        };
        if ret != 0 {
            return Err(DpdkError::from_errno(ctx(), -ret));
        }
        match (port_name(pa), port_name(pb)) {
            (Some(na), Some(nb)) => Ok((na, nb)),
            _ => Err(DpdkError::msg(ctx(), "created, but the ports have no name")),
        }
    }
}

/// The ethdev name of `id` (`rte_eth_dev_get_name_by_port`).
pub(crate) fn port_name(id: u16) -> Option<String> {
    let mut buf = [0 as c_char; sys::ETH_NAME_MAX_LEN];
    // SAFETY: `buf` has RTE_ETH_NAME_MAX_LEN bytes, the size the function writes at most.
    let ret = unsafe { sys::rte_eth_dev_get_name_by_port(id, buf.as_mut_ptr()) };
    if ret != 0 {
        return None;
    }
    // SAFETY: on success the function wrote a NUL-terminated name into `buf`.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn start(args: &[String]) -> Result<(), DpdkError> {
    sys::check_layout().map_err(|e| DpdkError::msg("EAL", e))?;
    let mut owned = Vec::with_capacity(args.len() + 1);
    for a in std::iter::once("longhaul").chain(args.iter().map(String::as_str)) {
        match CString::new(a) {
            Ok(c) => owned.push(c),
            Err(_) => {
                return Err(DpdkError::msg(
                    "EAL",
                    format!("argument {a:?} contains a NUL byte"),
                ))
            }
        }
    }
    // EAL may keep pointers into argv (and reorders it): give it strings that live forever. This
    // happens once per process.
    let argv: &'static mut [*mut c_char] = Box::leak(
        owned
            .into_iter()
            .map(CString::into_raw)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let argc = (argv.len() - 1) as i32;
    // SAFETY: argv holds `argc` valid, NUL-terminated, never-freed strings followed by a null
    // pointer, as C's main() would; the OnceLock guarantees one call per process.
    let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
    if ret < 0 {
        return Err(DpdkError::rte(format!("EAL: rte_eal_init({args:?})")));
    }
    Ok(())
}
