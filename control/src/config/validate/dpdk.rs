//! `[dpdk]` and the DPDK keys of `ports[].io` (`kind = "dpdk"`): EAL arguments, the mbuf pool,
//! queues and descriptors, and the rules that tie them together (docs/config.md, docs/dpdk.md).

use super::super::raw::{RawDpdk, RawPortIo, RawWorkerRate};
use super::super::{DpdkConfig, PortConfig, PortIo, SwitchConfig, WorkerRate};
use super::{span, Span, Validator, MIN_MTU};

const DEFAULT_MBUFS: i64 = 16_383;
const MAX_MBUFS: i64 = 64 * 1024 * 1024;
const DEFAULT_MBUF_CACHE: i64 = 256;
/// RTE_MEMPOOL_CACHE_MAX_SIZE.
const MAX_MBUF_CACHE: i64 = 512;
/// 65535 minus DPDK's 128-byte headroom (an mbuf's buffer length is a u16).
const MAX_MBUF_DATA_ROOM: i64 = 65_535 - 128;
const DEFAULT_QUEUES: i64 = 1;
const MAX_QUEUES: i64 = 64;
const DEFAULT_DESC: i64 = 1024;
/// Most worker lcores (the ports' queue limit).
const MAX_WORKERS: i64 = MAX_QUEUES;
const MIN_DESC: i64 = 64;
const MAX_DESC: i64 = 16_384;

