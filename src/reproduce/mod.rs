//! `longhaul reproduce PAPER|all`: runs a paper's main evaluation (its scenario family, every
//! load point, mechanism on and off, N seeds) in the emulator and writes a report that puts the
//! paper's figures beside ours, claim by claim.
//!
//! A paper is a manifest, `scenarios/papers/PAPER.toml` (built into the binary): the variants,
//! the x points, the scenario files per scale, and the claims with the paper's values. The
//! scenarios themselves are files written by the paper's generator script
//! (`scenarios/papers/gen_PAPER.py`) and read from disk.

mod report;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The manifests this build knows: (paper, file name, text).
const MANIFESTS: &[(&str, &str, &str)] = &[
    (
        "themis",
        "scenarios/papers/themis.toml",
        include_str!("../../scenarios/papers/themis.toml"),
    ),
    (
        "reflex",
        "scenarios/papers/reflex.toml",
        include_str!("../../scenarios/papers/reflex.toml"),
    ),
    (
        "bifrost",
        "scenarios/papers/bifrost.toml",
        include_str!("../../scenarios/papers/bifrost.toml"),
    ),
    (
        "bifrost-a2a",
        "scenarios/papers/bifrost-a2a.toml",
        include_str!("../../scenarios/papers/bifrost-a2a.toml"),
    ),
    (
        "mlcc",
        "scenarios/papers/mlcc.toml",
        include_str!("../../scenarios/papers/mlcc.toml"),
    ),
    (
        "mlcc-hadoop",
        "scenarios/papers/mlcc-hadoop.toml",
        include_str!("../../scenarios/papers/mlcc-hadoop.toml"),
    ),
    (
        "spray",
        "scenarios/papers/spray.toml",
        include_str!("../../scenarios/papers/spray.toml"),
    ),
    (
        "spray-a2a",
        "scenarios/papers/spray-a2a.toml",
        include_str!("../../scenarios/papers/spray-a2a.toml"),
    ),
    (
        "spray-failure",
        "scenarios/papers/spray-failure.toml",
        include_str!("../../scenarios/papers/spray-failure.toml"),
    ),
];

