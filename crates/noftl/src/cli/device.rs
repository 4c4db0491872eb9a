//! `noftl device show`: geometry, capacity, timings, endurance and energy of a device.

use clap::Subcommand;
use serde::Serialize;

use super::common::DeviceArgs;

#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Show a device's geometry, capacity, timings, endurance and energy figures.
    Show {
        #[command(flatten)]
        device: DeviceArgs,
        /// Write JSON to this file instead of text ("-" or no value: standard output).
        #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
        json: Option<std::path::PathBuf>,
    },
    /// List the embedded presets.
    Presets,
}

#[derive(Serialize)]
struct Shown<'a> {
    config: &'a nand::DeviceConfig,
    dies: u32,
    blocks: u32,
    pages: u64,
    capacity_bytes: u64,
    page_transfer_us: f64,
}

pub fn run(c: DeviceCommand) -> anyhow::Result<()> {
    match c {
        DeviceCommand::Presets => {
            for (name, _) in nand::PRESETS {
                let cfg = nand::DeviceConfig::preset(name, &[])?;
                println!("{name:<12} {}", cfg.description);
            }
            Ok(())
        }
        DeviceCommand::Show { device, json } => {
            super::common::check_outputs(&[device.input()], &[json.as_deref()])?;
            let cfg = device.load()?;
            let g = &cfg.geometry;
            let t = &cfg.timing;
            let transfer_us = if t.transfer_in_array_time {
                0.0
            } else {
                f64::from(g.page_size_bytes + g.oob_size_bytes) / t.bus_mt_per_s
            };
            if json.is_some() {
                let shown = Shown {
                    config: &cfg,
                    dies: g.dies(),
                    blocks: g.blocks(),
                    pages: g.pages(),
                    capacity_bytes: g.capacity_bytes(),
                    page_transfer_us: transfer_us,
                };
                if !super::common::emit_json(json.as_deref(), &shown)? {
                    return Ok(());
                }
            }
            println!("device      {}  ({})", cfg.name, cfg.description);
            println!(
                "geometry    {} channels x {} chips x {} dies x {} planes x {} blocks x {} pages",
                g.channels,
                g.chips_per_channel,
                g.dies_per_chip,
                g.planes_per_die,
                g.blocks_per_plane,
                g.pages_per_block
            );
            println!(
                "page        {} B data + {} B OOB",
                g.page_size_bytes, g.oob_size_bytes
            );
            println!(
                "capacity    {} ({} dies, {} blocks, {} pages)",
                human_bytes(g.capacity_bytes()),
                g.dies(),
                g.blocks(),
                g.pages()
            );
            println!(
                "cells       {} (NOP {}{})",
                cfg.cell.native,
                cfg.cell.nop,
                if cfg.cell.native != nand::CellMode::Slc {
                    ", pSLC capable"
                } else {
                    ""
                }
            );
            let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_else(|| "-".into());
            println!(
                "timing      tR {} us (middle {}, upper {}), tPROG {} us (middle {}, upper {}), tBERS {} us",
                t.read_us,
                opt(t.read_middle_us),
                opt(t.read_upper_us),
                t.program_us,
                opt(t.program_middle_us),
                opt(t.program_upper_us),
                t.erase_us
            );
            if cfg.cell.native != nand::CellMode::Slc {
                println!(
                    "pslc        tR {} us, tPROG {} us",
                    opt(t.pslc_read_us),
                    opt(t.pslc_program_us)
                );
            }
            if t.transfer_in_array_time {
                println!(
                    "bus         transfer included in array times; command cycles {} ns",
                    t.cmd_addr_ns
                );
            } else {
                println!(
                    "bus         {} MT/s ({transfer_us:.2} us per page), command cycles {} ns",
                    t.bus_mt_per_s, t.cmd_addr_ns
                );
            }
            println!(
                "endurance   {} P/E cycles{}",
                cfg.endurance.native_cycles,
                cfg.endurance
                    .pslc_cycles
                    .map(|c| format!(", pSLC {c}"))
                    .unwrap_or_default()
            );
            let r = &cfg.reliability;
            println!(
                "reliability ECC {} bits / {} B, RBER {:e} fresh .. {:e} at endurance, factory bad {:.2}%",
                r.ecc_correctable_bits,
                r.ecc_codeword_bytes,
                r.rber_fresh,
                r.rber_at_endurance,
                r.factory_bad_block_ratio * 100.0
            );
            let e = &cfg.energy;
            println!(
                "energy      VCC {} V, read {} mA, program {} mA, erase {} mA, bus {} mA, standby {} uA",
                e.vcc_volts, e.read_ma, e.program_ma, e.erase_ma, e.bus_ma, e.standby_ua
            );
            Ok(())
        }
    }
}

pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}
