//! Generated traffic: Poisson flow arrivals at a target load, flow sizes drawn from an
//! empirical CDF, as the papers' evaluations (and the HPCC simulator's `traffic_gen.py`) do.
//!
//! For each source host, flows arrive as a Poisson process whose mean inter-arrival time makes
//! the offered load `load` x the host's NIC rate: `mean gap = mean size x 8 / (rate x load)`.
//! Each flow goes to a destination drawn uniformly from the list (never the source), with a
//! size drawn from the CDF by inverse transform, linear between the CDF's points. Everything
//! is drawn from the scenario's seed, so a scenario gives the same flows on every run.
//!
//! CDFs ship in `scenarios/cdf/` (each file cites its source): `websearch` (DCTCP's web-search
//! cluster) and `hadoop` (Facebook's Hadoop cluster); a scenario may also name a file of its
//! own (lines `bytes percent`, `#` comments).

/// A flow-size distribution: (bytes, cumulative fraction 0..=1) points, linear between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    points: Vec<(f64, f64)>,
}

/// The shipped CDFs, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "websearch",
        include_str!("../../scenarios/cdf/websearch.txt"),
    ),
    ("hadoop", include_str!("../../scenarios/cdf/hadoop.txt")),
];

impl Cdf {
    /// Parses `bytes percent` lines (`#` comments, blank lines ignored). The sizes must not
    /// decrease, the percentages must rise from 0 to 100.
    pub fn parse(text: &str) -> Result<Cdf, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(x), Some(y), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!(
                    "line {}: expected two numbers: bytes percent",
                    n + 1
                ));
            };
            let (Ok(x), Ok(y)) = (x.parse::<f64>(), y.parse::<f64>()) else {
                return Err(format!("line {}: '{line}' is not two numbers", n + 1));
            };
            if !(x >= 0.0 && (0.0..=100.0).contains(&y)) {
                return Err(format!(
                    "line {}: bytes must be >= 0 and percent 0 to 100",
                    n + 1
                ));
            }
            if let Some(&(px, py)) = points.last() {
                if x < px || y / 100.0 < py {
                    return Err(format!(
                        "line {}: sizes and percentages must not decrease",
                        n + 1
                    ));
                }
            }
            points.push((x, y / 100.0));
        }
        match (points.first(), points.last()) {
            (Some(&(_, a)), Some(&(_, b))) if a == 0.0 && b == 1.0 && points.len() >= 2 => {
                Ok(Cdf { points })
            }
            _ => Err("a CDF goes from 0 to 100 percent in at least two points".into()),
        }
    }

    /// A shipped CDF by name.
    pub fn builtin(name: &str) -> Option<Cdf> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, t)| Cdf::parse(t).ok())
    }

    /// The size at cumulative fraction `u` (0..1): inverse transform, linear between points.
    pub fn sample(&self, u: f64) -> f64 {
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if u <= y1 {
                if y1 == y0 {
                    return x1;
                }
                return x0 + (x1 - x0) * (u - y0) / (y1 - y0);
            }
        }
        self.points.last().map_or(0.0, |p| p.0)
    }

    /// The mean flow size, bytes (each segment's mass at its midpoint: exact for the linear
    /// interpolation `sample` does).
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
            .sum()
    }
}

/// A deterministic generator (xorshift64*).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -(1.0 - self.uniform()).ln() * mean
    }
}

/// One generated flow: (source index, destination index, bytes, start ns).
pub type Generated = (usize, usize, u64, u64);

