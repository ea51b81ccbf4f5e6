//! askbusd: the askbus daemon. Parses the command line, sets up logging and serves until
//! SIGTERM or SIGINT.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};

use askbus::broker::Limits;
use askbus::protocol::NoUiPolicy;
use askbus::server::{Config, Daemon};

/// Brokers ask-user questions between agent processes and UI frontends over a Unix socket.
#[derive(Debug, Parser)]
#[command(name = "askbusd", version, about, long_about = None)]
struct Args {
    /// Socket to listen on [default: $ASKBUS_SOCKET, else $XDG_RUNTIME_DIR/askbus.sock, else
    /// /run/askbus/askbus.sock for root, else /tmp/askbus-<uid>/askbus.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Append one JSON line per request to PATH [default: $XDG_STATE_HOME/askbus/telemetry.jsonl,
    /// else ~/.local/state/askbus/telemetry.jsonl]
    #[arg(long, value_name = "PATH", conflicts_with = "no_telemetry")]
    telemetry: Option<PathBuf>,
    /// Write no telemetry file
    #[arg(long)]
    no_telemetry: bool,
    /// Timeout of a request that gives no timeoutMs
    #[arg(long, value_name = "N", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    default_timeout_ms: u64,
    /// Largest timeout a request may have; larger ones are clamped to it
    #[arg(long, value_name = "N", default_value_t = 86_400_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_timeout_ms: u64,
    /// What a request gets when no UI is subscribed and it gives no noUi: wait for a UI until
    /// its timeout, or reject at once with reason no-ui
    #[arg(long, value_name = "POLICY", default_value = "wait")]
    no_ui: NoUi,
    /// Largest frame accepted, in bytes (a longer length prefix closes the connection)
    #[arg(long, value_name = "N", default_value_t = 1_048_576, value_parser = clap::value_parser!(u64).range(64..=(u32::MAX as u64)))]
    max_frame_bytes: u64,
    /// Pending requests one connection may have
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..))]
    max_pending_per_connection: u64,
    /// Pending requests the daemon holds in total
    #[arg(long, value_name = "N", default_value_t = 262_144, value_parser = clap::value_parser!(u64).range(1..))]
    max_pending: u64,
    /// Connections served at once; more are refused with too-many-connections
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// Unsent bytes a connection may have queued before it is disconnected as not reading
    #[arg(long, value_name = "N", default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..))]
    max_queue_bytes: u64,
    /// How long one frame may take to arrive once its first byte has; a slower peer is cut
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    frame_timeout_ms: u64,
    /// Log line format
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    log_format: LogFormat,
    /// Log filter (tracing's EnvFilter syntax; also $ASKBUS_LOG)
    #[arg(
        long,
        value_name = "FILTER",
        env = "ASKBUS_LOG",
        default_value = "info"
    )]
    log_level: String,
    /// Worker threads [default: one per core]
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum NoUi {
    Wait,
    Reject,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> Result<()> {
    let args = Args::parse();
    init_logging(args.log_format, &args.log_level)?;
    let config = Config {
        socket: args
            .socket
            .unwrap_or_else(askbus::paths::default_socket_path),
        telemetry: if args.no_telemetry {
            None
        } else {
            Some(
                args.telemetry
                    .unwrap_or_else(askbus::paths::default_telemetry_path),
            )
        },
        limits: Limits {
            default_timeout_ms: args.default_timeout_ms.min(args.max_timeout_ms),
            max_timeout_ms: args.max_timeout_ms,
            no_ui: match args.no_ui {
                NoUi::Wait => NoUiPolicy::Wait,
                NoUi::Reject => NoUiPolicy::Reject,
            },
            max_pending_per_connection: args.max_pending_per_connection as usize,
            max_pending_total: args.max_pending as usize,
        },
        max_frame_bytes: args.max_frame_bytes as usize,
        max_connections: args.max_connections as usize,
        max_queue_bytes: args.max_queue_bytes as usize,
        allowed_uids: Vec::new(),
        frame_timeout: std::time::Duration::from_millis(args.frame_timeout_ms),
    };
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all().thread_name("askbusd");
    if let Some(n) = args.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.build().context("cannot start the runtime")?;
    rt.block_on(async move {
        let daemon = Daemon::bind(config).context("askbusd cannot start")?;
        tracing::info!(
            socket = %daemon.socket().display(),
            telemetry = %daemon.telemetry_path().map(|p| p.display().to_string()).unwrap_or_else(|| "off".into()),
            "askbusd ready on {}",
            daemon.socket().display()
        );
        daemon.run(shutdown_signal()).await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

fn init_logging(format: LogFormat, filter: &str) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_new(filter).with_context(|| format!("bad log filter {filter:?}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    Ok(())
}
