//! The report of `longhaul reproduce`: per claim, the paper's values and ours side by side (a
//! table and a figure drawn like the paper's: x = the load point, one line per variant), the
//! change the mechanism makes in each, their ratio and a verdict; then every run's figures.
//! Nothing in it depends on wall time, so the same command writes the same report.

use super::{Claim, Expect, Manifest, Metric, Run};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;

/// Magnitudes within this factor of the paper's (either way) count as reproduced.
const MAGNITUDE_FACTOR: f64 = 2.0;

/// One claim's outcome.
pub(crate) struct Verdict {
    pub what: String,
    pub figure: String,
    /// The direction the paper states held in every seed at every point.
    pub direction_failed: bool,
    /// Every point's magnitude within [`MAGNITUDE_FACTOR`] of the paper's.
    pub magnitude_ok: bool,
    /// The mechanism's change, per point: the paper's and ours (mean over seeds).
    pub changes: Vec<(f64, Option<f64>)>,
    /// Why the direction is known not to hold at this scale (the manifest's `known_miss`).
    pub known_miss: Option<String>,
    /// Flows not done within the scale's bound in the runs compared (their slowdowns are not
    /// in the figures): the baseline's and the mechanism's.
    pub unfinished: (usize, usize),
    /// None of the claim's points runs at this scale (`scales.NAME.points`): not judged.
    pub not_run: bool,
}

impl Verdict {
    fn word(&self) -> String {
        if self.not_run {
            return "not run at this scale".into();
        }
        let w = match (self.direction_failed, self.magnitude_ok, &self.known_miss) {
            (false, true, _) => "reproduced".into(),
            (false, false, _) => "direction reproduced, magnitude off".into(),
            (true, _, None) => "not reproduced".into(),
            (true, _, Some(why)) => format!("not reproduced (known: {why})"),
        };
        match self.unfinished {
            (0, 0) => w,
            (b, m) => {
                format!("{w}; flows unfinished, left out: {b} without, {m} with the mechanism")
            }
        }
    }
}

impl Verdict {
    /// The paper's changes and ours, per point, as percentages with `decimals` decimals.
    fn changes_text(&self, decimals: usize) -> (Vec<String>, Vec<String>) {
        let pct = |v: f64| format!("{:+.*}%", decimals, 100.0 * v);
        let paper = self.changes.iter().map(|c| pct(c.0)).collect();
        let ours = self
            .changes
            .iter()
            .map(|c| c.1.map_or("-".into(), pct))
            .collect();
        (paper, ours)
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (paper, ours) = self.changes_text(0);
        write!(
            f,
            "{} ({}): {}; paper {}, ours {}",
            self.what,
            self.figure,
            self.word(),
            paper.join(" / "),
            ours.join(" / ")
        )
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The values of `metric` over seeds at (point, variant).
fn values(runs: &[Run], point: usize, variant: usize, metric: Metric) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.point == point && r.variant == variant)
        .filter_map(|r| r.metrics.get(&metric).copied())
        .collect()
}

/// The mechanism's relative change `m / b - 1` (None when the baseline is 0).
fn change(b: f64, m: f64) -> Option<f64> {
    (b > 0.0).then(|| m / b - 1.0)
}

/// A change smaller than this share of the baseline is no change: no direction holds.
const MIN_CHANGE: f64 = 0.01;

fn holds(expect: Expect, b: f64, m: f64) -> bool {
    let step = MIN_CHANGE * b.abs();
    match expect {
        Expect::Lower => m < b - step,
        Expect::Higher => m > b + step,
    }
}

