//! `noftl vm`: a kernel file system (ext4, ext3, f2fs, xfs) in a QEMU guest on the emulated
//! SSD, exported by `noftl serve` with the same target flags. The flags, their conversion to
//! `lab::experiments::vm::Spec`, and the report; the machinery (server, QEMU, guest job) is
//! `lab::experiments::vm`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

use lab::experiments::vm::{Accel, Fs, Spec, VmResult};

use crate::targets::TargetArgs;

#[derive(Debug, Args)]
pub struct VmArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The kernel file system the guest makes and mounts on the export: ext4 (ordered
    /// journal), ext3, f2fs, xfs (needs an export over 300 MiB).
    #[arg(long, default_value = "ext4")]
    pub fs: String,
    /// The server's clock (as `noftl serve`): real waits each request's modelled time on the
    /// wall clock; none does not wait (device time still counted).
    #[arg(long, default_value = "real", value_parser = super::clock::parser("vm", &["real", "none"]))]
    pub clock: String,
    /// Mount the file system already on --image instead of making one (a second guest on the
    /// same device).
    #[arg(long)]
    pub no_mkfs: bool,
    /// The guest's accelerator: auto (KVM when /dev/kvm runs the guest, else TCG), kvm, tcg.
    #[arg(long, default_value = "auto")]
    pub accel: String,
    /// Kill the guest when it has not powered off after this long, boot included (e.g. 10m,
    /// 90s).
    #[arg(long, default_value = "10m")]
    pub timeout: String,
    /// The guest's memory, MiB.
    #[arg(long, default_value_t = 512)]
    pub memory_mib: u32,
    /// Copy the guest's output here (created if missing): the files the command writes to
    /// $NOFTL_OUT, its stdout.txt and stderr.txt, the guest's console.log, job.log and
    /// steps.txt (each job step, its status and the guest's clock when it ended).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the result as JSON to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// The command the guest runs in the mounted file system's directory, after `--` (host
    /// programs: the guest sees the host's root read-only), e.g. -- fio --name=x --rw=write
    /// --size=16m.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl VmArgs {
    /// The run these flags name, served by this program.
    pub fn spec(&self) -> anyhow::Result<Spec> {
        let timeout_ns = lab::units::parse_duration_ns(&self.timeout).context("--timeout")?;
        Ok(Spec {
            noftl: std::env::current_exe().context("own executable")?,
            target: self.target.spec(),
            clock: self.clock.clone(),
            fs: self.fs.parse::<Fs>()?,
            mkfs: !self.no_mkfs,
            command: self.command.clone(),
            out: self.out.clone(),
            accel: self.accel.parse::<Accel>()?,
            timeout_s: timeout_ns.div_ceil(1_000_000_000),
            memory_mib: self.memory_mib,
            max_rounds: None,
            label: "vm".into(),
        })
    }
}

pub fn run(a: VmArgs) -> anyhow::Result<()> {
    let spec = a.spec()?;
    // The result never replaces the image or the config (the output rule).
    super::common::check_outputs(
        &[
            ("--image", a.target.image.as_deref()),
            a.target.device.input(),
        ],
        &[a.json.as_deref()],
    )?;
    let res = lab::experiments::vm::run(&spec)?;
    if super::common::emit_json(a.json.as_deref(), &res)? {
        print_report(&res);
    }
    if res.guest_exit_status != 0 {
        bail!(
            "the guest's command exited with status {} (its stderr: {})",
            res.guest_exit_status,
            res.guest_stderr.trim()
        );
    }
    Ok(())
}

fn print_report(r: &VmResult) {
    print!("{}", r.guest_stdout);
    eprint!("{}", r.guest_stderr);
    let d = &r.device;
    let mib = |b: u64| b as f64 / 1_048_576.0;
    println!(
        "\n{} on {} ({:.1} MiB export), kernel {}, accelerator {} ({})",
        r.fs.name(),
        r.store,
        mib(r.export_bytes),
        r.kernel_version,
        r.accelerator.to_uppercase(),
        r.accelerator_note
    );
    println!(
        "  guest command: {} -> exit status {}",
        r.command.join(" "),
        r.guest_exit_status
    );
    println!(
        "  device: host wrote {:.1} MiB, read {:.1} MiB ({} writes, {} zeroings, {} reads, {} flushes, {} trims); FTL host page writes {}",
        mib(d.host_write_bytes),
        mib(d.host_read_bytes),
        d.write_requests,
        d.write_zeroes_requests,
        d.read_requests,
        d.flush_requests,
        d.trim_requests,
        d.host_write_pages
    );
    println!(
        "  flash: {} programs, {} reads, {} erases, {} GC migrations, WAF {}",
        d.flash_programs, d.flash_reads, d.flash_erases, d.gc_migrations, d.waf
    );
    println!(
        "  modelled device time: dies busy {:.1} ms in all, device clock {:.1} ms, die utilization {:.3}",
        d.die_busy_us / 1e3,
        d.device_clock_us / 1e3,
        d.die_utilization
    );
    println!(
        "  guest wall time ({} time, not a result): {:.1} s QEMU start to power-off, {:.1} s kernel boot to the job, {:.1} s the command",
        r.guest_timing.accelerator.to_uppercase(),
        r.guest_timing.boot_to_poweroff_s,
        r.guest_timing.boot_s,
        r.guest_timing.command_s
    );
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    /// The server `vm` starts gets the target the user named: its flags, rendered back
    /// (`TargetSpec::cli_args`), parse as `serve` to the same target.
    #[test]
    fn the_served_target_is_the_one_named() {
        let argv = "noftl vm --store dftl --cache 5% --op 10% --gc fifo --preset tiny \
                    --set geometry.blocks_per_plane=64 --write-buffer 4 --image a.img -- true";
        let Ok(Cli {
            command: Command::Vm(vm),
            ..
        }) = Cli::try_parse_from(argv.split_whitespace())
        else {
            panic!("{argv} does not parse");
        };
        let want = vm.target.spec();
        let serve_argv = ["noftl", "serve", "--socket", "s"]
            .into_iter()
            .map(String::from)
            .chain(want.cli_args());
        let Ok(Cli {
            command: Command::Serve(serve),
            ..
        }) = Cli::try_parse_from(serve_argv)
        else {
            panic!("{:?} does not parse as serve", want.cli_args());
        };
        let got = serve.target.spec();
        assert_eq!(got.target, want.target);
        assert_eq!(got.device, want.device);
        assert_eq!(got.knobs, want.knobs);
        assert_eq!(got.image, want.image);
        assert_eq!(vm.command, ["true"]);
    }
}
