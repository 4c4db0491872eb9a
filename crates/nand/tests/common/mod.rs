#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Helpers shared by the nand integration tests.

use nand::{CellMode, DeviceConfig, Nand, Pbn, Ppn, Purpose};

pub const H: Purpose = Purpose::Host;

pub fn cfg(preset: &str, overrides: &[&str]) -> DeviceConfig {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    DeviceConfig::preset(preset, &o).expect("valid test config")
}

pub fn dev(preset: &str, overrides: &[&str]) -> Nand {
    Nand::new(cfg(preset, overrides)).expect("device")
}

pub fn page(n: &Nand, fill: u8) -> Vec<u8> {
    vec![fill; n.geometry().page_size_bytes as usize]
}

pub fn oob(n: &Nand, fill: u8) -> Vec<u8> {
    vec![fill; n.geometry().oob_size_bytes as usize]
}

pub fn ppn(n: &Nand, block: u32, page: u32) -> Ppn {
    n.geometry().ppn_in_block(Pbn(block), page)
}

/// Reads a whole page (data and OOB) at time 0 of a fresh request.
pub fn read_back(n: &mut Nand, p: Ppn) -> (Vec<u8>, Vec<u8>) {
    let mut d = page(n, 0);
    let mut o = oob(n, 0);
    n.read(n.now_ns(), p, &mut d, &mut o, H).expect("read");
    (d, o)
}

pub fn erase(n: &mut Nand, block: u32, mode: CellMode) {
    let at = n.now_ns();
    n.erase(at, Pbn(block), mode, H).expect("erase");
}
