//! The plots `--out-dir` gets, each as PNG and SVG (plotters, with the DejaVu Sans font shipped
//! in `emulator/assets/`, so no system font is needed):
//!
//! - `fct_slowdown`: average and 99th-percentile FCT slowdown by flow-size bucket;
//! - `queues`: queued bytes over time, per switch port that ever queued (time series on);
//! - `rates`: goodput over time of the largest flows (time series on).

use crate::Report;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

const SIZE: (u32, u32) = (900, 560);
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// Most series drawn in one chart (the rest are in the CSVs).
const MAX_SERIES: usize = 8;

/// Flow-size buckets of the slowdown plot: (upper bound in bytes, label).
const BUCKETS: [(u64, &str); 5] = [
    (10_000, "<10K"),
    (100_000, "10K-100K"),
    (1_000_000, "100K-1M"),
    (10_000_000, "1M-10M"),
    (u64::MAX, ">10M"),
];

fn font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is ours and valid; a failure would only cost the text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// A named line: (legend, points (time in us, value)).
pub type Series = (String, Vec<(f64, f64)>);

/// One plot's data.
enum Chart {
    Slowdown(Vec<(&'static str, f64, f64)>),
    /// Title, x axis, y axis, series.
    Lines(String, String, String, Vec<Series>),
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) {
    match c {
        Chart::Slowdown(rows) => draw_slowdown(area, rows),
        Chart::Lines(title, x, y, series) => draw_lines(area, title, x, y, series),
    }
}

/// Slowdowns by bucket: (label, average, p99) for the buckets that have flows.
pub fn slowdown_by_bucket(r: &Report) -> Vec<(&'static str, f64, f64)> {
    let mut out = Vec::new();
    let mut lo = 0;
    for (hi, label) in BUCKETS {
        let mut v: Vec<f64> = (0..r.outcome.flows.len())
            .filter(|&i| (lo..hi).contains(&r.outcome.flows[i].size_bytes))
            .filter_map(|i| r.slowdown(i))
            .collect();
        lo = hi;
        let Some((avg, p99)) = crate::output::avg_p99(&mut v) else {
            continue;
        };
        out.push((label, avg, p99));
    }
    out
}

fn draw_slowdown<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, rows: &[(&str, f64, f64)]) {
    let _ = area.fill(&WHITE);
    let ymax = rows.iter().map(|r| r.2).fold(1.0f64, f64::max) * 1.1;
    let Ok(mut chart) = ChartBuilder::on(area)
        .caption("FCT slowdown by flow size", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5f64..(rows.len() as f64 - 0.5), 0.0f64..ymax)
    else {
        return;
    };
    let labels: Vec<String> = rows.iter().map(|r| r.0.to_string()).collect();
    let _ = chart
        .configure_mesh()
        .x_labels(rows.len().max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("flow size (bytes)")
        .y_desc("slowdown (FCT / standalone FCT)")
        .draw();
    for (name, color, pick) in [("average", BLUE, 1usize), ("99th percentile", RED, 2usize)] {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (i as f64, if pick == 1 { r.1 } else { r.2 }))
            .collect();
        if let Ok(s) = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))) {
            s.label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color));
        }
        let _ = chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())));
    }
    let _ = chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw();
}

/// Line plot: `series` of (name, points (x, y)), the axes named `x_desc` and `y_desc`.
fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) {
    let _ = area.fill(&WHITE);
    let xs = || series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let xmax = xs().fold(1.0f64, f64::max);
    // From the first point: a time series starts at 0 anyway, a load axis at its lowest load.
    let xmin = xs().fold(xmax, f64::min).min(xmax - 1e-9);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(1e-9f64, f64::max)
        * 1.1;
    let Ok(mut chart) = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(xmin..xmax, 0.0f64..ymax)
    else {
        return;
    };
    let _ = chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw();
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        if let Ok(s) = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))) {
            s.label(name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color));
        }
    }
    let _ = chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw();
}