/// Poisson arrivals from each of `sources` (with NIC rates `rates_bps`, same order) between
/// `start_ns` and `stop_ns`, to `destinations`, sizes from `cdf`, at `load` of each source's
/// rate. Sorted by start time (then source).
pub fn generate(
    sources: &[usize],
    rates_bps: &[u64],
    destinations: &[usize],
    load: f64,
    cdf: &Cdf,
    (start_ns, stop_ns): (u64, u64),
    rng: &mut Rng,
) -> Vec<Generated> {
    let mut out = Vec::new();
    let mean = cdf.mean();
    for (k, &src) in sources.iter().enumerate() {
        let gap = mean * 8.0 * 1e9 / (rates_bps[k] as f64 * load);
        let dsts: Vec<usize> = destinations.iter().copied().filter(|&d| d != src).collect();
        if dsts.is_empty() {
            continue;
        }
        let mut t = start_ns as f64 + rng.exponential(gap);
        while t < stop_ns as f64 {
            let dst = dsts[(rng.next_u64() % dsts.len() as u64) as usize];
            let size = cdf.sample(rng.uniform()).round().max(1.0) as u64;
            out.push((src, dst, size, t as u64));
            t += rng.exponential(gap);
        }
    }
    out.sort_by_key(|&(s, _, _, t)| (t, s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_cdfs_parse_and_their_means() {
        let w = Cdf::builtin("websearch").unwrap();
        // Hand: sum of (dP x midpoint) over the segments of the WebSearch table.
        let hand = 0.15 * 5e3
            + 0.05 * 15e3
            + 0.10 * 25e3
            + 0.10 * 40e3
            + 0.13 * 65e3
            + 0.07 * 140e3
            + 0.10 * 600e3
            + 0.10 * 1.5e6
            + 0.10 * 3.5e6
            + 0.07 * 7.5e6
            + 0.03 * 20e6;
        assert!((w.mean() - hand).abs() < 1.0, "{} vs {hand}", w.mean());
        assert!(Cdf::builtin("hadoop").unwrap().mean() > 0.0);
        assert!(Cdf::builtin("nope").is_none());
    }

    #[test]
    fn sampling_inverts_the_cdf() {
        let c = Cdf::parse("0 0\n100 50\n300 100\n").unwrap();
        assert_eq!(c.sample(0.0), 0.0);
        assert_eq!(c.sample(0.25), 50.0);
        assert_eq!(c.sample(0.5), 100.0);
        assert_eq!(c.sample(0.75), 200.0);
        assert_eq!(c.sample(1.0), 300.0);
        assert_eq!(c.mean(), 0.5 * 50.0 + 0.5 * 200.0);
    }

    #[test]
    fn bad_cdfs_are_refused() {
        for (text, part) in [
            ("0 0\n", "at least two points"),
            ("0 0\n10 50\n", "from 0 to 100"),
            ("0 0\n10 60\n5 100\n", "must not decrease"),
            ("0 0\nx 100\n", "not two numbers"),
            ("0 0 1\n", "expected two numbers"),
        ] {
            let e = Cdf::parse(text).unwrap_err();
            assert!(e.contains(part), "{text:?}: {e}");
        }
    }

    /// Over many flows, the mean size matches the CDF's mean and the arrival count the Poisson
    /// rate (within 4 standard deviations), and no flow goes to its source.
    #[test]
    fn generated_traffic_has_the_asked_load() {
        let cdf = Cdf::builtin("hadoop").unwrap();
        let rate = 10_000_000_000u64;
        let load = 0.5;
        let dur = 200_000_000u64; // 200 ms
        let mut rng = Rng::new(7);
        let flows = generate(
            &[0, 1],
            &[rate, rate],
            &[0, 1, 2],
            load,
            &cdf,
            (0, dur),
            &mut rng,
        );
        assert!(flows.iter().all(|&(s, d, _, t)| s != d && t < dur));
        let n = flows.iter().filter(|f| f.0 == 0).count() as f64;
        let expected = dur as f64 / (cdf.mean() * 8.0 * 1e9 / (rate as f64 * load));
        assert!(
            (n - expected).abs() <= 4.0 * expected.sqrt(),
            "{n} flows, expected {expected}"
        );
        let mean: f64 = flows.iter().map(|f| f.2 as f64).sum::<f64>() / flows.len() as f64;
        assert!(
            (mean / cdf.mean() - 1.0).abs() < 0.15,
            "mean {mean} vs {}",
            cdf.mean()
        );
        let again = generate(
            &[0, 1],
            &[rate, rate],
            &[0, 1, 2],
            load,
            &cdf,
            (0, dur),
            &mut Rng::new(7),
        );
        assert_eq!(flows, again);
    }
}
