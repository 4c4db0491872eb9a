//! What the nand benches share: the device they measure.

use nand::{DeviceConfig, Nand, Ppn, Purpose};

/// The `noftl13` device (the NoFTL paper's layout) on `store` ("ram" or "meta"), every page
/// programmed once, so that reads hit programmed pages anywhere on it.
pub fn filled_device(store: &str) -> Nand {
    let cfg = DeviceConfig::preset("noftl13", &[format!("store=\"{store}\"")]).expect("preset");
    let mut n = Nand::new(cfg).expect("device");
    let data = vec![0x5Au8; 4096];
    let mut at = 0;
    for p in 0..n.geometry().pages() {
        at = n
            .program(at, Ppn(p), &data, &[], Purpose::Host)
            .expect("fill")
            .done_ns;
    }
    n
}
