//! DPDK mbufs as the foundation's packet buffers, zero-copy.
//!
//! An [`Mbuf`] owns one single-segment `struct rte_mbuf`. The frame is the mbuf's data
//! (`rte_pktmbuf_mtod`, `data_len`); prepend/adj/append/trim are DPDK's own
//! `rte_pktmbuf_{prepend,adj,append,trim}` (through the shim), so headroom and tailroom are
//! exactly DPDK's. Longhaul's [`Meta`] lives in the mbuf's private area, right after
//! `struct rte_mbuf` (`rte_mbuf_to_priv`).
//!
//! Why reading and writing `Meta` there is sound:
//! - Every mempool an `Mbuf` can come from was created with `priv_size >= size_of::<Meta>()`:
//!   [`MbufPool::new`] creates pools with [`META_PRIV_SIZE`] and checks the pool reports at least
//!   that; a received mbuf whose pool is not known to be so is dropped
//!   (see `DpdkPort::rx_burst_queue`), never wrapped.
//! - The private area starts at `m + sizeof(struct rte_mbuf)` (128 bytes, asserted in the shim);
//!   `struct rte_mbuf` is cache-line aligned, so the area is 8-byte aligned, which `Meta`
//!   (alignment 8) needs; [`MbufPool::new`] checks this on a real mbuf too.
//! - Nothing else writes the private area while an `Mbuf` owns the mbuf (PMDs never touch it),
//!   and `Meta` is plain integers; still, every `Mbuf` is created with `Meta::default()` written
//!   (alloc, rx, reset), so its `Meta` is always initialised.

use super::eal::{DpdkError, Eal};
use crate::packet::{BufPool, Meta, PacketBuf};
use longhaul_dpdk_sys::{self as sys, mbuf_layout as layout, rte_mbuf, rte_mempool};
use std::ffi::CString;
use std::fmt;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::Arc;

/// The private area longhaul asks of its mempools: `Meta`, rounded up to `RTE_MBUF_PRIV_ALIGN`.
pub const META_PRIV_SIZE: u16 = {
    let s = size_of::<Meta>();
    let a = layout::PRIV_ALIGN;
    let r = s.div_ceil(a) * a;
    assert!(r <= u16::MAX as usize);
    r as u16
};

const _: () = assert!(align_of::<Meta>() <= layout::PRIV_ALIGN);
const _: () = assert!(layout::SIZE & (align_of::<Meta>() - 1) == 0);

/// A DPDK packet mempool (`rte_pktmbuf_pool_create`) whose mbufs carry longhaul's [`Meta`].
///
/// A cheap handle: clones share the mempool (DPDK mempools are safe to use from several
/// threads; EAL lcores get a per-lcore cache). The mempool itself is never freed: ports' rx
/// queues and in-flight mbufs may point into it until the process exits, as in every DPDK
/// application. Create pools once, at startup, with unique names.
#[derive(Clone)]
pub struct MbufPool {
    mp: NonNull<rte_mempool>,
    name: Arc<str>,
    size: u32,
    data_room: usize,
}

// SAFETY: an rte_mempool is a multi-producer/multi-consumer object designed to be shared between
// threads (its default ring ops are MP/MC safe), and the handle never frees it.
unsafe impl Send for MbufPool {}
// SAFETY: as above: every operation through `&MbufPool` is a thread-safe mempool operation.
unsafe impl Sync for MbufPool {}

impl fmt::Debug for MbufPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MbufPool")
            .field("name", &self.name)
            .field("size", &self.size)
            .field("data_room", &self.data_room)
            .field("available", &self.available())
            .finish()
    }
}

