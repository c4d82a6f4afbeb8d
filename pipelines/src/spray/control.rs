//! The spraying ToR's control plane: the baseline's `l2` and `routes`, plus the master copy of
//! `spray_qps` (cross-rack QPs and their register slots).
//!
//! `POST /tables/spray_qps` with `{"local": "10.0.0.1", "local_qpn": 17, "remote": "10.1.0.1",
//! "remote_qpn": 34}` takes a free slot and installs both ends on the workers (the slot's S and D
//! state start fresh); `DELETE /tables/spray_qps` with `{"local": .., "local_qpn": ..}` frees it.
//! The pipeline punts nothing.

use super::config::{SprayConfig, SprayQp};
use super::tor::SprayCommand;
use crate::baseline::control::BaselineControl;
use longhaul_control::api::ApiError;
use longhaul_control::config::Config;
use longhaul_control::plane::{needs_rebuild, PipelineControl, ReloadPlan};
use longhaul_dataplane::control::{Command, Punt};
use serde_json::{json, Value};
use std::net::IpAddr;

/// Master tables of the spraying ToR.
pub struct SprayControl {
    base: BaselineControl,
    /// Slot -> QP.
    slots: Vec<Option<SprayQp>>,
}

fn qp_json(slot: usize, q: &SprayQp) -> Value {
    json!({"slot": slot, "local": q.local.to_string(), "local_qpn": q.local_qpn,
           "remote": q.remote.to_string(), "remote_qpn": q.remote_qpn})
}

fn ip(v: Option<&Value>, key: &str) -> Result<IpAddr, ApiError> {
    v.and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ApiError::BadRequest(format!("{key}: an IP address string is needed")))
}

fn qpn(v: Option<&Value>, key: &str) -> Result<u32, ApiError> {
    v.and_then(Value::as_u64)
        .filter(|q| *q <= 0xff_ffff)
        .map(|q| q as u32)
        .ok_or_else(|| ApiError::BadRequest(format!("{key}: a QPN (0 to 16777215) is needed")))
}

impl SprayControl {
    pub fn new(cfg: &Config) -> Self {
        let cap = cfg.section::<SprayConfig>().map_or(1, |s| s.qp_capacity);
        let mut slots = vec![None; cap];
        for (i, q) in cfg
            .section::<SprayConfig>()
            .iter()
            .flat_map(|s| s.qps.iter())
            .enumerate()
        {
            if let Some(s) = slots.get_mut(i) {
                *s = Some(*q);
            }
        }
        SprayControl {
            base: BaselineControl::new(cfg),
            slots,
        }
    }
}

impl PipelineControl for SprayControl {
    type Command = SprayCommand;

    /// The baseline's punts (neighbour learning).
    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<SprayCommand>)) {
        self.base
            .on_punt(punt, &mut |c| issue(c.map(SprayCommand::Base)));
    }

    fn tables(&self) -> Vec<String> {
        let mut t = self.base.tables();
        t.push("spray_qps".into());
        t
    }

    fn list(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        if table != "spray_qps" {
            return self.base.list(table, offset, limit);
        }
        let all: Vec<(usize, &SprayQp)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.as_ref().map(|q| (i, q)))
            .collect();
        let entries: Vec<Value> = all
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(i, q)| qp_json(*i, q))
            .collect();
        Ok(json!({"table": table, "total": all.len(), "offset": offset, "entries": entries}))
    }

    fn insert(&mut self, table: &str, e: &Value) -> Result<(Value, Vec<SprayCommand>), ApiError> {
        if table != "spray_qps" {
            let (v, c) = self.base.insert(table, e)?;
            return Ok((v, c.into_iter().map(SprayCommand::Base).collect()));
        }
        if let Some(o) = e.as_object() {
            if let Some(k) = o
                .keys()
                .find(|k| !["local", "local_qpn", "remote", "remote_qpn"].contains(&k.as_str()))
            {
                return Err(ApiError::BadRequest(format!("unknown key {k}")));
            }
        }
        let q = SprayQp {
            local: ip(e.get("local"), "local")?,
            local_qpn: qpn(e.get("local_qpn"), "local_qpn")?,
            remote: ip(e.get("remote"), "remote")?,
            remote_qpn: qpn(e.get("remote_qpn"), "remote_qpn")?,
        };
        if q.local.is_ipv4() != q.remote.is_ipv4() {
            return Err(ApiError::BadRequest(
                "local and remote must both be IPv4 or both IPv6".into(),
            ));
        }
        if self.slots.iter().flatten().any(|x| {
            (x.local, x.local_qpn) == (q.local, q.local_qpn)
                || (x.remote, x.remote_qpn) == (q.remote, q.remote_qpn)
        }) {
            return Err(ApiError::Conflict(
                "a QP end is already in spray_qps".into(),
            ));
        }
        let Some(slot) = self.slots.iter().position(Option::is_none) else {
            return Err(ApiError::Conflict(
                "spray_qps is full (spray.qp_capacity)".into(),
            ));
        };
        self.slots[slot] = Some(q);
        Ok((
            qp_json(slot, &q),
            vec![SprayCommand::QpInsert {
                qp: q,
                slot: slot as u32,
            }],
        ))
    }

    fn delete(&mut self, table: &str, k: &Value) -> Result<(Value, Vec<SprayCommand>), ApiError> {
        if table != "spray_qps" {
            let (v, c) = self.base.delete(table, k)?;
            return Ok((v, c.into_iter().map(SprayCommand::Base).collect()));
        }
        let local = ip(k.get("local"), "local")?;
        let lq = qpn(k.get("local_qpn"), "local_qpn")?;
        let Some(slot) = self
            .slots
            .iter()
            .position(|x| x.is_some_and(|x| (x.local, x.local_qpn) == (local, lq)))
        else {
            return Err(ApiError::NotFound(format!(
                "no spray_qps entry for {local} QPN {lq}"
            )));
        };
        let Some(q) = self.slots[slot].take() else {
            return Err(ApiError::NotFound("no such entry".into()));
        };
        Ok((
            qp_json(slot, &q),
            vec![SprayCommand::QpDelete {
                qp: q,
                slot: slot as u32,
            }],
        ))
    }

    fn reload(&mut self, old: &Config, new: &Config) -> Result<ReloadPlan<SprayCommand>, ApiError> {
        if needs_rebuild(old, new) {
            self.base.reload(old, new)?;
            *self = SprayControl::new(new);
            return Ok(ReloadPlan::Rebuild);
        }
        match self.base.reload(old, new)? {
            ReloadPlan::Tables(c) => Ok(ReloadPlan::Tables(
                c.into_iter().map(SprayCommand::Base).collect(),
            )),
            ReloadPlan::Rebuild => Ok(ReloadPlan::Rebuild),
        }
    }
}