#[derive(Args)]
pub struct ReproduceArgs {
    /// The paper (themis, reflex, bifrost, bifrost-a2a, mlcc, mlcc-hadoop, spray, spray-a2a,
    /// spray-failure), or `all`.
    paper: String,
    /// Where the reports go (one folder per paper).
    #[arg(long, value_name = "DIR", default_value = "reproduce-out")]
    out_dir: PathBuf,
    /// Seeds per (point, variant): 1..=N.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: u64,
    /// The smallest scale (seconds per run; the manifest's `quick` scale) instead of the paper's.
    #[arg(long)]
    quick: bool,
    /// The folder holding the papers' scenarios (default: scenarios/papers in the current
    /// directory, as in a longhaul checkout).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Runs at once (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: Option<u64>,
    /// Exit with status 1 if a claim's direction fails in any seed at any point.
    #[arg(long)]
    check: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    pub paper: String,
    pub title: String,
    pub setup: String,
    pub generator: String,
    pub doc: String,
    pub x_label: String,
    pub points: Vec<u32>,
    pub scales: BTreeMap<String, Scale>,
    pub variants: Vec<Variant>,
    pub claims: Vec<Claim>,
    /// The long link's two ends, `SWITCH:PORT` (the `long_link_*` metrics).
    #[serde(default)]
    pub long_link: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Scale {
    /// Path under the scenarios folder, with `{variant}` and `{point}` to fill.
    pub scenario: String,
    pub note: String,
    /// Every flow runs to completion (`--until-done`), up to this much virtual time.
    pub max_duration_us: u64,
    /// The points run at this scale (default: all). A claim is judged at those of its points
    /// that run; one with none is reported as not run at this scale.
    #[serde(default)]
    pub points: Option<Vec<u32>>,
}

impl Scale {
    /// Whether `point` runs at this scale.
    fn runs(&self, point: u32) -> bool {
        self.points.as_ref().is_none_or(|v| v.contains(&point))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Variant {
    pub name: String,
    /// What `{variant}` becomes in the scenario path.
    pub file: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Claim {
    pub id: String,
    pub what: String,
    pub figure: String,
    pub metric: Metric,
    pub baseline: String,
    pub mechanism: String,
    pub expect: Expect,
    /// The points the paper states this at (default: every point of the manifest).
    #[serde(default)]
    pub points: Option<Vec<u32>>,
    /// The paper's values per point, for the baseline and the mechanism; or, where the paper
    /// gives only the change, `paper_change` (the mechanism's value over the baseline's, less 1).
    #[serde(default)]
    pub paper_baseline: Vec<f64>,
    #[serde(default)]
    pub paper_mechanism: Vec<f64>,
    #[serde(default)]
    pub paper_change: Vec<f64>,
    pub source: String,
    /// Per scale (`quick`, `full`): why the direction is known not to hold there (a pointer to
    /// the evidence in the docs). `--check` fails on a direction that does not hold unless it is
    /// listed here, and says so when a listed one holds again.
    #[serde(default)]
    pub known_miss: BTreeMap<String, String>,
}

impl Claim {
    /// The claim's points, as indices into the manifest's.
    pub fn point_indices(&self, all: &[u32]) -> Vec<usize> {
        match &self.points {
            None => (0..all.len()).collect(),
            Some(v) => v
                .iter()
                .filter_map(|p| all.iter().position(|x| x == p))
                .collect(),
        }
    }

    /// The paper's change at the claim's `k`-th point.
    pub fn paper_change_at(&self, k: usize) -> f64 {
        match self.paper_change.get(k) {
            Some(&c) => c,
            None => self.paper_mechanism[k] / self.paper_baseline[k] - 1.0,
        }
    }
}

/// What a claim measures, from one run.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Metric {
    IntraAvg,
    IntraP99,
    InterAvg,
    InterP99,
    AllAvg,
    AllP99,
    /// P99 slowdown of the inter-DC flows larger than 10 MB (Reflex's Figure 7).
    #[serde(rename = "inter_10mb_p99")]
    InterLargeP99,
    PausePct,
    /// PFC frames the switches sent.
    PfcFrames,
    /// FCT in milliseconds (not normalized: Bifrost's and MLCC's figures), average and P99.
    IntraFctAvg,
    IntraFctP99,
    InterFctAvg,
    InterFctP99,
    AllFctAvg,
    AllFctP99,
    /// The long link's throughput per direction over the flows' span, Gb/s.
    LongLinkGbps,
    /// The share of the flows' span during which either end of the long link was paused.
    LongLinkPausePct,
    /// The slowest collective's completion time, ms (Themis spraying's tail CCT).
    TailCct,
}

impl Metric {
    pub const ALL: [Metric; 18] = [
        Metric::IntraAvg,
        Metric::IntraP99,
        Metric::InterAvg,
        Metric::InterP99,
        Metric::AllAvg,
        Metric::AllP99,
        Metric::InterLargeP99,
        Metric::PausePct,
        Metric::PfcFrames,
        Metric::IntraFctAvg,
        Metric::IntraFctP99,
        Metric::InterFctAvg,
        Metric::InterFctP99,
        Metric::AllFctAvg,
        Metric::AllFctP99,
        Metric::LongLinkGbps,
        Metric::LongLinkPausePct,
        Metric::TailCct,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::IntraAvg => "intra_avg",
            Metric::IntraP99 => "intra_p99",
            Metric::InterAvg => "inter_avg",
            Metric::InterP99 => "inter_p99",
            Metric::AllAvg => "all_avg",
            Metric::AllP99 => "all_p99",
            Metric::InterLargeP99 => "inter_10mb_p99",
            Metric::PausePct => "pause_pct",
            Metric::PfcFrames => "pfc_frames",
            Metric::IntraFctAvg => "intra_fct_avg",
            Metric::IntraFctP99 => "intra_fct_p99",
            Metric::InterFctAvg => "inter_fct_avg",
            Metric::InterFctP99 => "inter_fct_p99",
            Metric::AllFctAvg => "all_fct_avg",
            Metric::AllFctP99 => "all_fct_p99",
            Metric::LongLinkGbps => "long_link_gbps",
            Metric::LongLinkPausePct => "long_link_pause_pct",
            Metric::TailCct => "tail_cct",
        }
    }
}

/// Which way the mechanism moves the metric, per the paper.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Expect {
    Lower,
    Higher,
}

impl Manifest {
    fn parse(file: &str, text: &str) -> Result<Manifest> {
        let m: Manifest = toml::from_str(text).map_err(|e| anyhow!("{file}: {e}"))?;
        if m.points.is_empty() {
            bail!("{file}: points: at least one point is needed");
        }
        for scale in ["full", "quick"] {
            let Some(sc) = m.scales.get(scale) else {
                bail!("{file}: scales.{scale}: missing");
            };
            if let Some(p) = sc.points.iter().flatten().find(|p| !m.points.contains(p)) {
                bail!("{file}: scales.{scale}.points: {p} is not one of the points");
            }
        }
        if m.long_link.len() != 2 && !m.long_link.is_empty() {
            bail!("{file}: long_link: the link's two ends (SWITCH:PORT), or none");
        }
        for (i, c) in m.claims.iter().enumerate() {
            if matches!(c.metric, Metric::LongLinkGbps | Metric::LongLinkPausePct)
                && m.long_link.is_empty()
            {
                bail!(
                    "{file}: claims[{i}].metric: {} needs long_link",
                    c.metric.name()
                );
            }
            for (key, name) in [("baseline", &c.baseline), ("mechanism", &c.mechanism)] {
                if !m.variants.iter().any(|v| &v.name == name) {
                    bail!("{file}: claims[{i}].{key}: no variant named {name:?}");
                }
            }
            let n = match &c.points {
                None => m.points.len(),
                Some(v) => {
                    if let Some(p) = v.iter().find(|p| !m.points.contains(p)) {
                        bail!("{file}: claims[{i}].points: {p} is not one of the points");
                    }
                    v.len()
                }
            };
            let given: &[(&str, &Vec<f64>)] = if c.paper_change.is_empty() {
                &[
                    ("paper_baseline", &c.paper_baseline),
                    ("paper_mechanism", &c.paper_mechanism),
                ]
            } else if c.paper_baseline.is_empty() && c.paper_mechanism.is_empty() {
                &[("paper_change", &c.paper_change)]
            } else {
                bail!("{file}: claims[{i}]: paper_change or paper_baseline and paper_mechanism, not both");
            };
            for (key, v) in given {
                if v.len() != n {
                    bail!(
                        "{file}: claims[{i}].{key}: {} values for {n} points",
                        v.len()
                    );
                }
            }
        }
        Ok(m)
    }