/// Queued bytes (KB) per port that ever queued, and per switch whose pipeline holds packets
/// in its own queues (MLCC's PFQs, `NAME:pipeline`), the deepest first.
pub fn queue_series(r: &Report) -> Vec<Series> {
    let o = &r.outcome;
    let mut out: Vec<(u64, Series)> = Vec::new();
    for (s, (name, _)) in o.switches.iter().enumerate() {
        let peak = o
            .switch_samples
            .iter()
            .map(|sw| sw[s].held_bytes)
            .max()
            .unwrap_or(0);
        if peak > 0 {
            let pts: Vec<(f64, f64)> = o
                .samples
                .iter()
                .zip(&o.switch_samples)
                .map(|((t, _), sw)| (*t as f64 / 1e3, sw[s].held_bytes as f64 / 1e3))
                .collect();
            out.push((peak, (format!("{name}:pipeline"), pts)));
        }
    }
    for (s, ((name, _), ports)) in o.switches.iter().zip(&o.port_names).enumerate() {
        for (p, port) in ports.iter().enumerate() {
            let pts: Vec<(f64, f64)> = o
                .samples
                .iter()
                .zip(&o.switch_samples)
                .map(|((t, _), sw)| (*t as f64 / 1e3, sw[s].ports[p].0 as f64 / 1e3))
                .collect();
            let peak = o
                .switch_samples
                .iter()
                .map(|sw| sw[s].ports[p].0)
                .max()
                .unwrap_or(0);
            if peak > 0 {
                out.push((peak, (format!("{name}:{port}"), pts)));
            }
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1 .0.cmp(&b.1 .0)));
    out.into_iter().take(MAX_SERIES).map(|(_, s)| s).collect()
}

/// Goodput (Gb/s) of the largest flows.
pub fn rate_series(r: &Report) -> Vec<Series> {
    let o = &r.outcome;
    let mut ids: Vec<usize> = (0..o.flows.len()).collect();
    ids.sort_by(|&a, &b| {
        o.flows[b]
            .size_bytes
            .cmp(&o.flows[a].size_bytes)
            .then(a.cmp(&b))
    });
    ids.truncate(MAX_SERIES);
    ids.sort_unstable();
    ids.iter()
        .map(|&id| {
            let f = &o.flows[id];
            let pts = o
                .samples
                .windows(2)
                .map(|w| {
                    let dt = (w[1].0 - w[0].0).max(1) as f64;
                    let gbps = (w[1].1[id] - w[0].1[id]) as f64 * 8.0 / dt;
                    (w[1].0 as f64 / 1e3, gbps)
                })
                .collect();
            (format!("flow {id} {}->{}", f.src, f.dst), pts)
        })
        .collect()
}

/// Writes every plot that has data into `dir`, as `NAME.png` and `NAME.svg`; returns the names.
pub fn write(dir: &Path, r: &Report) -> std::io::Result<Vec<&'static str>> {
    font();
    let mut plots: Vec<(&'static str, Chart)> = Vec::new();
    let rows = slowdown_by_bucket(r);
    if !rows.is_empty() {
        plots.push(("fct_slowdown", Chart::Slowdown(rows)));
    }
    if !r.outcome.samples.is_empty() {
        let q = queue_series(r);
        if !q.is_empty() {
            plots.push((
                "queues",
                Chart::Lines(
                    "Queued bytes per port".into(),
                    "time (us)".into(),
                    "queued (KB)".into(),
                    q,
                ),
            ));
        }
        let f = rate_series(r);
        if !f.is_empty() {
            plots.push((
                "rates",
                Chart::Lines("Flow goodput".into(), "time (us)".into(), "Gb/s".into(), f),
            ));
        }
    }
    let mut names = Vec::new();
    for (name, chart) in &plots {
        write_chart(dir, name, chart)?;
        names.push(*name);
    }
    Ok(names)
}

/// Writes one chart as `dir/NAME.svg` and `dir/NAME.png`.
fn write_chart(dir: &Path, name: &str, chart: &Chart) -> std::io::Result<()> {
    font();
    let mut text = String::new();
    {
        let area = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        draw(&area, chart);
        area.present()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    std::fs::write(dir.join(format!("{name}.svg")), text)?;
    let path = dir.join(format!("{name}.png"));
    let area = BitMapBackend::new(&path, SIZE).into_drawing_area();
    draw(&area, chart);
    area.present()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// A time-series chart (x: time in us) of at most [`MAX_SERIES`] of `series` (the caller
/// orders them by importance), as `dir/NAME.svg` and `dir/NAME.png`: `longhaul replay --plot`
/// uses it for queue depths, throughput, PFC and CNP rates.
pub fn write_lines(
    dir: &Path,
    name: &str,
    title: &str,
    y_desc: &str,
    series: Vec<Series>,
) -> std::io::Result<()> {
    write_xy(dir, name, title, "time (us)", y_desc, series)
}

/// A line chart of `series` (points (x, y)) with both axes named, as `dir/NAME.svg` and
/// `dir/NAME.png`: `longhaul rfc2544 --out-dir` uses it for throughput by frame size.
pub fn write_xy(
    dir: &Path,
    name: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    mut series: Vec<Series>,
) -> std::io::Result<()> {
    series.truncate(MAX_SERIES);
    let chart = Chart::Lines(title.into(), x_desc.into(), y_desc.into(), series);
    write_chart(dir, name, &chart)
}
