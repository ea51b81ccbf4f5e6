//! `askbus bench targets`: measures every performance target of issue 7 and prints the table
//! (what, target, measured, met or missed). Timings are ratios against the baseline relay (or
//! askbusd against itself) measured in the same run, alternating A B A B, since these
//! machines are too noisy for absolute times; the memory and CPU figures come from /proc.
//! Each family of targets that needs its own workload has a file: `idle` (RSS per idle
//! connection), `pending` (RSS per pending question, idle wakeups, expiry cost), `fanout`
//! (one question to many UIs), `startup` (start to ready), `store` (askbusd with its store
//! against itself without, a restart with many pending, the durable round trip against
//! JetStream's) and `history` (a query over a million records, memory against history). The
//! approval row compares askbusd with itself: an approval's round trip against a question's of
//! the same size; `policy` an approval a rule decides against a question a person answers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::load::{self, Reader, Stop};
use super::report::{median, Baseline};
use super::wire::write_frame;
mod chat;
mod fanout;
mod federation;
mod history;
mod idle;
mod pending;
mod policy;
mod startup;
mod store;

pub use chat::{run as chat, Args as ChatArgs};
use fanout::fanout;
pub use federation::{run as federation, Args as FederationArgs};
use idle::idle_connections;
use pending::pending;
use startup::start_to_ready;

use super::wire::RequestKind;
use super::{daemon_kind, default_size, measure, next_to_me, proc, relay_kind, workload, On, Spec};

/// What `targets`, `federation` and `chat` all take.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Small counts everywhere (seconds instead of a minute or two; for CI)
    #[arg(long)]
    quick: bool,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
    /// The askbusd binary to start [default: askbusd next to this executable]
    #[arg(long, value_name = "PATH")]
    daemon: Option<PathBuf>,
}

impl Common {
    /// `--daemon`, or askbusd beside this executable.
    fn daemon(&self) -> Result<PathBuf> {
        match &self.daemon {
            Some(b) => Ok(b.clone()),
            None => next_to_me("askbusd"),
        }
    }

    /// Prints the rows (a table, or one JSON object with `--json`).
    fn finish(&self, rounds: u64, rows: Vec<Row>) -> Result<ExitCode> {
        let met = rows.iter().filter(|r| r.met).count();
        let report = Report {
            quick: self.quick,
            rounds,
            missed: rows.len() - met,
            met,
            rows,
        };
        if self.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print_table(&report);
        }
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Rounds of each side of every ratio
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Threads of the bench's own runtime
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    client_threads: u64,
    /// Measure only these groups of targets (comma-separated) [default: all]
    #[arg(long, value_name = "GROUP", value_delimiter = ',')]
    only: Vec<Group>,
    /// The nats-server the store group's JetStream side runs on [default: $NATS_SERVER, else
    /// nats-server on PATH]
    #[arg(long, value_name = "PATH")]
    nats_server: Option<PathBuf>,
}

/// The targets, in groups that are measured together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    /// Sequential round trip p50 and p99 against the relay
    Latency,
    /// Throughput at 64 in flight against the relay
    Throughput,
    /// Throughput with telemetry on against off
    Telemetry,
    /// Daemon RSS per idle connected producer
    Idle,
    /// RSS per pending question, the CPU to expire them, and idle CPU ticks
    Pending,
    /// The last of 64 UIs against one UI
    Fanout,
    /// Start to ready
    Start,
    /// An approval's sequential round trip against a question's
    Approval,
    /// An approval a rule decides against a question a person answers, and questions with
    /// 1,000 rules loaded against policies off
    Policy,
    /// The store: on vs --no-store, a restart with many pending, history over a million
    /// records, the durable round trip against JetStream's
    Store,
}

/// How much of everything to do.
struct Counts {
    seq_requests: u64,
    seq_warmup: u64,
    conc_requests: u64,
    conc_warmup: u64,
    idle_connections: usize,
    pending: usize,
    /// How long the idle daemon with its pending questions is watched.
    idle_window: Duration,
    /// How long sending the pending questions may take before they start expiring.
    send_budget: Duration,
    fanout_uis: usize,
    fanout_reps: usize,
    fanout_warmup: usize,
    starts: usize,
    /// Records in the store the history query reads.
    history: usize,
}