    fn variant(&self, name: &str) -> usize {
        self.variants
            .iter()
            .position(|v| v.name == name)
            .unwrap_or(0)
    }
}

/// One emulation's figures.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub point: usize,
    pub variant: usize,
    pub seed: u64,
    pub flows: usize,
    pub unfinished: usize,
    pub hops: u64,
    pub metrics: BTreeMap<Metric, f64>,
}

fn measure(r: &longhaul_emulator::Report, long_link: &[String]) -> (BTreeMap<Metric, f64>, usize) {
    let o = &r.outcome;
    let pick = |scope: Option<bool>| -> Vec<f64> {
        (0..o.flows.len())
            .filter(|&i| scope.is_none() || o.flows[i].inter_dc == scope)
            .filter_map(|i| r.slowdown(i))
            .collect()
    };
    let mut m = BTreeMap::new();
    for (scope, avg, p99) in [
        (Some(false), Metric::IntraAvg, Metric::IntraP99),
        (Some(true), Metric::InterAvg, Metric::InterP99),
        (None, Metric::AllAvg, Metric::AllP99),
    ] {
        if let Some((a, p)) = longhaul_emulator::output::avg_p99(&mut pick(scope)) {
            m.insert(avg, a);
            m.insert(p99, p);
        }
    }
    let mut large: Vec<f64> = (0..o.flows.len())
        .filter(|&i| o.flows[i].inter_dc == Some(true) && o.flows[i].size_bytes > 10_000_000)
        .filter_map(|i| r.slowdown(i))
        .collect();
    if let Some((_, p)) = longhaul_emulator::output::avg_p99(&mut large) {
        m.insert(Metric::InterLargeP99, p);
    }
    let fct_ms = |scope: Option<bool>| -> Vec<f64> {
        o.flows
            .iter()
            .filter(|f| scope.is_none() || f.inter_dc == scope)
            .filter_map(|f| f.fct_ns())
            .map(|ns| ns as f64 / 1e6)
            .collect()
    };
    for (scope, avg, p99) in [
        (Some(false), Metric::IntraFctAvg, Metric::IntraFctP99),
        (Some(true), Metric::InterFctAvg, Metric::InterFctP99),
        (None, Metric::AllFctAvg, Metric::AllFctP99),
    ] {
        if let Some((a, p)) = longhaul_emulator::output::avg_p99(&mut fct_ms(scope)) {
            m.insert(avg, a);
            m.insert(p99, p);
        }
    }
    if let Some((bps, paused)) = r.port_load(long_link).filter(|_| !long_link.is_empty()) {
        m.insert(Metric::LongLinkGbps, bps / 1e9);
        m.insert(Metric::LongLinkPausePct, 100.0 * paused);
    }
    if let Some(ns) = r.tail_cct_ns() {
        m.insert(Metric::TailCct, ns as f64 / 1e6);
    }
    m.insert(Metric::PausePct, 100.0 * r.pause_fraction());
    let pfc: u64 = o
        .switches
        .iter()
        .flat_map(|(_, s)| s.ports.iter())
        .map(|p| p.stats.pfc_tx)
        .sum();
    m.insert(Metric::PfcFrames, pfc as f64);
    let unfinished = o.flows.iter().filter(|f| f.finish_ns.is_none()).count();
    (m, unfinished)
}

