//! Counters: the [`counters!`](crate::counters!) macro that declares a struct of them once, and
//! why packets were dropped or specially handled (every reason has a counter).
//!
//! Counters are plain `u64`s owned by one worker (no atomics per packet, DESIGN.md section 7); the
//! control plane reads snapshots.

/// A value a [`counters!`](crate::counters!) struct may hold: how another worker's value adds
/// into it, and what `for_each` shows of it.
pub trait Counter {
    /// Add `o` (another worker's value of the same counter).
    fn add(&mut self, o: &Self);
    /// Hand the value to `out` under `name`: a `u64` once, an array's elements in index order,
    /// a compound value its total.
    fn emit(&self, name: &'static str, out: &mut dyn FnMut(&'static str, u64));
    /// The value with every part set to `v` (tests of completeness: a part no merge or
    /// `for_each` reaches stays visible).
    fn splat(v: u64) -> Self;
}

impl Counter for u64 {
    #[inline]
    fn add(&mut self, o: &Self) {
        *self += o;
    }
    fn emit(&self, name: &'static str, out: &mut dyn FnMut(&'static str, u64)) {
        out(name, *self);
    }
    fn splat(v: u64) -> Self {
        v
    }
}

impl<const N: usize> Counter for [u64; N] {
    #[inline]
    fn add(&mut self, o: &Self) {
        for (a, b) in self.iter_mut().zip(o.iter()) {
            *a += b;
        }
    }
    fn emit(&self, name: &'static str, out: &mut dyn FnMut(&'static str, u64)) {
        for v in self {
            out(name, *v);
        }
    }
    fn splat(v: u64) -> Self {
        [v; N]
    }
}

