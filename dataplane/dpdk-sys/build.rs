//! Build script: with the `link` feature, find the system DPDK with pkg-config, compile the C
//! shim (`shim.c`) with DPDK's own cflags and link DPDK's shared libraries. Without it, nothing.
//!
//! No `-march` of ours: the only target flags are the ones Debian's `libdpdk.pc` carries.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    #[cfg(feature = "link")]
    link::run();
}

#[cfg(feature = "link")]
mod link {
    use std::process::Command;

    const HINT: &str = "longhaul's `dpdk` feature needs the system DPDK 22.11 and pkg-config: \
                        on Debian/Ubuntu run `apt-get install dpdk dpdk-dev libdpdk-dev pkg-config` \
                        (or set PKG_CONFIG_PATH to where libdpdk.pc lives)";

    fn pkg_config(args: &[&str]) -> String {
        let out = match Command::new("pkg-config")
            .args(args)
            .arg("libdpdk")
            .output()
        {
            Ok(o) => o,
            Err(e) => fail(&format!("cannot run pkg-config ({e})")),
        };
        if !out.status.success() {
            fail(&format!(
                "`pkg-config {} libdpdk` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn fail(why: &str) -> ! {
        eprintln!("error: {why}\n{HINT}");
        std::process::exit(1);
    }

    pub fn run() {
        let version = pkg_config(&["--modversion"]);
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if major != 22 {
            println!(
                "cargo:warning=libdpdk {version} found; longhaul is written and tested against \
                 DPDK 22.11 LTS (the shim's layout asserts will catch incompatible changes)"
            );
        }
        let cflags = pkg_config(&["--cflags"]);
        let libs = pkg_config(&["--libs"]);

        let mut build = cc::Build::new();
        build.file("shim.c").warnings(true).opt_level(2);
        // DPDK's cflags are `-I...`, `-include rte_config.h` and Debian's `-march=corei7`: pass
        // them all, in order (the `-include` takes the next word).
        let mut it = cflags.split_whitespace();
        while let Some(f) = it.next() {
            if f == "-include" {
                if let Some(h) = it.next() {
                    build.flag("-include").flag(h);
                }
            } else if let Some(dir) = f.strip_prefix("-I") {
                build.include(dir);
            } else {
                build.flag(f);
            }
        }
        build.compile("longhaul_dpdk_shim");

        for l in libs.split_whitespace() {
            if let Some(dir) = l.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            } else if let Some(lib) = l.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
            // `-Wl,--as-needed` is rustc's default on GNU targets already.
        }
        // rte_eth_from_rings (net_ring pairs) lives in the net_ring PMD, which libdpdk.pc does
        // not list; it is the same file EAL loads from its plugin directory.
        println!("cargo:rustc-link-lib=dylib=rte_net_ring");
        println!("cargo:version={version}");
    }
}