pub fn cmd_reproduce(a: ReproduceArgs) -> Result<ExitCode> {
    let wanted: Vec<&(&str, &str, &str)> = if a.paper == "all" {
        MANIFESTS.iter().collect()
    } else {
        match MANIFESTS.iter().find(|m| m.0 == a.paper) {
            Some(m) => vec![m],
            None => bail!(
                "reproduce: no paper {:?}; this build has: {}, all",
                a.paper,
                MANIFESTS.iter().map(|m| m.0).collect::<Vec<_>>().join(", ")
            ),
        }
    };
    let dir = a
        .scenarios
        .clone()
        .unwrap_or_else(|| PathBuf::from("scenarios/papers"));
    if !dir.is_dir() {
        bail!(
            "reproduce: {}: no such folder; run from a longhaul checkout or pass --scenarios DIR (the folder of scenarios/papers/)",
            dir.display()
        );
    }
    let jobs = a.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    );
    let mut failed = false;
    for (_, file, text) in wanted {
        let m = Manifest::parse(file, text)?;
        let scale_name = if a.quick { "quick" } else { "full" };
        let runs = run_all(&m, &m.scales[scale_name], &dir, a.seeds, jobs)?;
        let out = a.out_dir.join(&m.paper);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let command = format!(
            "longhaul reproduce {} --seeds {}{}",
            m.paper,
            a.seeds,
            if a.quick { " --quick" } else { "" }
        );
        let verdicts = report::write(&out, &m, scale_name, &runs, a.seeds, &command)?;
        println!("{}: {}", m.title, out.join("report.md").display());
        for v in &verdicts {
            println!("  {v}");
            match (&v.known_miss, v.direction_failed) {
                (None, true) => failed = true,
                (Some(_), false) if !v.not_run => println!(
                    "    (listed as a known miss at this scale in {}, but holds: update it)",
                    MANIFESTS
                        .iter()
                        .find(|x| x.0 == m.paper)
                        .map_or("", |x| x.1)
                ),
                _ => {}
            }
        }
    }
    Ok(if a.check && failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs every (point, variant, seed) of `m` at `scale`, `jobs` at a time; the results in that
/// order, whatever order they finished in.
fn run_all(m: &Manifest, scale: &Scale, dir: &Path, seeds: u64, jobs: usize) -> Result<Vec<Run>> {
    let mut todo = Vec::new();
    for point in (0..m.points.len()).filter(|&p| scale.runs(m.points[p])) {
        for variant in 0..m.variants.len() {
            for seed in 1..=seeds {
                let rel = scale
                    .scenario
                    .replace("{variant}", &m.variants[variant].file)
                    .replace("{point}", &m.points[point].to_string());
                todo.push((point, variant, seed, dir.join(rel)));
            }
        }
    }
    for (_, _, _, path) in &todo {
        if !path.is_file() {
            bail!(
                "reproduce {}: {}: missing (written by {})",
                m.paper,
                path.display(),
                m.generator
            );
        }
    }
    let bar = ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("reproduce {}", m.paper));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Run>>>> =
        Mutex::new((0..todo.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(todo.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((point, variant, seed, path)) = todo.get(i) else {
                    break;
                };
                let r = run_one(scale, path, &m.long_link, (*point, *variant, *seed));
                bar.inc(1);
                bar.set_message(format!(
                    "(last: {} at {} {}, seed {seed})",
                    m.variants[*variant].name, m.points[*point], m.x_label
                ));
                if let Ok(mut v) = results.lock() {
                    v[i] = Some(r);
                }
            });
        }
    });
    bar.finish_and_clear();
    let results = results
        .into_inner()
        .map_err(|_| anyhow!("reproduce: a run panicked"))?;
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow!("reproduce: a run did not report"))))
        .collect()
}