fn judge(m: &Manifest, scale: &str, c: &Claim, runs: &[Run]) -> Verdict {
    let (bv, mv) = (m.variant(&c.baseline), m.variant(&c.mechanism));
    let at = c.point_indices(&m.points);
    let unfinished = |v: usize| -> usize {
        runs.iter()
            .filter(|r| r.variant == v && at.contains(&r.point))
            .map(|r| r.unfinished)
            .sum()
    };
    let mut direction_failed = false;
    let mut magnitude_ok = true;
    let mut changes = Vec::new();
    let mut ran = false;
    for (k, &p) in at.iter().enumerate() {
        let paper = c.paper_change_at(k);
        if !runs.iter().any(|r| r.point == p) {
            // Not run at this scale (`scales.NAME.points`).
            changes.push((paper, None));
            continue;
        }
        ran = true;
        // Per seed: the same seed's baseline and mechanism runs.
        let pairs: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r.point == p && r.variant == bv)
            .filter_map(|b| {
                let mech = runs
                    .iter()
                    .find(|r| r.point == p && r.variant == mv && r.seed == b.seed)?;
                Some((*b.metrics.get(&c.metric)?, *mech.metrics.get(&c.metric)?))
            })
            .collect();
        if pairs.is_empty() || pairs.iter().any(|&(b, x)| !holds(c.expect, b, x)) {
            direction_failed = true;
        }
        let ours = mean(&values(runs, p, bv, c.metric))
            .zip(mean(&values(runs, p, mv, c.metric)))
            .and_then(|(b, x)| change(b, x));
        let ok = ours.is_some_and(|o| {
            let f = o / paper;
            (1.0 / MAGNITUDE_FACTOR..=MAGNITUDE_FACTOR).contains(&f)
        });
        magnitude_ok &= ok;
        changes.push((paper, ours));
    }
    Verdict {
        what: c.what.clone(),
        figure: c.figure.clone(),
        direction_failed,
        magnitude_ok,
        changes,
        known_miss: c.known_miss.get(scale).cloned(),
        unfinished: (unfinished(bv), unfinished(mv)),
        not_run: !ran,
    }
}

fn fmt_range(v: &[f64]) -> String {
    match mean(v) {
        None => "-".into(),
        Some(x) if v.len() == 1 => format!("{x:.3}"),
        Some(x) => {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{x:.3} ({lo:.3}-{hi:.3})")
        }
    }
}

