//! configs/baseline.toml for a live `longhaul run` in a test: pcap io on dc0 (rx: the embedded
//! trace, with `rx_extra` keys) and on wan0 (tx: `wan0-out.pcap`).

use std::path::Path;

/// The config's text, without its `[control]` section (the caller adds one).
pub fn baseline_with_pcap_io(root: &Path, rx_extra: &str) -> String {
    let base = std::fs::read_to_string(root.join("configs/baseline.toml")).unwrap();
    let trace = root.join("examples/roce-64flows.pcap");
    let mut out = String::new();
    let mut k = 0;
    for line in base.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("mtu = 4200") {
            match k {
                0 => out.push_str(&format!(
                    "io = {{ kind = \"pcap\", rx = \"{}\"{rx_extra} }}\n",
                    trace.display()
                )),
                2 => out.push_str("io = { kind = \"pcap\", tx = \"wan0-out.pcap\" }\n"),
                _ => {}
            }
            k += 1;
        }
    }
    out
}