impl MbufPool {
    /// A mempool named `name` of `n` mbufs (a power of two minus one is optimal for DPDK) with a
    /// per-lcore cache of `cache` (0..=512, and at most n / 1.5), each with room for `data_room`
    /// frame bytes after DPDK's headroom (RTE_PKTMBUF_HEADROOM), on the calling thread's socket.
    pub fn new(
        eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: usize,
    ) -> Result<MbufPool, DpdkError> {
        let ctx = || format!("DPDK mempool '{name}' ({n} mbufs, {data_room} bytes)");
        let cname = CString::new(name).map_err(|_| DpdkError::msg(ctx(), "NUL in name"))?;
        let headroom = sys::layout().pktmbuf_headroom as usize;
        let room = u16::try_from(data_room + headroom).map_err(|_| {
            DpdkError::msg(
                ctx(),
                format!("data room + {headroom} headroom exceeds 65535"),
            )
        })?;
        // SAFETY: `cname` is NUL-terminated and outlives the call (DPDK copies the name); the
        // numbers are plain values DPDK validates (returning NULL + rte_errno); EAL is up.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                n,
                cache,
                META_PRIV_SIZE,
                room,
                eal.socket_id(),
            )
        };
        let Some(mp) = NonNull::new(mp) else {
            return Err(DpdkError::rte(format!(
                "{}: rte_pktmbuf_pool_create",
                ctx()
            )));
        };
        // SAFETY: `mp` is the live packet mempool just created.
        let priv_size = unsafe { sys::lh_pool_priv_size(mp.as_ptr()) };
        // SAFETY: as above.
        let size = unsafe { sys::lh_mempool_size(mp.as_ptr()) };
        if let Err(why) = check_priv_area(mp, priv_size) {
            // SAFETY: nothing else knows the mempool yet (no mbuf of it is out, no port uses it).
            unsafe { sys::rte_mempool_free(mp.as_ptr()) };
            return Err(DpdkError::msg(ctx(), why));
        }
        let pool = MbufPool {
            mp,
            name: name.into(),
            size,
            data_room,
        };
        Ok(pool)
    }

    /// The mempool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mbufs the pool was created with.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Frame bytes each mbuf holds after the headroom.
    pub fn data_room(&self) -> usize {
        self.data_room
    }

    /// The `struct rte_mempool *` (for ports' rx queues).
    pub fn as_ptr(&self) -> *mut rte_mempool {
        self.mp.as_ptr()
    }
}

/// Check that a new pool's private area can hold `Meta`, on a real mbuf: where it is, and that
/// it is aligned for `Meta`.
fn check_priv_area(mp: NonNull<rte_mempool>, priv_size: u16) -> Result<(), String> {
    if usize::from(priv_size) < size_of::<Meta>() {
        return Err(format!(
            "private area of {priv_size} bytes is too small for Meta"
        ));
    }
    // SAFETY: `mp` is a live packet mempool.
    let Some(m) = NonNull::new(unsafe { sys::lh_pktmbuf_alloc(mp.as_ptr()) }) else {
        return Ok(()); // an empty pool (n = 0): nothing to check, nothing to hand out
    };
    // SAFETY: `m` is a valid mbuf of `mp`, owned here.
    let p = unsafe { sys::lh_mbuf_priv(m.as_ptr()) } as usize;
    // SAFETY: as above; freed once.
    unsafe { sys::lh_pktmbuf_free(m.as_ptr()) };
    if p != m.as_ptr() as usize + layout::SIZE || p & (align_of::<Meta>() - 1) != 0 {
        return Err(format!(
            "mbuf private area at {p:#x} is not where or as aligned as longhaul expects"
        ));
    }
    Ok(())
}

impl BufPool for MbufPool {
    type Buf = Mbuf;

    #[inline]
    fn alloc(&mut self) -> Option<Mbuf> {
        // SAFETY: `mp` is a live packet mempool (never freed).
        let m = NonNull::new(unsafe { sys::lh_pktmbuf_alloc(self.mp.as_ptr()) })?;
        // SAFETY: a fresh, reset, single-segment mbuf we own, from a pool with room for Meta.
        Some(unsafe { Mbuf::from_raw(m) })
    }

    #[inline]
    fn free(&mut self, buf: Mbuf) {
        drop(buf); // rte_pktmbuf_free, into whichever pool the mbuf belongs to
    }

    #[inline]
    fn available(&self) -> usize {
        // SAFETY: `mp` is a live mempool; the count is a racy snapshot, which is all we claim.
        unsafe { sys::lh_mempool_avail_count(self.mp.as_ptr()) as usize }
    }
}