/// Writes `report.md`, `runs.csv` and one figure per claim into `out`; returns the verdicts.
pub(crate) fn write(
    out: &Path,
    m: &Manifest,
    scale_name: &str,
    runs: &[Run],
    seeds: u64,
    command: &str,
) -> Result<Vec<Verdict>> {
    let scale = &m.scales[scale_name];
    let verdicts: Vec<Verdict> = m
        .claims
        .iter()
        .map(|c| judge(m, scale_name, c, runs))
        .collect();
    let mut s = String::new();
    let _ = writeln!(s, "# {} reproduced by `longhaul emulate`\n", m.title);
    let _ = writeln!(s, "- Command: `{command}` (from a longhaul checkout)");
    let _ = writeln!(s, "- Setup: {}", m.setup);
    let _ = writeln!(
        s,
        "- Scale: {}; {}; every flow run to completion (at most {} ms of virtual time)",
        scale.note,
        if seeds == 1 {
            "seed 1".to_string()
        } else {
            format!("seeds 1-{seeds}")
        },
        scale.max_duration_us / 1000
    );
    let _ = writeln!(
        s,
        "- Scenarios: written by `{}`; choices where the paper is silent: {}",
        m.generator, m.doc
    );
    let _ = writeln!(
        s,
        "- FCT slowdown: FCT over the standalone FCT (base RTT plus size over the bottleneck), at least 1, as the HPCC simulator's analysis script computes it; PFC pause time: the share of the flows' span with a pause in force somewhere\n"
    );
    let _ = writeln!(s, "## Verdicts\n");
    let min_pct = 100.0 * MIN_CHANGE;
    let _ = writeln!(
        s,
        "A claim is reproduced when its direction holds (a change of at least {min_pct}% the paper's way) in every seed at every point and our change is within a factor of {MAGNITUDE_FACTOR} of the paper's at every point.\n"
    );
    let _ = writeln!(
        s,
        "| claim | figure | paper's change | ours | verdict |\n|---|---|---|---|---|"
    );
    for v in &verdicts {
        let (paper, ours) = v.changes_text(1);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            v.what,
            v.figure,
            paper.join(", "),
            ours.join(", "),
            v.word()
        );
    }
    for (c, v) in m.claims.iter().zip(&verdicts) {
        let (bv, mv) = (m.variant(&c.baseline), m.variant(&c.mechanism));
        let _ = writeln!(s, "\n## {} ({})\n", c.what, c.figure);
        let _ = writeln!(s, "Paper: {}.\n", c.source);
        let _ = writeln!(s, "![{}]({}.svg)\n", c.what, c.id);
        let _ = writeln!(
            s,
            "| {x} | paper {b} | paper {mm} | paper change | ours {b} | ours {mm} | ours change | ours / paper |\n|---|---|---|---|---|---|---|---|",
            x = m.x_label,
            b = c.baseline,
            mm = c.mechanism
        );
        let at = c.point_indices(&m.points);
        for (k, &p) in at.iter().enumerate() {
            let (paper, ours) = v.changes[k];
            let given = |v: &[f64]| v.get(k).map_or("-".to_string(), |x| format!("{x:.3}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:+.1}% | {} | {} | {} | {} |",
                m.points[p],
                given(&c.paper_baseline),
                given(&c.paper_mechanism),
                100.0 * paper,
                fmt_range(&values(runs, p, bv, c.metric)),
                fmt_range(&values(runs, p, mv, c.metric)),
                ours.map_or("-".into(), |o| format!("{:+.1}%", 100.0 * o)),
                ours.map_or("-".into(), |o| format!("{:.2}", o / paper)),
            );
        }
        let mut series = Vec::new();
        for (who, vi, paper_vals) in [
            (&c.baseline, bv, &c.paper_baseline),
            (&c.mechanism, mv, &c.paper_mechanism),
        ] {
            if !paper_vals.is_empty() {
                series.push((
                    format!("paper: {who}"),
                    at.iter()
                        .zip(paper_vals)
                        .map(|(&p, &y)| (m.points[p] as f64, y))
                        .collect(),
                ));
            }
            series.push((
                format!("longhaul: {who}"),
                m.points
                    .iter()
                    .enumerate()
                    .filter_map(|(p, &x)| Some((x as f64, mean(&values(runs, p, vi, c.metric))?)))
                    .collect(),
            ));
        }
        longhaul_emulator::plot::write_xy(
            out,
            &c.id,
            &format!("{} ({})", c.what, c.figure),
            &m.x_label,
            c.metric.name(),
            series,
        )
        .with_context(|| format!("writing {}", out.join(&c.id).display()))?;
    }
    let _ = writeln!(s, "\n## Runs\n");
    let mut csv = String::from("point,variant,seed,flows,unfinished,frame_hops");
    let _ = write!(s, "| {} | variant | seed | flows | unfinished |", m.x_label);
    for metric in Metric::ALL {
        let _ = write!(s, " {} |", metric.name());
        let _ = write!(csv, ",{}", metric.name());
    }
    let _ = writeln!(
        s,
        "\n|---|---|---|---|---|{}",
        "---|".repeat(Metric::ALL.len())
    );
    csv.push('\n');
    for r in runs {
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {} |",
            m.points[r.point], m.variants[r.variant].name, r.seed, r.flows, r.unfinished
        );
        let _ = write!(
            csv,
            "{},{},{},{},{},{}",
            m.points[r.point], m.variants[r.variant].name, r.seed, r.flows, r.unfinished, r.hops
        );
        for metric in Metric::ALL {
            let v = r.metrics.get(&metric);
            let _ = write!(s, " {} |", v.map_or("-".into(), |x| format!("{x:.3}")));
            let _ = write!(csv, ",{}", v.map_or(String::new(), |x| format!("{x:.6}")));
        }
        s.push('\n');
        csv.push('\n');
    }
    std::fs::write(out.join("report.md"), s)
        .with_context(|| format!("writing {}", out.join("report.md").display()))?;
    std::fs::write(out.join("runs.csv"), csv)
        .with_context(|| format!("writing {}", out.join("runs.csv").display()))?;
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn manifest(known_miss: &str) -> Manifest {
        let text = format!(
            r#"
paper = "p"
title = "t"
setup = "s"
generator = "g"
doc = "d"
x_label = "load"
points = [30, 70]
[scales.full]
scenario = "{{variant}}-{{point}}.toml"
note = "n"
max_duration_us = 1
[scales.quick]
scenario = "q/{{variant}}-{{point}}.toml"
note = "n"
max_duration_us = 1
[[variants]]
name = "off"
file = "off"
[[variants]]
name = "on"
file = "on"
[[claims]]
id = "c"
what = "w"
figure = "f"
metric = "intra_avg"
baseline = "off"
mechanism = "on"
expect = "lower"
paper_baseline = [10.0, 10.0]
paper_mechanism = [5.0, 5.0]
source = "s"
{known_miss}
"#
        );
        Manifest::parse("test.toml", &text).unwrap()
    }

    fn run(point: usize, variant: usize, seed: u64, v: f64) -> Run {
        Run {
            point,
            variant,
            seed,
            flows: 1,
            unfinished: 0,
            hops: 0,
            metrics: BTreeMap::from([(Metric::IntraAvg, v)]),
        }
    }

    #[test]
    fn verdicts_follow_direction_per_seed_and_magnitude() {
        let m = manifest("");
        let c = &m.claims[0];
        // Paper: -50% at both points. Ours: -40% and -70% (within 2x), every seed lower.
        let runs = [
            run(0, 0, 1, 10.0),
            run(0, 1, 1, 6.0),
            run(1, 0, 1, 10.0),
            run(1, 1, 1, 3.0),
        ];
        let v = judge(&m, "full", c, &runs);
        assert!(!v.direction_failed && v.magnitude_ok, "{v}");
        assert_eq!(v.word(), "reproduced");
        // -10% at 30: direction holds, magnitude off (0.2 of the paper's).
        let mut weak = runs.to_vec();
        weak[1] = run(0, 1, 1, 9.0);
        let v = judge(&m, "full", c, &weak);
        assert!(!v.direction_failed && !v.magnitude_ok);
        // A second seed where the mechanism is worse at 70: the direction fails, whatever
        // the mean says.
        let mut two = runs.to_vec();
        two.extend([
            run(0, 0, 2, 10.0),
            run(0, 1, 2, 5.0),
            run(1, 0, 2, 4.0),
            run(1, 1, 2, 4.5),
        ]);
        let v = judge(&m, "full", c, &two);
        assert!(v.direction_failed);
        assert_eq!(v.word(), "not reproduced");
        // A missing run fails the direction too.
        let v = judge(&m, "full", c, &runs[..3]);
        assert!(v.direction_failed);
    }

    /// A scale that runs only some points judges a claim at those; a claim with none of its
    /// points run is reported as such and fails nothing.
    #[test]
    fn a_claim_is_judged_at_the_points_its_scale_runs() {
        let m = manifest("");
        let c = &m.claims[0];
        let only_30 = [run(0, 0, 1, 10.0), run(0, 1, 1, 6.0)];
        let v = judge(&m, "quick", c, &only_30);
        assert!(!v.direction_failed && !v.not_run, "{v}");
        assert_eq!(v.changes[1].1, None);
        let v = judge(&m, "quick", c, &[]);
        assert!(v.not_run && !v.direction_failed);
        assert_eq!(v.word(), "not run at this scale");
    }

    #[test]
    fn a_known_miss_is_named_for_its_scale_only() {
        let m = manifest("known_miss = { quick = \"docs/x.md#why\" }");
        let runs = [
            run(0, 0, 1, 1.0),
            run(0, 1, 1, 2.0),
            run(1, 0, 1, 1.0),
            run(1, 1, 1, 2.0),
        ];
        let q = judge(&m, "quick", &m.claims[0], &runs);
        assert!(q.direction_failed);
        assert_eq!(q.word(), "not reproduced (known: docs/x.md#why)");
        let f = judge(&m, "full", &m.claims[0], &runs);
        assert!(f.known_miss.is_none());
    }
}
