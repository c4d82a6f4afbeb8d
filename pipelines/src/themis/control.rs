//! THEMIS's control plane: the master copy of QP_field and of the inter-DC pairs, the daemon
//! message policy, and TRP installs, on top of the baseline's `l2` and `routes` tables.
//!
//! Punts handled (section IV and V-B):
//! - `PUNT_DAEMON`: a daemon datagram from a DC port. The policy (host prefixes, DC ports,
//!   inter-DC test) is applied against the master tables; an accepted create/modify installs
//!   QP_field on every worker, a destroy removes it and resets its CNP timestamp register.
//! - `PUNT_HANDSHAKE`: the SYN-cookie monitor validated a handshake: the pair becomes inter-DC on
//!   every worker (so the client's retried handshake passes) and in the master copy (so later
//!   daemon messages for it are accepted).
//! - `PUNT_CNP`: a CNP whose flow is not in CNP_Store yet: install it (the worker already
//!   throttles through CNP_Cache).
//!
//! The API lists `l2`, `routes`, `qp_field` and `inter_dc`; inserts and deletes go to `l2` and
//! `routes` (QP_field entries come from daemons).

use super::config::ThemisConfig;
use super::daemon::{Daemon, DaemonPolicy, InterDcPairs, InterDcSource, QpField, QpKey, QpUpdate};
use super::esw::{ThemisCommand, ThemisEsw, PUNT_CNP, PUNT_DAEMON, PUNT_HANDSHAKE};
use super::trp::{TrpCommand, TrpKey};
use crate::baseline::control::BaselineControl;
use longhaul_control::api::ApiError;
use longhaul_control::config::Config;
use longhaul_control::plane::{needs_rebuild, PipelineControl, ReloadPlan};
use longhaul_dataplane::control::{Command, Punt};
use longhaul_dataplane::wire::parse::{parse, ParseOptions};
use longhaul_dataplane::wire::roce::Bth;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, Ipv6Addr};

/// THEMIS's master tables and policies.
pub struct ThemisControl {
    base: BaselineControl,
    daemon: Option<Daemon>,
    qp_field: QpField,
    inter_dc: InterDcPairs,
    trp: bool,
    parse_opts: ParseOptions,
}

fn ip_str(a: u128) -> String {
    if a >> 32 == 0xffff {
        Ipv4Addr::from(a as u32).to_string()
    } else {
        Ipv6Addr::from(a).to_string()
    }
}

impl ThemisControl {
    pub fn new(cfg: &Config) -> Self {
        let t = cfg.section::<ThemisConfig>();
        let pnp = t.and_then(|t| t.pnp.as_ref());
        ThemisControl {
            base: BaselineControl::new(cfg),
            daemon: pnp.map(|p| {
                Daemon::new(DaemonPolicy {
                    allowed_prefixes: p.host_prefixes.clone(),
                    allowed_ports: t.map(|t| t.dc_ports.clone()).unwrap_or_default(),
                    inter_dc: if p.inter_dc_prefixes.is_empty() {
                        InterDcSource::HandshakeMonitor
                    } else {
                        InterDcSource::RemotePrefixes(p.inter_dc_prefixes.clone())
                    },
                })
            }),
            qp_field: QpField::new(pnp.map_or(1024, |p| p.qp_capacity)),
            inter_dc: InterDcPairs::new(pnp.map_or(1, |p| p.inter_dc_capacity)),
            trp: t.is_some_and(|t| t.trp.is_some()),
            parse_opts: ParseOptions {
                max_vlan_tags: cfg.parser.max_vlan_tags,
                verify_ipv4_checksum: cfg.parser.verify_ipv4_checksum,
                ..ParseOptions::default()
            },
        }
    }

    fn on_daemon(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<ThemisCommand>)) {
        let Some(d) = self.daemon.as_mut() else {
            return;
        };
        let frame = punt.bytes();
        let p = parse(frame, &self.parse_opts);
        match d.handle(
            frame,
            &p,
            punt.port,
            punt.ts,
            &self.inter_dc,
            &mut self.qp_field,
        ) {
            Ok(QpUpdate::Created { key, cqpn }) | Ok(QpUpdate::Modified { key, cqpn, .. }) => {
                issue(Command::Pipeline(ThemisCommand::QpInsert { key, cqpn }))
            }
            Ok(QpUpdate::Destroyed { key, .. }) => {
                issue(Command::Pipeline(ThemisCommand::QpDelete { key }))
            }
            // Refusals and decode errors are counted in the daemon's stats.
            Ok(QpUpdate::DestroyIgnored { .. }) | Err(_) => {}
        }
    }

    fn on_cnp(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<ThemisCommand>)) {
        if !self.trp {
            return;
        }
        let frame = punt.bytes();
        let p = parse(frame, &self.parse_opts);
        let Some(bth) = frame
            .get(p.bth_off as usize..)
            .and_then(|b| Bth::new_checked(b).ok())
        else {
            return;
        };
        let Some((src, dst)) = ThemisEsw::ip_pair(frame, p.l3_off as usize) else {
            return;
        };
        let qk = QpKey {
            client_ip: src,
            server_ip: dst,
            sqpn: bth.dest_qp(),
        };
        if let Some(local) = self.qp_field.peek(&qk) {
            issue(Command::Pipeline(ThemisCommand::Trp(TrpCommand::Install {
                key: TrpKey::new(src, local),
            })));
        }
    }
}

