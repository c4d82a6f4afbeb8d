//! The AFL++ driver: `longhaul-afl TARGET` runs the target named on the command line in AFL's
//! persistent mode (one instrumented binary for every target: one link instead of eleven).
//! Build with `cargo afl build --release -p longhaul-fuzz --features afl`; fuzz/README.md.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = longhaul_fuzz::target(&name) else {
        let names: Vec<&str> = longhaul_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: longhaul-afl TARGET (one of: {})", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| {
        target(data);
    });
}
