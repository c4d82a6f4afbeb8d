//! The DPDK Environment Abstraction Layer, started once per process.

use longhaul_dpdk_sys as sys;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::sync::OnceLock;

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