impl PipelineControl for ThemisControl {
    type Command = ThemisCommand;

    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<ThemisCommand>)) {
        match punt.reason {
            PUNT_DAEMON => self.on_daemon(punt, issue),
            PUNT_HANDSHAKE => {
                let (a, b) = ((punt.arg >> 32) as u32, punt.arg as u32);
                if self.inter_dc.record(a, b, punt.ts).is_ok() {
                    issue(Command::Pipeline(ThemisCommand::InterDc { a, b }));
                }
            }
            PUNT_CNP => self.on_cnp(punt, issue),
            _ => self
                .base
                .on_punt(punt, &mut |c| issue(c.map(ThemisCommand::Base))),
        }
    }

    fn tables(&self) -> Vec<String> {
        let mut t = self.base.tables();
        t.push("qp_field".into());
        t.push("inter_dc".into());
        t
    }

    fn list(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        match table {
            "qp_field" => {
                let entries: Vec<Value> = self
                    .qp_field
                    .table()
                    .iter()
                    .skip(offset)
                    .take(limit)
                    .map(|(k, c)| {
                        json!({"client": ip_str(k.client_ip), "server": ip_str(k.server_ip),
                               "sqpn": k.sqpn, "cqpn": c})
                    })
                    .collect();
                Ok(
                    json!({"table": table, "total": self.qp_field.len(), "offset": offset, "entries": entries}),
                )
            }
            "inter_dc" => {
                let mut all: Vec<Value> = Vec::new();
                let mut total = 0;
                // InterDcPairs keeps unordered pairs; list them as stored.
                for (i, ((a, b), ())) in inter_dc_iter(&self.inter_dc).enumerate() {
                    total += 1;
                    if i >= offset && all.len() < limit {
                        all.push(json!({"a": Ipv4Addr::from(a).to_string(), "b": Ipv4Addr::from(b).to_string()}));
                    }
                }
                Ok(json!({"table": table, "total": total, "offset": offset, "entries": all}))
            }
            _ => self.base.list(table, offset, limit),
        }
    }

    fn insert(
        &mut self,
        table: &str,
        entry: &Value,
    ) -> Result<(Value, Vec<ThemisCommand>), ApiError> {
        if matches!(table, "qp_field" | "inter_dc") {
            return Err(ApiError::BadRequest(format!(
                "{table} is filled by THEMIS daemons and the handshake monitor, not by the API"
            )));
        }
        let (v, cmds) = self.base.insert(table, entry)?;
        Ok((v, cmds.into_iter().map(ThemisCommand::Base).collect()))
    }

    fn delete(
        &mut self,
        table: &str,
        key: &Value,
    ) -> Result<(Value, Vec<ThemisCommand>), ApiError> {
        if matches!(table, "qp_field" | "inter_dc") {
            return Err(ApiError::BadRequest(format!(
                "{table} is filled by THEMIS daemons and the handshake monitor, not by the API"
            )));
        }
        let (v, cmds) = self.base.delete(table, key)?;
        Ok((v, cmds.into_iter().map(ThemisCommand::Base).collect()))
    }

    fn reload(
        &mut self,
        old: &Config,
        new: &Config,
    ) -> Result<ReloadPlan<ThemisCommand>, ApiError> {
        if needs_rebuild(old, new) {
            *self = ThemisControl::new(new);
            return Ok(ReloadPlan::Rebuild);
        }
        match self.base.reload(old, new)? {
            ReloadPlan::Tables(c) => Ok(ReloadPlan::Tables(
                c.into_iter().map(ThemisCommand::Base).collect(),
            )),
            ReloadPlan::Rebuild => Ok(ReloadPlan::Rebuild),
        }
    }
}

fn inter_dc_iter(p: &InterDcPairs) -> impl Iterator<Item = ((u32, u32), ())> + '_ {
    p.table_ref().iter().map(|(k, v)| (k, *v))
}
