//! configs/spray-tor.toml through the `longhaul` binary: `replay` (sprays a sender's WRITEs over
//! the four spines, takes a path avoidance signal) and `run --until-idle` on pcap ports.

use longhaul_dataplane::pcap::{read_pcap, write_pcap_to, PcapRecord};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::roce::{
    build_ack_v4, build_roce_v4, opcode, AckSpec, BthRepr, RoceAddrs, Syndrome,
};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("spray", name)
}

const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);

fn addrs(src: Ipv4Addr, dst: Ipv4Addr, dscp: u8) -> RoceAddrs<Ipv4Addr> {
    RoceAddrs {
        src_mac: MacAddr([2, 0, 0, 0, 0x10, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_ip: src,
        dst_ip: dst,
        udp_sport: 49152,
        dscp,
        ecn: 2,
    }
}

/// 16 RDMA WRITE MIDDLEs into h0, then (on up0) a NAK for PSN 5 with the path avoidance signal.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let mut recs = Vec::new();
    for psn in 0..16u32 {
        let mut b = [0u8; 512];
        let bth = BthRepr {
            opcode: opcode::RC_RDMA_WRITE_MIDDLE,
            pkey: 0xffff,
            dest_qp: 0x22,
            psn,
            ..BthRepr::default()
        };
        let n = build_roce_v4(&mut b, &addrs(SENDER, RECEIVER, 26), &bth, &[7; 256]).unwrap();
        recs.push(PcapRecord {
            ts_ns: 1_000_000 + u64::from(psn) * 1_000,
            data: b[..n].to_vec(),
        });
    }
    let h0 = dir.join("in_h0.pcap");
    write_pcap_to(std::fs::File::create(&h0).unwrap(), &recs).unwrap();
    let mut b = [0u8; 128];
    let s = AckSpec {
        dest_qp: 0x11,
        psn: 5,
        syndrome: Syndrome::NAK_PSN_SEQ_ERR,
        msn: 1,
        pkey: 0xffff,
    };
    let n = build_ack_v4(&mut b, &addrs(RECEIVER, SENDER, 48), &s).unwrap();
    b[46] |= 0x20; // path avoidance signal (outside the ICRC)
    let up0 = dir.join("in_up0.pcap");
    let rec = PcapRecord {
        ts_ns: 2_000_000,
        data: b[..n].to_vec(),
    };
    write_pcap_to(std::fs::File::create(&up0).unwrap(), &[rec]).unwrap();
    (h0, up0)
}

#[test]
fn spray_tor_replays() {
    let d = tmpdir("replay");
    let (h0, up0) = inputs(&d);
    let out = bin()
        .args(["replay", "--nonzero", "--config"])
        .arg(root().join("configs/spray-tor.toml"))
        .arg("--in")
        .arg(format!("h0={}", h0.display()))
        .arg("--in")
        .arg(format!("up0={}", up0.display()))
        .arg("--out-dir")
        .arg(&d)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("spray.s.sprayed 16"), "{stdout}");
    assert!(stdout.contains("spray.s.avoidance_signals 1"), "{stdout}");
    assert!(stdout.contains("spray.signals_cleared 1"), "{stdout}");
    let mut total = 0;
    for up in ["up0", "up1", "up2", "up3"] {
        let n = read_pcap(d.join(format!("{up}.pcap"))).unwrap().len();
        assert_eq!(n, 4, "{up}: PSN mod 4 spreads 16 packets evenly");
        total += n;
    }
    assert_eq!(total, 16);
    let back = read_pcap(d.join("h0.pcap")).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data[46] & 0x20, 0, "the RNIC gets a standard NAK");
}

#[test]
fn spray_tor_runs_live_until_idle() {
    let d = tmpdir("live");
    let (h0, _) = inputs(&d);
    let base = std::fs::read_to_string(root().join("configs/spray-tor.toml")).unwrap();
    let mut text = String::new();
    let mut k = 0;
    for line in base.lines() {
        text.push_str(line);
        text.push('\n');
        if line.starts_with("mtu = 4200") {
            match k {
                0 => text.push_str(&format!(
                    "io = {{ kind = \"pcap\", rx = \"{}\" }}\n",
                    h0.display()
                )),
                2..=5 => text.push_str(&format!(
                    "io = {{ kind = \"pcap\", tx = \"up{}-out.pcap\" }}\n",
                    k - 2
                )),
                _ => {}
            }
            k += 1;
        }
    }
    text.push_str("\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n");
    let cfg = d.join("live.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = bin()
        .args(["run", "--until-idle", "--nonzero", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("spray.s.sprayed 16"), "{stdout}");
    let total: usize = (0..4)
        .map(|i| read_pcap(d.join(format!("up{i}-out.pcap"))).unwrap().len())
        .sum();
    assert_eq!(total, 16);
}
