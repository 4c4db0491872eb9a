//! The AFL++ driver: `fuzz-afl TARGET` runs target `TARGET` (`noftl_fuzz::TARGETS`) on each
//! input AFL gives it. Built and run by `scripts/fuzz.sh`.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = noftl_fuzz::target(&name) else {
        eprintln!(
            "usage: fuzz-afl TARGET, one of: {}",
            noftl_fuzz::TARGETS
                .iter()
                .map(|t| t.0)
                .collect::<Vec<_>>()
                .join(", ")
        );
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
