//! `noftl serve`: export a block device (an FTL, or the memdisk) as a Network Block Device.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use nand::ClockMode;

use crate::nbd::{self, Endpoint, ServerConfig};
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
    /// possible, device time still counted.
    #[arg(long, default_value = "real", value_parser = parse_clock)]
    pub clock: ClockMode,
    /// Write the statistics as JSON here at shutdown and on SIGUSR1.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// Connections served at once; more are closed at accept.
    #[arg(long, default_value_t = 64)]
    pub max_connections: u64,
}

fn parse_clock(s: &str) -> Result<ClockMode, String> {
    match s.parse::<ClockMode>()? {
        ClockMode::Virtual => {
            Err("serve runs in real time: use --clock real or --clock none".into())
        }
        m => Ok(m),
    }
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
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let dev = targets::build(&args.target)?;
    let export = nbd::Export::new(dev, args.clock);
    nbd::server::run(
        export,
        ServerConfig {
            endpoint,
            max_connections: args.max_connections,
            stats_file: args.stats_file,
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
