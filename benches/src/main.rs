//! askbus-bench: a load generator for askbusd (like `nats bench` or `redis-benchmark`), the
//! baseline relay it is compared with side by side (`--baseline`, alternating A B A B), and
//! `targets`, which measures every performance target. Users reach it as `askbus bench ARGS…`
//! (the `askbus` command execs this binary); it is a package of its own so the baselines (a
//! relay, raw NATS, JetStream) stay out of what ships. This file owns the command line, one
//! run against one target, and the alternation.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

mod acp;
mod load;
mod proc;
mod relay;
mod report;
mod spawn;
mod targets;
mod telegram;
mod wire;

use load::{Stop, Workload};
use report::{Baseline, Run, Server};
use spawn::{Kind, Target};
use wire::{Extra, Request, RequestKind};

/// The status of a bench that failed (as `askbus`'s own failures).
const FAILURE: u8 = 1;

/// Measure askbusd: requests/s and round-trip latency with auto-answering UIs.
#[derive(Debug, Parser)]
#[command(name = "askbus bench", bin_name = "askbus bench", version)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// A running daemon to measure instead of one the bench starts
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Measure every performance target (latency and throughput against the relay, memory, CPU,
    /// fan-out, start-up, the store) and say which are met.
    ///
    /// Starts its own daemons and relays; ratios are measured side by side, alternating.
    Targets(targets::Args),
    /// Measure federation's targets on a nats-server and askbusd nodes of its own: the
    /// cross-node round trip and throughput against raw NATS request-reply, and the memory and
    /// idle CPU of a node showing another's questions.
    Federation(targets::FederationArgs),
    /// Measure what `askbus acp` adds to an editor's stream of session/update notifications:
    /// latency per message and throughput, side by side with a direct pipe.
    Acp(acp::AcpArgs),
    /// Measure `askbus chat telegram` against a loopback stand-in of the Bot API: a request to
    /// its message (p50, p95), and the chat's idle CPU and memory with many pending.
    Chat(targets::ChatArgs),
    /// The baseline relay `--baseline` starts (for the bench only).
    #[command(hide = true)]
    Relay,
    /// The stand-in ACP agent `acp` starts (for the bench only).
    #[command(hide = true)]
    AcpAgent {
        #[arg(long, default_value_t = 2048)]
        size: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// One request in flight: round-trip latency
    Sequential,
    /// Many in flight (--in-flight): throughput
    Concurrent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TargetArg {
    Askbusd,
    /// The baseline relay (`askbus-bench relay`)
    Relay,
}
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Sequential (latency) or concurrent (throughput)
    #[arg(long, value_enum, default_value_t = Mode::Sequential)]
    mode: Mode,
    /// Producer connections [default: 1 sequential, 8 concurrent]
    #[arg(long, value_name = "P")]
    producers: Option<usize>,
    /// Subscribed UIs; UI k answers the requests numbered n with n % U == k [default: 1
    /// sequential, 2 concurrent]
    #[arg(long, value_name = "U")]
    uis: Option<usize>,
    /// Requests in flight, in total over the producers [default: 1 sequential, 64 concurrent]
    #[arg(long, value_name = "C")]
    in_flight: Option<usize>,
    /// What each request is
    #[arg(long, value_enum, default_value_t = RequestKind::Question)]
    kind: RequestKind,
    /// Size of a request frame on the wire (option descriptions are padded to reach it)
    /// [default: 300 for a question, 512 for an approval]
    #[arg(long, value_name = "BYTES")]
    size: Option<usize>,
    /// Requests before the measured ones (not recorded)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    warmup: u64,
    /// Requests measured [default: 20000 sequential, 200000 concurrent]
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    requests: Option<u64>,
    /// Measure for this long instead of a number of requests (e.g. 10s)
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// What to measure
    #[arg(long, value_enum, default_value_t = TargetArg::Askbusd)]
    target: TargetArg,
    /// Measure askbusd and the baseline relay alternately (A B A B) and print the ratios
    #[arg(long, conflicts_with = "target")]
    baseline: bool,
    /// Rounds of each target with --baseline
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// The askbusd binary to start [default: askbusd next to this executable]
    #[arg(long, value_name = "PATH")]
    daemon: Option<PathBuf>,
    /// Start askbusd with --no-telemetry (by default it writes telemetry to its temp dir)
    #[arg(long)]
    no_telemetry: bool,
    /// Threads of the bench's own runtime (1: a single-threaded client)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    client_threads: u64,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let socket = args.socket;
    let result = match args.command {
        Some(Sub::Targets(t)) => {
            own(&socket, "targets starts its own daemons").and_then(|()| targets::run(t))
        }
        Some(Sub::Federation(f)) => own(&socket, "federation starts its own nats-server and nodes")
            .and_then(|()| targets::federation(f)),
        Some(Sub::Acp(a)) => acp::run(a),
        Some(Sub::Chat(c)) => {
            own(&socket, "chat starts its own daemon and chat").and_then(|()| targets::chat(c))
        }
        Some(Sub::AcpAgent { size }) => return acp::agent_main(size),
        Some(Sub::Relay) => match socket {
            Some(s) => relay::main(&s),
            None => Err(anyhow::anyhow!("relay needs --socket PATH")),
        },
        None => run(args.run, socket),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("askbus bench: {e:#}");
            ExitCode::from(FAILURE)
        }
    }
}