/// One single-segment DPDK mbuf, owned: dropping it frees it (`rte_pktmbuf_free`).
///
/// `repr(transparent)` over the `struct rte_mbuf *`, so a `[Mbuf]` is an array of mbuf pointers
/// that `rte_eth_tx_burst` takes as is.
#[repr(transparent)]
pub struct Mbuf {
    m: NonNull<rte_mbuf>,
}

// SAFETY: an Mbuf is the sole owner of its mbuf (nothing else references it until it is handed to
// a PMD or freed); mbufs may be freed from any thread (the mempool is MP/MC safe), so ownership
// can move between threads/lcores with the Mbuf.
unsafe impl Send for Mbuf {}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mbuf")
            .field("len", &self.len())
            .field("headroom", &self.headroom())
            .field("tailroom", &self.tailroom())
            .field("meta", self.meta())
            .finish()
    }
}

impl Mbuf {
    /// Take ownership of `m`, writing `Meta::default()` into its private area.
    ///
    /// # Safety
    /// `m` is a valid single-segment mbuf that nobody else owns or references, from a mempool
    /// whose private area holds at least `size_of::<Meta>()` bytes.
    #[inline]
    pub(crate) unsafe fn from_raw(m: NonNull<rte_mbuf>) -> Mbuf {
        let b = Mbuf { m };
        // SAFETY: the private area is in bounds, aligned and ours (caller's contract, module doc);
        // `write` does not read the old bytes.
        unsafe { b.meta_ptr().write(Meta::default()) };
        b
    }

    /// Give up ownership: the caller frees (or hands to a PMD) the returned mbuf.
    pub fn into_raw(self) -> NonNull<rte_mbuf> {
        let m = self.m;
        std::mem::forget(self);
        m
    }

    /// The `struct rte_mbuf *`.
    pub fn as_ptr(&self) -> *mut rte_mbuf {
        self.m.as_ptr()
    }

    #[inline]
    fn meta_ptr(&self) -> *mut Meta {
        // SAFETY: the private area follows struct rte_mbuf inside the same mempool object.
        unsafe { self.m.as_ptr().cast::<u8>().add(layout::SIZE) }.cast::<Meta>()
    }

    /// Read a field of `struct rte_mbuf` at `off` (one of the asserted offsets in `mbuf_layout`).
    #[inline]
    fn field<T: Copy>(&self, off: usize) -> T {
        // SAFETY: `off` is the asserted offset of a field of type T inside the 128-byte mbuf we
        // own; the offsets are naturally aligned and the mbuf is cache-line aligned.
        unsafe { self.m.as_ptr().cast::<u8>().add(off).cast::<T>().read() }
    }

    #[inline]
    fn data_ptr(&self) -> *mut u8 {
        let base: *mut u8 = self.field(layout::BUF_ADDR);
        let off: u16 = self.field(layout::DATA_OFF);
        // SAFETY: data_off <= buf_len, so the result stays inside the mbuf's data buffer.
        unsafe { base.add(usize::from(off)) }
    }

    /// Segments in the chain (always 1 for an `Mbuf` longhaul made or received).
    #[inline]
    pub fn nb_segs(&self) -> u16 {
        self.field(layout::NB_SEGS)
    }

    /// `pkt_len` (the whole chain's length; equals `len()` for a single segment).
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        self.field(layout::PKT_LEN)
    }

    /// The pool the mbuf returns to when freed.
    #[inline]
    pub(crate) fn raw_pool(m: NonNull<rte_mbuf>) -> *mut rte_mempool {
        // SAFETY: `pool` is the asserted pointer field at offset 56 of a valid mbuf.
        unsafe {
            m.as_ptr()
                .cast::<u8>()
                .add(layout::POOL)
                .cast::<*mut rte_mempool>()
                .read()
        }
    }

    /// `nb_segs` of a raw mbuf.
    #[inline]
    pub(crate) fn raw_nb_segs(m: NonNull<rte_mbuf>) -> u16 {
        // SAFETY: `nb_segs` is the asserted u16 field at offset 20 of a valid mbuf.
        unsafe {
            m.as_ptr()
                .cast::<u8>()
                .add(layout::NB_SEGS)
                .cast::<u16>()
                .read()
        }
    }

    #[doc(hidden)]
    /// Rust's view (fast path, field reads) and DPDK's (shim calls) of data pointer, length,
    /// headroom and tailroom, for tests: they must agree.
    pub fn views(&self) -> [(usize, usize); 4] {
        let m = self.m.as_ptr();
        // SAFETY: `m` is a valid mbuf we own; these only read it.
        let dpdk = unsafe {
            [
                sys::lh_mtod(m) as usize,
                usize::from(sys::lh_data_len(m)),
                usize::from(sys::lh_headroom(m)),
                usize::from(sys::lh_tailroom(m)),
            ]
        };
        [
            (self.data_ptr() as usize, dpdk[0]),
            (self.len(), dpdk[1]),
            (self.headroom(), dpdk[2]),
            (self.tailroom(), dpdk[3]),
        ]
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; it is freed exactly once (here), into its own pool.
        unsafe { sys::lh_pktmbuf_free(self.m.as_ptr()) }
    }
}