const FULL: Counts = Counts {
    seq_requests: 20_000,
    seq_warmup: 1_000,
    conc_requests: 200_000,
    conc_warmup: 5_000,
    idle_connections: 10_000,
    pending: 100_000,
    idle_window: Duration::from_secs(10),
    send_budget: Duration::from_secs(20),
    fanout_uis: 64,
    fanout_reps: 200,
    fanout_warmup: 20,
    starts: 20,
    history: 1_000_000,
};

const QUICK: Counts = Counts {
    seq_requests: 1_000,
    seq_warmup: 100,
    conc_requests: 5_000,
    conc_warmup: 500,
    idle_connections: 200,
    pending: 2_000,
    idle_window: Duration::from_secs(1),
    send_budget: Duration::from_secs(5),
    fanout_uis: 64,
    fanout_reps: 20,
    fanout_warmup: 3,
    starts: 3,
    history: 20_000,
};

/// Size of one pending question in rows 6 and 7.
const PENDING_FRAME: usize = 1024;

/// Settling time before memory is read: askbusd hands freed heap back to the OS once it has
/// been quiet for 1 s, and the figure wanted is the steady state, not the burst.
const SETTLE: Duration = Duration::from_millis(2_000);

#[derive(Debug, Serialize)]
struct Row {
    what: String,
    target: String,
    measured: f64,
    unit: &'static str,
    met: bool,
    /// The figures the ratio or the quotient was made of.
    detail: Value,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    rounds: u64,
    rows: Vec<Row>,
    met: usize,
    missed: usize,
}

/// At most (`Le`), less than (`Lt`), at least (`Ge`) or exactly (`Eq`) a bound, or no bound
/// (`Report`: a figure to give, met when it is one).
#[derive(Clone, Copy)]
enum Bound {
    Le(f64),
    Lt(f64),
    Ge(f64),
    Eq(f64),
    Report,
}

impl Bound {
    fn met(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Bound::Le(b) => v <= b,
                Bound::Lt(b) => v < b,
                Bound::Ge(b) => v >= b,
                Bound::Eq(b) => v == b,
                Bound::Report => true,
            }
    }

    fn text(self, unit: &str) -> String {
        let (op, b) = match self {
            Bound::Le(b) => ("≤", b),
            Bound::Lt(b) => ("<", b),
            Bound::Ge(b) => ("≥", b),
            Bound::Eq(b) => ("=", b),
            Bound::Report => return "(reported)".into(),
        };
        format!("{op} {b} {unit}")
    }
}