/// A [`counters!`](crate::counters!) struct seen generically (its inherent methods, by trait).
pub trait Counters {
    /// Add `o` (another worker's counters).
    fn merge(&mut self, o: &Self);
    /// Every counter by its full name.
    fn for_each(&self, out: &mut dyn FnMut(&'static str, u64));
}

/// The larger of two values: the merge of a `max` field of a [`counters!`](crate::counters!)
/// struct (peaks, high-water marks, table sizes).
#[inline]
pub fn merge_max<T: Ord + Copy>(a: &mut T, b: &T) {
    *a = (*a).max(*b);
}

/// Declare a struct of counters once: each field with its doc comment and its merge kind (a sum
/// unless marked `=> max`). The struct derives `Clone, Debug, Default, PartialEq, Eq` (add
/// `#[derive(Copy)]` among its attributes when its fields allow); every field's type implements
/// [`Counter`]. Generated:
///
/// - `NAMES`: every field's full name, `"<prefix>.<field>"`, in declaration order (built at
///   compile time);
/// - `for_each(&self, out)`: every field by its full name, in declaration order;
/// - `merge(&mut self, o)`: another worker's counters added in (`max` fields take the larger);
/// - `splat(v)`: every field set to `v` (for tests).
///
/// ```
/// longhaul_dataplane::counters! {
///     /// A stage's counters (`demo.*`).
///     #[derive(Copy)]
///     pub struct DemoStats: "demo" {
///         /// Packets seen.
///         pub seen: u64,
///         /// Deepest queue seen, bytes.
///         pub peak_bytes: u64 => max,
///     }
/// }
/// let mut a = DemoStats { seen: 1, peak_bytes: 10 };
/// a.merge(&DemoStats { seen: 2, peak_bytes: 5 });
/// assert_eq!(a, DemoStats { seen: 3, peak_bytes: 10 });
/// assert_eq!(DemoStats::NAMES, ["demo.seen", "demo.peak_bytes"]);
/// ```
#[macro_export]
macro_rules! counters {
    (@merge max $a:expr, $b:expr) => {
        $crate::counters::merge_max(&mut $a, &$b)
    };
    (@merge sum $a:expr, $b:expr) => {
        $crate::counters::Counter::add(&mut $a, &$b)
    };
    (@merge $a:expr, $b:expr) => {
        $crate::counters::Counter::add(&mut $a, &$b)
    };
    (
        $(#[$sattr:meta])*
        $svis:vis struct $name:ident : $prefix:literal {
            $(
                $(#[$fattr:meta])*
                $fvis:vis $field:ident : $ty:ty $(=> $kind:ident)?
            ),* $(,)?
        }
    ) => {
        $(#[$sattr])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        $svis struct $name {
            $(
                $(#[$fattr])*
                $fvis $field: $ty,
            )*
        }

        // Generated for every struct, used or not.
        #[allow(dead_code)]
        impl $name {
            /// Every counter's full name, in declaration order.
            pub const NAMES: &'static [&'static str] =
                &[$(concat!($prefix, ".", stringify!($field))),*];

            /// Every counter by its full name, in declaration order.
            pub fn for_each(&self, out: &mut dyn FnMut(&'static str, u64)) {
                $(
                    $crate::counters::Counter::emit(
                        &self.$field,
                        concat!($prefix, ".", stringify!($field)),
                        out,
                    );
                )*
            }

            /// Add `o` (another worker's counters): sums add, `max` fields take the larger.
            pub fn merge(&mut self, o: &Self) {
                $($crate::counters!(@merge $($kind)? self.$field, o.$field);)*
            }

            /// Every counter set to `v` (tests: a field some output misses stays visible).
            pub fn splat(v: u64) -> Self {
                $name {
                    $($field: $crate::counters::Counter::splat(v),)*
                }
            }
        }

        impl $crate::counters::Counters for $name {
            fn merge(&mut self, o: &Self) {
                $name::merge(self, o)
            }
            fn for_each(&self, out: &mut dyn FnMut(&'static str, u64)) {
                $name::for_each(self, out)
            }
        }
    };
}

/// Reasons a frame is dropped, or handled by the malformed-input policy. Each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header, or a header the parser needed is cut off.
    Truncated = 0,
    /// A length field disagrees with the buffer (IPv4 total length, IPv6 payload, UDP length).
    BadLength,
    /// EtherType the pipeline does not handle.
    UnknownEtherType,
    /// More VLAN tags than the parser accepts.
    VlanStack,
    /// IPv4 header with options (IHL > 5).
    Ipv4Options,
    /// IPv4 fragment.
    Ipv4Fragment,
    /// IPv4 header checksum wrong.
    BadIpChecksum,
    /// IP version field wrong for the EtherType, or IHL < 5.
    BadIpHeader,
    /// TTL / hop limit would reach zero.
    TtlExpired,
    /// No route / no L2 entry.
    NoRoute,
    /// The egress queue (or shared buffer) was full.
    QueueFull,
    /// Lossless class exceeded its PFC headroom (a misconfiguration: should never happen).
    HeadroomOverflow,
    /// Buffer pool exhausted.
    PoolEmpty,
    /// The recirculation port's buffer was full.
    RecircFull,
    /// A stage decided to drop (e.g. a filtered NACK); the stage counts its own detail.
    Pipeline,
    /// A port the packet names does not exist: its egress port, or the ingress port of a
    /// packet back from the recirculation loop.
    BadPort,
    /// The frame is larger than the egress port's MTU.
    TooBig,
    /// Routed toward a next hop whose MAC is not known yet (being resolved by ARP / neighbour
    /// discovery, or not answering).
    NeighborUnresolved,
}

impl DropReason {
    pub const ALL: [DropReason; 18] = [
        DropReason::Truncated,
        DropReason::BadLength,
        DropReason::UnknownEtherType,
        DropReason::VlanStack,
        DropReason::Ipv4Options,
        DropReason::Ipv4Fragment,
        DropReason::BadIpChecksum,
        DropReason::BadIpHeader,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::QueueFull,
        DropReason::HeadroomOverflow,
        DropReason::PoolEmpty,
        DropReason::RecircFull,
        DropReason::Pipeline,
        DropReason::BadPort,
        DropReason::TooBig,
        DropReason::NeighborUnresolved,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// The name used in counters and metrics (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadLength => "bad_length",
            DropReason::UnknownEtherType => "unknown_ethertype",
            DropReason::VlanStack => "vlan_stack",
            DropReason::Ipv4Options => "ipv4_options",
            DropReason::Ipv4Fragment => "ipv4_fragment",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::BadIpHeader => "bad_ip_header",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoute => "no_route",
            DropReason::QueueFull => "queue_full",
            DropReason::HeadroomOverflow => "headroom_overflow",
            DropReason::PoolEmpty => "pool_empty",
            DropReason::RecircFull => "recirc_full",
            DropReason::Pipeline => "pipeline",
            DropReason::BadPort => "bad_port",
            DropReason::TooBig => "too_big",
            DropReason::NeighborUnresolved => "neighbor_unresolved",
        }
    }
}

/// One counter per [`DropReason`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::COUNT],
}

impl DropCounters {
    #[inline]
    pub fn inc(&mut self, r: DropReason) {
        self.counts[r as usize] += 1;
    }
    #[inline]
    pub fn get(&self, r: DropReason) -> u64 {
        self.counts[r as usize]
    }
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Non-zero counters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.counts[*r as usize]))
            .filter(|(_, c)| *c != 0)
    }
    pub fn add(&mut self, other: &DropCounters) {
        Counter::add(&mut self.counts, &other.counts);
    }
}