impl PacketBuf for Mbuf {
    #[inline]
    fn prefetch_descriptor(&self) {
        crate::packet::prefetch(self.m.as_ptr());
    }

    #[inline]
    fn prefetch_headers(&self) {
        crate::packet::prefetch(self.data_ptr());
    }

    #[inline]
    fn data(&self) -> &[u8] {
        // SAFETY: data_off + data_len <= buf_len: the bytes are inside the mbuf's buffer, which we
        // own (no PMD or other Mbuf writes them) for as long as `self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.len()) }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` makes this the only reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), self.len()) }
    }

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.field::<u16>(layout::DATA_LEN))
    }

    #[inline]
    fn headroom(&self) -> usize {
        usize::from(self.field::<u16>(layout::DATA_OFF))
    }

    #[inline]
    fn tailroom(&self) -> usize {
        let buf_len = usize::from(self.field::<u16>(layout::BUF_LEN));
        buf_len.saturating_sub(self.headroom() + self.len())
    }

    fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        let n16 = u16::try_from(n).ok()?;
        // SAFETY: we own the mbuf; rte_pktmbuf_prepend checks the headroom and returns NULL
        // (frame unchanged) when it is too small.
        let p = unsafe { sys::lh_pktmbuf_prepend(self.m.as_ptr(), n16) };
        let p = NonNull::new(p.cast::<u8>())?;
        // SAFETY: on success `p` points at the `n` new leading bytes of our frame; `&mut self`.
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n) })
    }

    fn adj(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        // SAFETY: we own the mbuf; n <= data_len <= u16::MAX.
        unsafe { sys::lh_pktmbuf_adj(self.m.as_ptr(), n as u16) == 0 }
    }

    fn append(&mut self, n: usize) -> Option<&mut [u8]> {
        let n16 = u16::try_from(n).ok()?;
        // SAFETY: we own the mbuf; rte_pktmbuf_append checks the tailroom and returns NULL
        // (frame unchanged) when it is too small.
        let p = unsafe { sys::lh_pktmbuf_append(self.m.as_ptr(), n16) };
        let p = NonNull::new(p.cast::<u8>())?;
        // SAFETY: on success `p` points at the `n` new trailing bytes of our frame; `&mut self`.
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n) })
    }

    fn trim(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        // SAFETY: we own the mbuf; n <= data_len <= u16::MAX.
        unsafe { sys::lh_pktmbuf_trim(self.m.as_ptr(), n as u16) == 0 }
    }

    #[inline]
    fn meta(&self) -> &Meta {
        // SAFETY: the private area holds an initialised Meta (written when this Mbuf was made),
        // in bounds and aligned (module doc); shared borrow of `self`.
        unsafe { &*self.meta_ptr() }
    }

    #[inline]
    fn meta_mut(&mut self) -> &mut Meta {
        // SAFETY: as in `meta`, and `&mut self` makes this the only reference.
        unsafe { &mut *self.meta_ptr() }
    }

    fn reset(&mut self) {
        // SAFETY: we own the single-segment mbuf; rte_pktmbuf_reset restores DPDK's default
        // headroom and an empty frame.
        unsafe { sys::lh_pktmbuf_reset(self.m.as_ptr()) };
        *self.meta_mut() = Meta::default();
    }
}