/// Refuses `--socket` for a subcommand that starts its own processes (`what` says which).
fn own(socket: &Option<PathBuf>, what: &str) -> Result<()> {
    match socket {
        Some(_) => bail!("bench {what}; drop --socket"),
        None => Ok(()),
    }
}

fn run(a: RunArgs, socket: Option<PathBuf>) -> Result<ExitCode> {
    proc::raise_nofile()?;
    let concurrent = a.mode == Mode::Concurrent;
    let in_flight = a.in_flight.unwrap_or(if concurrent { 64 } else { 1 });
    if !concurrent && in_flight != 1 {
        bail!("sequential mode keeps one request in flight; use --mode concurrent for --in-flight");
    }
    let producers = a.producers.unwrap_or(if concurrent { 8 } else { 1 });
    let stop = match (a.requests, a.duration) {
        (_, Some(d)) => Stop::Duration(d),
        (Some(n), None) => Stop::Requests(n),
        (None, None) => Stop::Requests(if concurrent { 200_000 } else { 20_000 }),
    };
    let spec = Spec {
        mode: if concurrent {
            "concurrent"
        } else {
            "sequential"
        },
        workload: workload(
            a.kind,
            producers,
            a.uis.unwrap_or(if concurrent { 2 } else { 1 }),
            in_flight,
            a.size.unwrap_or(default_size(a.kind)),
            a.warmup,
            stop,
        )?,
        client_threads: a.client_threads as usize,
    };
    // A running daemon at --socket is measured as it is (no askbusd binary is needed then);
    // with --baseline the relay is still started beside it.
    let daemon = match &socket {
        Some(s) => On::Running(s.clone(), "askbusd"),
        None => On::Start(daemon_kind(
            a.daemon.as_deref(),
            !a.no_telemetry,
            &spec.workload,
        )?),
    };
    let relay = match &socket {
        Some(s) if !a.baseline => On::Running(s.clone(), "relay"),
        _ => On::Start(relay_kind()?),
    };
    if a.baseline {
        let mut runs = Vec::new();
        for _ in 0..a.rounds {
            runs.push(measure(&daemon, &spec)?);
            runs.push(measure(&relay, &spec)?);
        }
        let b = Baseline::of(runs);
        if a.json {
            println!("{}", serde_json::to_string(&b)?);
        } else {
            b.print();
        }
    } else {
        let kind = if a.target == TargetArg::Relay {
            &relay
        } else {
            &daemon
        };
        let r = measure(kind, &spec)?;
        if a.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            r.print();
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The default frame size of a request of `kind`: an approval's exec details and outcomes
/// take more room than the question's, so its smallest frame is larger.
fn default_size(kind: RequestKind) -> usize {
    match kind {
        RequestKind::Question => 300,
        RequestKind::Approval => 512,
    }
}

/// A workload as the command line (or a target) describes it.
fn workload(
    kind: RequestKind,
    producers: usize,
    uis: usize,
    in_flight: usize,
    size: usize,
    warmup: u64,
    stop: Stop,
) -> Result<Workload> {
    if producers == 0 || uis == 0 {
        bail!("--producers and --uis must be at least 1");
    }
    // Size the frame for a correlationId from the middle of the run.
    let per_producer = match stop {
        Stop::Requests(n) => n,
        Stop::Duration(_) => 100_000,
    } / producers as u64
        + warmup / producers as u64;
    let cid_len = format!("b-{}-{}", producers - 1, per_producer / 2).len();
    let request = match kind {
        RequestKind::Question => Request::new(size, cid_len, Extra::default())?,
        RequestKind::Approval => Request::approval(size, cid_len)?,
    };
    Ok(Workload {
        producers,
        uis,
        in_flight,
        warmup,
        stop,
        frame_bytes: request.wire_len(cid_len),
        request: Arc::new(request),
    })
}

/// One run's shape, the same for every target it is run against.
struct Spec {
    mode: &'static str,
    workload: Workload,
    client_threads: usize,
}

/// Where a run goes: a process the bench starts, or one already running.
enum On {
    Start(Kind),
    Running(PathBuf, &'static str),
}

/// askbusd as the bench starts it, with the limits the workload needs raised.
fn daemon_kind(bin: Option<&Path>, telemetry: bool, w: &Workload) -> Result<Kind> {
    let bin = match bin {
        Some(b) => b.to_owned(),
        None => next_to_me("askbusd")?,
    };
    let mut args = Vec::new();
    let per_connection = w.in_flight.div_ceil(w.producers);
    if per_connection > 128 {
        args.extend([
            "--max-pending-per-connection".into(),
            per_connection.to_string(),
        ]);
    }
    if w.in_flight > 262_144 {
        args.extend(["--max-pending".into(), w.in_flight.to_string()]);
    }
    Ok(Kind::Askbusd {
        bin,
        telemetry,
        args,
        policies: None,
    })
}

fn relay_kind() -> Result<Kind> {
    Ok(Kind::Relay {
        exe: std::env::current_exe().context("cannot find this executable")?,
    })
}

/// A binary in the directory of the running executable.
fn next_to_me(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("cannot find this executable")?;
    let bin = me.with_file_name(name);
    if !bin.exists() {
        let hint = if name == "askbusd" {
            "use --daemon PATH"
        } else {
            "build it beside askbus-bench"
        };
        bail!("no {} ({hint})", bin.display());
    }
    Ok(bin)
}

/// A runtime for the bench's own side of a run.
fn client_runtime(threads: usize) -> Result<tokio::runtime::Runtime> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    rt.context("cannot start the bench's runtime")
}

/// Runs `spec` once against `on`.
fn measure(on: &On, spec: &Spec) -> Result<Run> {
    let rt = client_runtime(spec.client_threads)?;
    let w = &spec.workload;
    let (name, measured, server, telemetry) = match on {
        On::Running(socket, name) => (*name, rt.block_on(load::run(socket, w, None))?, None, None),
        On::Start(kind) => {
            let mut target = Target::start(kind)?;
            let measured = rt.block_on(load::run(target.socket(), w, Some(target.pid())));
            target.check_alive()?;
            let measured = measured?;
            let mem = proc::memory(target.pid())?;
            target.stop()?;
            let cpu_ms =
                proc::ticks_to_ms(measured.cpu_ticks.expect("a started target's pid was read"));
            let server = Server {
                cpu_ms,
                cpu_us_per_request: cpu_ms * 1000.0 / measured.requests.max(1) as f64,
                peak_rss_kib: mem.peak_kib,
            };
            let telemetry = match kind {
                Kind::Askbusd { telemetry, .. } => Some(*telemetry),
                Kind::Relay { .. } | Kind::Chat { .. } => None,
            };
            (kind.name(), measured, Some(server), telemetry)
        }
    };
    let elapsed = measured.elapsed.as_secs_f64();
    Ok(Run {
        target: name,
        mode: spec.mode,
        kind: w.request.kind.name(),
        producers: w.producers,
        uis: w.uis,
        in_flight: w.in_flight,
        frame_bytes: w.frame_bytes,
        warmup: w.warmup,
        requests: measured.requests,
        elapsed_s: elapsed,
        requests_per_s: measured.requests as f64 / elapsed,
        latency_us: report::Latency::of(&measured.latency),
        server,
        telemetry,
    })
}
