//! `noftl serve`: export a block device (an FTL, or the memdisk) as a Network Block Device.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use nand::ClockMode;
use nbd::{Endpoint, ServerConfig};

use crate::targets::{self, TargetArgs};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("endpoint").required(true).args(["socket", "listen"])))]
pub struct ServeArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Listen on this unix socket (e.g. /tmp/noftl.sock; clients: nbd+unix:///?socket=PATH).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Listen on TCP: PORT (on 127.0.0.1) or ADDR:PORT. Binds to loopback unless an explicit
    /// other address is given.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub listen: Option<String>,
    /// real: each request takes its modelled time on the wall clock; none: as fast as
    /// possible, device time still counted. serve supports real and none (virtual is refused).
    #[arg(long, default_value = "real", value_parser = parse_clock)]
    pub clock: ClockMode,
    /// Write the statistics as JSON here at shutdown and on SIGUSR1.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// Connections in the transmission phase at once (half-open ones do not count; see
    /// docs/nbd.md, "Limits").
    #[arg(long, default_value_t = 64)]
    pub max_connections: u64,
    /// Connections from one TCP source address at once, established and in the handshake each
    /// (a unix socket's clients cannot be told apart: only --max-connections applies there).
    #[arg(long, default_value_t = 16)]
    pub max_peer_connections: u64,
    /// Close a connection whose handshake has not ended this long after it connected, e.g.
    /// 10s.
    #[arg(long, default_value = "10s")]
    pub handshake_timeout: String,
    /// Close a connection that takes longer than this to send one request in full (header
    /// and payload, from its first byte), however it spreads the bytes, e.g. 30s.
    #[arg(long, default_value = "30s")]
    pub request_timeout: String,
    /// An established connection idle this long gives its slot to a new client when all are
    /// taken, e.g. 60s.
    #[arg(long, default_value = "60s")]
    pub idle_timeout: String,
    /// Map and fault in all of the in-memory device's memory before serving, so that the first
    /// write to each part of it does not wait for the kernel to zero memory (costs the whole
    /// device's RAM at once; refused when it does not fit; not with --image).
    #[arg(long)]
    pub prefault: bool,
}

fn parse_clock(s: &str) -> Result<ClockMode, String> {
    match s.parse::<ClockMode>()? {
        ClockMode::Virtual => Err(super::clock::unsupported(
            "serve",
            "virtual",
            &["real", "none"],
        )),
        m => Ok(m),
    }
}

/// The most `--max-connections` accepted: each connection holds two threads, so twice as many
/// threads as this (half-open and established ones), well within a default process limit.
const MAX_CONNECTIONS: u64 = 4096;

/// A timeout of at least 1 ms and at most a day: 0 would close every client at once.
fn timeout(flag: &'static str, s: &str) -> anyhow::Result<std::time::Duration> {
    let ns = lab::units::parse_duration_ns(s).with_context(|| flag.to_string())?;
    lab::limits::in_range(
        flag,
        ns / 1_000_000,
        1,
        86_400_000,
        "milliseconds (0 would close every client at once)",
    )?;
    Ok(std::time::Duration::from_nanos(ns))
}

/// `PORT` means 127.0.0.1:PORT; anything else must be a full socket address.
pub fn parse_listen(s: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    match s.parse::<SocketAddr>() {
        Ok(a) => Ok(a),
        Err(_) => {
            bail!("--listen '{s}' is neither a port nor ADDR:PORT (e.g. 10809 or 127.0.0.1:10809)")
        }
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let endpoint = match (&args.socket, &args.listen) {
        (Some(p), None) => Endpoint::Unix(p.clone()),
        (None, Some(l)) => {
            let addr = parse_listen(l)?;
            if !addr.ip().is_loopback() {
                eprintln!("noftl serve: warning: listening on {addr}, which is not loopback; NBD has no authentication");
            }
            Endpoint::Tcp(addr)
        }
        _ => bail!("give exactly one of --socket PATH or --listen [ADDR:]PORT"),
    };
    lab::limits::in_range(
        "--max-connections",
        args.max_connections,
        1,
        MAX_CONNECTIONS,
        "each connection holds up to two threads and 64 MiB of requests in flight",
    )?;
    lab::limits::in_range(
        "--max-peer-connections",
        args.max_peer_connections,
        1,
        MAX_CONNECTIONS,
        "each connection holds up to two threads and 64 MiB of requests in flight",
    )?;
    let handshake_timeout = timeout("--handshake-timeout", &args.handshake_timeout)?;
    let request_timeout = timeout("--request-timeout", &args.request_timeout)?;
    let idle_timeout = timeout("--idle-timeout", &args.idle_timeout)?;
    // The statistics never replace the image, the config or the socket (the output rule).
    super::common::check_outputs(
        &[
            ("--image", args.target.image.as_deref()),
            args.target.device.input(),
            ("--socket", args.socket.as_deref()),
        ],
        &[args.stats_file.as_deref()],
    )?;
    if args.prefault && args.target.image.is_some() {
        bail!("--prefault maps an in-memory device; an --image device's pages are its file's");
    }
    let mut dev = targets::build(&args.target)?;
    if args.prefault {
        if let Some(nand) = dev.nand_mut() {
            let bytes = nand.prefault()?;
            eprintln!(
                "noftl serve: {:.1} MiB of device memory mapped and faulted in",
                bytes as f64 / f64::from(1u32 << 20)
            );
        }
    }
    let export = nbd::Export::new(dev, args.clock);
    nbd::server::run(
        export,
        ServerConfig {
            endpoint,
            max_connections: args.max_connections,
            max_peer_connections: args.max_peer_connections,
            stats_file: args.stats_file,
            handshake_timeout,
            request_timeout,
            idle_timeout,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_defaults_to_loopback() {
        assert_eq!(
            parse_listen("10809").ok(),
            Some("127.0.0.1:10809".parse().expect("literal"))
        );
        assert_eq!(
            parse_listen("[::1]:7").ok(),
            Some("[::1]:7".parse().expect("literal"))
        );
        assert!(parse_listen("localhost").is_err());
        assert!(parse_clock("virtual").is_err());
        assert_eq!(parse_clock("none"), Ok(ClockMode::None));
    }
}