fn row(
    what: impl Into<String>,
    bound: Bound,
    measured: f64,
    unit: &'static str,
    detail: Value,
) -> Row {
    Row {
        what: what.into(),
        target: bound.text(unit),
        measured,
        unit,
        met: bound.met(measured),
        detail,
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let nofile = proc::raise_nofile()?;
    let c = if a.common.quick { &QUICK } else { &FULL };
    let bin = a.common.daemon()?;
    let threads = a.client_threads as usize;
    let wanted = |g: Group| a.only.is_empty() || a.only.contains(&g);
    let mut rows = Vec::new();

    // 1, 2: sequential round trip, askbusd vs relay.
    let seq = Spec {
        mode: "sequential",
        workload: workload(
            RequestKind::Question,
            1,
            1,
            1,
            300,
            c.seq_warmup,
            Stop::Requests(c.seq_requests),
        )?,
        client_threads: threads,
    };
    if wanted(Group::Latency) {
        let b = baseline(&seq, &bin, a.rounds)?;
        rows.push(row(
            "sequential round trip p50 vs the relay",
            Bound::Le(1.3),
            b.ratios.p50,
            "×",
            json!({"askbusd_us": b.askbusd.latency_us.p50, "relay_us": b.relay.latency_us.p50}),
        ));
        rows.push(row(
            "sequential round trip p99 vs the relay",
            Bound::Le(1.5),
            b.ratios.p99,
            "×",
            json!({"askbusd_us": b.askbusd.latency_us.p99, "relay_us": b.relay.latency_us.p99}),
        ));
    }

    // 3: throughput with 64 in flight over 8 producers and 2 UIs.
    let conc = Spec {
        mode: "concurrent",
        workload: workload(
            RequestKind::Question,
            8,
            2,
            64,
            300,
            c.conc_warmup,
            Stop::Requests(c.conc_requests),
        )?,
        client_threads: threads,
    };
    if wanted(Group::Throughput) {
        let b = baseline(&conc, &bin, a.rounds)?;
        rows.push(row(
            "throughput, 64 in flight over 8 producers, 2 UIs, vs the relay",
            Bound::Ge(0.8),
            b.ratios.throughput,
            "×",
            json!({
                "askbusd_per_s": b.askbusd.requests_per_s,
                "relay_per_s": b.relay.requests_per_s,
                "askbusd_cpu_us_per_request": b.askbusd.cpu_us_per_request,
                "relay_cpu_us_per_request": b.relay.cpu_us_per_request,
            }),
        ));
    }

    // 4: telemetry on vs off, alternated.
    if wanted(Group::Telemetry) {
        let (on, off) = telemetry_ratio(&conc, &bin, a.rounds)?;
        rows.push(row(
            "throughput with telemetry on vs off",
            Bound::Ge(0.9),
            on / off,
            "×",
            json!({"on_per_s": on, "off_per_s": off}),
        ));
    }

    // 5: idle connected producers.
    if wanted(Group::Idle) {
        let n = c.idle_connections;
        if (nofile as usize) < n + 256 {
            bail!(
                "{n} connections need an open-file limit above {}; the hard limit is {nofile}",
                n + 256
            );
        }
        let (per, detail) = idle_connections(&bin, n, threads)?;
        rows.push(row(
            format!("{n} idle connected producers: daemon RSS each"),
            Bound::Le(8.0),
            per,
            "KiB",
            detail,
        ));
    }

    // 6, 7: pending questions, their expiry, and an idle daemon holding them.
    if wanted(Group::Pending) {
        let p = pending(&bin, c, threads)?;
        let n = c.pending;
        rows.push(row(
        format!("{n} pending questions of {PENDING_FRAME} B: daemon RSS each beyond the frame"),
        Bound::Le(2.5),
        p.beyond_kib,
        "KiB",
        json!({"rss_each_kib": p.each_kib, "rss_before_kib": p.before_kib, "rss_after_kib": p.after_kib}),
    ));
        rows.push(row(
            format!("expiring {n} pending questions: daemon CPU"),
            Bound::Lt(1000.0),
            p.expiry_cpu_ms,
            "ms",
            json!({"expiry_wall_ms": p.expiry_wall_ms, "send_s": p.send_s}),
        ));
        rows.push(row(
            format!(
                "idle daemon with {n} pending: CPU ticks over {} s",
                c.idle_window.as_secs()
            ),
            Bound::Eq(0.0),
            p.idle_ticks as f64,
            "ticks",
            json!({"ticks_per_s": proc::ticks_per_second()}),
        ));
    }

    // 8: fan-out to 64 UIs vs one.
    let daemon = daemon_kind(Some(&bin), true, &conc.workload)?;
    if wanted(Group::Fanout) {
        let (one, all) = fanout(&daemon, c, threads)?;
        let (relay_one, relay_all) = fanout(&relay_kind()?, c, threads)?;
        rows.push(row(
            format!("fan-out: last of {} UIs vs one UI", c.fanout_uis),
            Bound::Le(3.0),
            all / one,
            "×",
            json!({
                "one_ui_us": one, "all_uis_us": all,
                "relay_one_ui_us": relay_one, "relay_all_uis_us": relay_all,
                "relay_ratio": relay_all / relay_one,
            }),
        ));
    }

    // 9: start to ready.
    if wanted(Group::Start) {
        let (ms, samples) = start_to_ready(&daemon, c.starts)?;
        rows.push(row(
            format!("start to ready (socket accepting), median of {}", c.starts),
            Bound::Le(20.0),
            ms,
            "ms",
            json!({"samples_ms": samples}),
        ));
    }

    // 11: an approval's round trip against a question's, both of the approval's default size
    // so the bytes on the wire are the same and only the kind differs.
    if wanted(Group::Approval) {
        let (approval_us, question_us) = approval_ratio(c, &bin, threads, a.rounds)?;
        rows.push(row(
            "approval sequential round trip p50 vs a question's",
            Bound::Le(1.1),
            approval_us / question_us,
            "×",
            json!({"approval_us": approval_us, "question_us": question_us}),
        ));
    }

    // 11b: the policy rules: an approval they decide, and questions beside them.
    if wanted(Group::Policy) {
        policy::rows(c, &bin, threads, a.rounds, &mut rows)?;
    }

    // 12–17: the store.
    if wanted(Group::Store) {
        store::rows(&a, c, &bin, &seq, &conc, &mut rows)?;
    }

    a.common.finish(a.rounds, rows)
}

fn print_table(r: &Report) {
    let w = r
        .rows
        .iter()
        .map(|x| x.what.chars().count())
        .max()
        .unwrap_or(0);
    println!("{:w$}  {:>12}  {:>12}  ", "what", "target", "measured");
    for x in &r.rows {
        let measured = if x.measured.abs() >= 100.0 || x.measured == 0.0 {
            format!("{:.0} {}", x.measured, x.unit)
        } else {
            format!("{:.3} {}", x.measured, x.unit)
        };
        println!(
            "{:w$}  {:>12}  {:>12}  {}",
            x.what,
            x.target,
            measured,
            if x.met { "met" } else { "MISSED" }
        );
    }
    println!("{} met, {} missed", r.met, r.missed);
}

/// askbusd and the relay, A B A B.
fn baseline(spec: &Spec, bin: &std::path::Path, rounds: u64) -> Result<Baseline> {
    let daemon = daemon_kind(Some(bin), true, &spec.workload)?;
    let relay = relay_kind()?;
    let mut runs = Vec::new();
    for _ in 0..rounds {
        runs.push(measure(&On::Start(daemon.clone()), spec)?);
        runs.push(measure(&On::Start(relay.clone()), spec)?);
    }
    Ok(Baseline::of(runs))
}

/// Sequential workloads (one producer, one request in flight) of approvals and of questions
/// of the approval's frame size: the two sides of the approval and policy rows.
fn sequential_approvals_and_questions(c: &Counts, threads: usize) -> Result<(Spec, Spec)> {
    let size = default_size(RequestKind::Approval);
    let spec = |kind| -> Result<Spec> {
        Ok(Spec {
            mode: "sequential",
            workload: workload(
                kind,
                1,
                1,
                1,
                size,
                c.seq_warmup,
                Stop::Requests(c.seq_requests),
            )?,
            client_threads: threads,
        })
    };
    Ok((spec(RequestKind::Approval)?, spec(RequestKind::Question)?))
}

/// Median sequential p50 (µs) of approvals and of questions of the same size, alternated
/// on fresh daemons.
fn approval_ratio(
    c: &Counts,
    bin: &std::path::Path,
    threads: usize,
    rounds: u64,
) -> Result<(f64, f64)> {
    let (approvals, questions) = sequential_approvals_and_questions(c, threads)?;
    let daemon = daemon_kind(Some(bin), true, &approvals.workload)?;
    let (mut a, mut q) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(
            measure(&On::Start(daemon.clone()), &approvals)?
                .latency_us
                .p50,
        );
        q.push(
            measure(&On::Start(daemon.clone()), &questions)?
                .latency_us
                .p50,
        );
    }
    Ok((median(a), median(q)))
}

/// Median requests/s of askbusd with telemetry on and off, alternated.
fn telemetry_ratio(spec: &Spec, bin: &std::path::Path, rounds: u64) -> Result<(f64, f64)> {
    let on = daemon_kind(Some(bin), true, &spec.workload)?;
    let off = daemon_kind(Some(bin), false, &spec.workload)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(measure(&On::Start(on.clone()), spec)?.requests_per_s);
        b.push(measure(&On::Start(off.clone()), spec)?.requests_per_s);
    }
    Ok((median(a), median(b)))
}

/// The `stats` frame of the daemon on `socket`, over a new connection.
async fn stats(socket: &std::path::Path) -> Result<Value> {
    let (rd, mut wr) = load::connect(socket).await?.into_split();
    let mut rd = Reader::new(rd);
    let mut out = Vec::new();
    write_frame(br#"{"type":"stats"}"#, &mut out);
    wr.write_all(&out).await?;
    loop {
        let f = rd.frame().await?;
        let v: Value = serde_json::from_slice(&f)?;
        if v["type"] == "stats" {
            return Ok(v);
        }
    }
}

fn count(stats: &Value, key: &str) -> u64 {
    stats[key].as_u64().unwrap_or(0)
}