impl Validator<'_> {
    /// `ports[i].io` with `kind = "dpdk"`.
    pub(super) fn dpdk_port_io(&mut self, key: &str, io: &RawPortIo, table: &Span) -> PortIo {
        let dkey = format!("{key}.device");
        let device = match self.required(&dkey, &io.device, table) {
            Some(d) if d.get_ref().trim().is_empty() => {
                self.err(
                    dkey,
                    span(d),
                    "must not be empty: a PCI address (0000:3b:00.0) or a vdev name (net_null0)",
                );
                String::new()
            }
            Some(d) => d.get_ref().trim().to_owned(),
            None => String::new(),
        };
        let mut num = |k: &str, v, default, lo, hi| {
            self.int_or(&format!("{key}.{k}"), v, default, lo, hi) as u16
        };
        let rx_queues = num("rx_queues", &io.rx_queues, DEFAULT_QUEUES, 1, MAX_QUEUES);
        let tx_queues = num("tx_queues", &io.tx_queues, DEFAULT_QUEUES, 1, MAX_QUEUES);
        let rx_desc = num("rx_desc", &io.rx_desc, DEFAULT_DESC, MIN_DESC, MAX_DESC);
        let tx_desc = num("tx_desc", &io.tx_desc, DEFAULT_DESC, MIN_DESC, MAX_DESC);
        PortIo::Dpdk {
            device,
            rx_queues,
            tx_queues,
            rx_desc,
            tx_desc,
        }
    }

    /// `[dpdk]`, and the rules across it and the ports: DPDK ports need it, DPDK ports do not mix
    /// with pcap or memory ports, a device is used by one port, the pool holds every rx
    /// descriptor, the mbufs hold the largest frame.
    pub(super) fn dpdk(
        &mut self,
        d: Option<&RawDpdk>,
        sw: &SwitchConfig,
        ports: &[PortConfig],
    ) -> Option<DpdkConfig> {
        let dpdk_ports: Vec<(usize, &PortConfig)> = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.io, PortIo::Dpdk { .. }))
            .collect();
        if let Some((i, first)) = dpdk_ports.first() {
            for (j, p) in ports.iter().enumerate() {
                let kind = match p.io {
                    PortIo::Pcap { .. } => "pcap",
                    PortIo::Memory => "memory",
                    _ => continue,
                };
                self.err(
                    format!("ports[{j}].io.kind"),
                    None,
                    format!(
                        "port '{}' has io kind \"{kind}\" but port '{}' (ports[{i}]) is a DPDK port: \
                         one run uses either DPDK ports or pcap/memory ports, not both; use a \
                         net_pcap vdev instead (\"--vdev=net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap\" \
                         in [dpdk] eal_args, and kind = \"dpdk\", device = \"net_pcap0\")",
                        p.name, first.name
                    ),
                );
            }
            for (n, (i, p)) in dpdk_ports.iter().enumerate() {
                let PortIo::Dpdk { device, .. } = &p.io else {
                    continue;
                };
                let dup = dpdk_ports[..n].iter().find(
                    |(_, o)| matches!(&o.io, PortIo::Dpdk { device: od, .. } if od == device),
                );
                if let (Some((j, o)), false) = (dup, device.is_empty()) {
                    self.err(
                        format!("ports[{i}].io.device"),
                        None,
                        format!(
                            "device '{device}' is also port '{}' (ports[{j}]): a DPDK device is one port",
                            o.name
                        ),
                    );
                }
            }
            if d.is_none() {
                self.err(
                    "dpdk",
                    None,
                    format!(
                        "port '{}' (ports[{i}]) has io kind \"dpdk\", which needs a [dpdk] table \
                         with eal_args (e.g. eal_args = [\"-l\", \"0-1\", \"--no-huge\", \
                         \"--no-pci\", \"--vdev=net_null0\"])",
                        first.name
                    ),
                );
            }
        }
        let d = d?;
        let eal_args = match &d.eal_args {
            None => {
                self.err(
                    "dpdk.eal_args",
                    None,
                    "missing (this key is required): the EAL arguments, e.g. [\"-l\", \"0-1\", \
                     \"--no-huge\", \"--no-pci\", \"--vdev=net_null0\"]",
                );
                Vec::new()
            }
            Some(list) => {
                let mut out = Vec::new();
                for (k, a) in list.get_ref().iter().enumerate() {
                    let s = a.get_ref();
                    if s.trim().is_empty() {
                        self.err(
                            format!("dpdk.eal_args[{k}]"),
                            span(a),
                            "must not be empty: one EAL argument per string",
                        );
                    } else if s.contains('\0') {
                        self.err(
                            format!("dpdk.eal_args[{k}]"),
                            span(a),
                            "must not contain a NUL character",
                        );
                    } else {
                        out.push(s.clone());
                    }
                }
                out
            }
        };
        let mbufs = self.int_or("dpdk.mbufs", &d.mbufs, DEFAULT_MBUFS, 1, MAX_MBUFS);
        let mbuf_cache = self.int_or(
            "dpdk.mbuf_cache",
            &d.mbuf_cache,
            DEFAULT_MBUF_CACHE,
            0,
            MAX_MBUF_CACHE,
        );
        // DPDK refuses a cache larger than n / 1.5 (CACHE_FLUSHTHRESH_MULTIPLIER).
        if mbuf_cache * 3 > mbufs * 2 {
            let s = d.mbuf_cache.as_ref().or(d.mbufs.as_ref()).and_then(span);
            let key = if d.mbuf_cache.is_some() {
                "dpdk.mbuf_cache"
            } else {
                "dpdk.mbufs"
            };
            self.err(
                key,
                s,
                format!(
                    "a per-lcore cache of {mbuf_cache} needs at least {} mbufs (DPDK: cache <= mbufs / 1.5)",
                    (mbuf_cache * 3 + 1) / 2
                ),
            );
        }
        let rx_desc_total: i64 = dpdk_ports
            .iter()
            .map(|(_, p)| match p.io {
                PortIo::Dpdk {
                    rx_queues, rx_desc, ..
                } => i64::from(rx_queues) * i64::from(rx_desc),
                _ => 0,
            })
            .sum();
        if mbufs <= rx_desc_total {
            self.err(
                "dpdk.mbufs",
                d.mbufs.as_ref().and_then(span),
                format!(
                    "{mbufs} mbufs cannot fill the {rx_desc_total} rx descriptors of the DPDK ports \
                     (rx_queues x rx_desc, summed) and leave any for packets in flight: use at least \
                     {} (e.g. {})",
                    rx_desc_total + 1,
                    ((rx_desc_total as u64 + 1) * 2).next_power_of_two() - 1
                ),
            );
        }
        let mbuf_data_room = self.int_or(
            "dpdk.mbuf_data_room",
            &d.mbuf_data_room,
            sw.buffer_data_room as i64,
            MIN_MTU,
            MAX_MBUF_DATA_ROOM,
        );
        if let Some(p) = ports.iter().rev().max_by_key(|p| p.mtu) {
            if i64::from(p.mtu) > mbuf_data_room {
                self.err(
                    "dpdk.mbuf_data_room",
                    d.mbuf_data_room.as_ref().and_then(span),
                    format!(
                        "{mbuf_data_room} bytes cannot hold a frame of port '{}' (mtu {}): a frame \
                         must fit in one mbuf",
                        p.name, p.mtu
                    ),
                );
            }
        }
        let workers = self.int_or("dpdk.workers", &d.workers, 1, 1, MAX_WORKERS) as u16;
        // Each worker polls its own rx queue (hardware RSS) or one worker polls the only queue and
        // dispatches in software; likewise for tx. Any other count would leave queues unpolled.
        for (i, p) in &dpdk_ports {
            let PortIo::Dpdk {
                rx_queues,
                tx_queues,
                ..
            } = p.io
            else {
                continue;
            };
            for (k, n) in [("rx_queues", rx_queues), ("tx_queues", tx_queues)] {
                if n != 1 && n != workers {
                    self.err(
                        format!("ports[{i}].io.{k}"),
                        None,
                        format!(
                            "{n} queues on port '{}' with dpdk.workers = {workers}: use {workers} \
                             (one per worker; rx needs a NIC with RSS) or 1 (one worker polls the \
                             queue and dispatches to the others in software)",
                            p.name
                        ),
                    );
                }
            }
        }
        if workers > 1 && dpdk_ports.is_empty() {
            self.err(
                "dpdk.workers",
                d.workers.as_ref().and_then(span),
                format!(
                    "{workers} workers need DPDK ports (io.kind = \"dpdk\"): pcap and null ports \
                     run on one worker"
                ),
            );
        }
        let worker_rate = match d.worker_rate.as_ref().map(|r| *r.get_ref()) {
            None | Some(RawWorkerRate::Split) => WorkerRate::Split,
            Some(RawWorkerRate::Full) => WorkerRate::Full,
        };
        Some(DpdkConfig {
            eal_args,
            mbufs: mbufs as u32,
            mbuf_cache: mbuf_cache as u32,
            mbuf_data_room: mbuf_data_room as usize,
            workers,
            worker_rate,
        })
    }
}