impl Counter for DropCounters {
    fn add(&mut self, o: &Self) {
        DropCounters::add(self, o);
    }
    fn emit(&self, name: &'static str, out: &mut dyn FnMut(&'static str, u64)) {
        out(name, self.total());
    }
    fn splat(v: u64) -> Self {
        DropCounters {
            counts: [v; DropReason::COUNT],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unique_and_counted() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut c = DropCounters::default();
        c.inc(DropReason::NoRoute);
        c.inc(DropReason::NoRoute);
        assert_eq!(c.get(DropReason::NoRoute), 2);
        assert_eq!(c.total(), 2);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![("no_route", 2)]);
    }

    crate::counters! {
        /// Two counters, as a mechanism would declare them.
        #[derive(Copy)]
        struct Before: "demo" {
            /// A sum.
            seen: u64,
            /// A peak.
            peak: u64 => max,
        }
    }

    crate::counters! {
        /// The same with a field added, of every kind.
        struct After: "demo" {
            /// A sum.
            seen: u64,
            /// A peak.
            peak: u64 => max,
            /// The field added.
            added: u64,
            per_class: [u64; 2],
            drops: DropCounters,
        }
    }

    /// Every field of `T` reaches `NAMES`, `for_each` and `merge`: `for_each` shows exactly
    /// `names` (each name once per value), and after merging `splat(2)` into `splat(1)` no value
    /// is still 1 (a sum gives 3, a max 2).
    fn complete<T: Counters>(names: &[&str], splat: fn(u64) -> T) {
        let mut seen = Vec::new();
        let mut a = splat(1);
        a.merge(&splat(2));
        a.for_each(&mut |n, v| seen.push((n, v)));
        let mut got: Vec<&str> = seen.iter().map(|(n, _)| *n).collect();
        got.dedup();
        assert_eq!(got, names);
        for (n, v) in seen {
            assert!(
                v == 2 || v == 3 || v == 3 * DropReason::COUNT as u64,
                "{n} = {v}: not merged"
            );
        }
    }

    #[test]
    fn a_field_added_reaches_every_output() {
        assert_eq!(Before::NAMES, ["demo.seen", "demo.peak"]);
        assert_eq!(
            After::NAMES,
            [
                "demo.seen",
                "demo.peak",
                "demo.added",
                "demo.per_class",
                "demo.drops"
            ]
        );
        complete(Before::NAMES, Before::splat);
        complete(After::NAMES, After::splat);
        let mut a = After {
            added: 1,
            per_class: [1, 2],
            peak: 5,
            ..After::default()
        };
        let b = After {
            added: 2,
            per_class: [10, 20],
            peak: 4,
            ..After::default()
        };
        a.merge(&b);
        assert_eq!((a.added, a.per_class, a.peak), (3, [11, 22], 5));
        let mut out = Vec::new();
        a.for_each(&mut |n, v| out.push((n, v)));
        assert_eq!(
            out,
            [
                ("demo.seen", 0),
                ("demo.peak", 5),
                ("demo.added", 3),
                ("demo.per_class", 11),
                ("demo.per_class", 22),
                ("demo.drops", 0),
            ]
        );
    }
}