fn run_one(
    scale: &Scale,
    path: &Path,
    long_link: &[String],
    (point, variant, seed): (usize, usize, u64),
) -> Result<Run> {
    let registry = longhaul_pipelines::registry();
    let mut s =
        longhaul_emulator::scenario::Scenario::load(path, registry.as_ref()).map_err(|errs| {
            let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
            anyhow!(lines.join("\n"))
        })?;
    let o = longhaul_emulator::Overrides {
        seed: Some(seed),
        duration_ns: None,
        until_done_ns: Some(scale.max_duration_us.saturating_mul(1000)),
        skip_alone: true,
    };
    let r = longhaul_emulator::emulate(&mut s, &registry, o)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if let Some(e) = long_link.iter().find(|e| r.switch_port(e).is_none()) {
        bail!(
            "{}: long_link: {e} is not a switch port (SWITCH:PORT) of this scenario",
            path.display()
        );
    }
    let (metrics, unfinished) = measure(&r, long_link);
    Ok(Run {
        point,
        variant,
        seed,
        flows: r.outcome.flows.len(),
        unfinished,
        hops: r.outcome.hops,
        metrics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_manifests_parse() {
        for (_, file, text) in MANIFESTS {
            let m = Manifest::parse(file, text).unwrap();
            assert!(!m.claims.is_empty(), "{file}");
        }
    }

    #[test]
    fn a_bad_manifest_names_its_key() {
        let (_, file, text) = MANIFESTS[0];
        let short = text.replacen("paper_baseline = [", "paper_baseline = [1.0, ", 1);
        let e = Manifest::parse(file, &short).err().unwrap().to_string();
        assert!(e.contains("claims[0].paper_baseline"), "{e}");
        let wrong = text.replacen("baseline = \"DCQCN\"", "baseline = \"DCQCM\"", 1);
        let e = Manifest::parse(file, &wrong).err().unwrap().to_string();
        assert!(
            e.contains("claims[0].baseline") && e.contains("DCQCM"),
            "{e}"
        );
    }
}
