//! `askbus bench targets`: measures every performance target of issue 7 and prints the table
//! (what, target, measured, met or missed). Timings are ratios against the baseline relay (or
//! askbusd against itself) measured in the same run, alternating A B A B, since these
//! machines are too noisy for absolute times; the memory and CPU figures come from /proc.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;

use super::load::{self, Reader, Stop};
use super::report::{median, Baseline};
use super::spawn::{Kind, Target};
use super::wire::{cid_seq, write_cid, write_frame, Extra, Peek, Request, Response};
use super::{
    client_runtime, daemon_kind, measure, next_to_me, proc, relay_kind, workload, On, Spec,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Small counts everywhere (seconds instead of a minute or two; for CI)
    #[arg(long)]
    quick: bool,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
    /// The askbusd binary to start [default: askbusd next to this executable]
    #[arg(long, value_name = "PATH")]
    daemon: Option<PathBuf>,
    /// Rounds of each side of every ratio
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Threads of the bench's own runtime
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    client_threads: u64,
    /// Measure only these groups of targets (comma-separated) [default: all]
    #[arg(long, value_name = "GROUP", value_delimiter = ',')]
    only: Vec<Group>,
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

/// At most (`Le`), less than (`Lt`), at least (`Ge`) or exactly (`Eq`) a bound.
#[derive(Clone, Copy)]
enum Bound {
    Le(f64),
    Lt(f64),
    Ge(f64),
    Eq(f64),
}

impl Bound {
    fn met(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Bound::Le(b) => v <= b,
                Bound::Lt(b) => v < b,
                Bound::Ge(b) => v >= b,
                Bound::Eq(b) => v == b,
            }
    }

    fn text(self, unit: &str) -> String {
        let (op, b) = match self {
            Bound::Le(b) => ("≤", b),
            Bound::Lt(b) => ("<", b),
            Bound::Ge(b) => ("≥", b),
            Bound::Eq(b) => ("=", b),
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
    let c = if a.quick { &QUICK } else { &FULL };
    let bin = match &a.daemon {
        Some(b) => b.clone(),
        None => next_to_me("askbusd")?,
    };
    let threads = a.client_threads as usize;
    let wanted = |g: Group| a.only.is_empty() || a.only.contains(&g);
    let mut rows = Vec::new();

    // 1, 2: sequential round trip, askbusd vs relay.
    let seq = Spec {
        mode: "sequential",
        workload: workload(1, 1, 1, 300, c.seq_warmup, Stop::Requests(c.seq_requests))?,
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

    let met = rows.iter().filter(|r| r.met).count();
    let report = Report {
        quick: a.quick,
        rounds: a.rounds,
        missed: rows.len() - met,
        met,
        rows,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
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

/// Row 5: RSS per connected, idle producer (each has had a ping answered, so the daemon has
/// really set it up).
fn idle_connections(bin: &std::path::Path, n: usize, threads: usize) -> Result<(f64, Value)> {
    let limit = (n + 64).to_string();
    let kind = Kind::Askbusd {
        bin: bin.to_owned(),
        telemetry: true,
        args: vec![
            "--max-connections".into(),
            limit.clone(),
            "--max-connections-per-uid".into(),
            limit,
        ],
    };
    let target = Target::start(&kind)?;
    let pid = target.pid();
    let rt = client_runtime(threads)?;
    std::thread::sleep(SETTLE);
    let before = proc::memory(pid)?.rss_kib;
    let socket = target.socket().to_owned();
    let (conns, right_after, served) = rt.block_on(async {
        let mut conns = Vec::with_capacity(n);
        let mut ping = Vec::new();
        write_frame(br#"{"type":"ping","id":1}"#, &mut ping);
        // A batch connects and pings at once; batches keep the accept backlog small.
        for start in (0..n).step_by(256) {
            let mut batch = Vec::new();
            for _ in start..(start + 256).min(n) {
                let socket = socket.clone();
                let ping = ping.clone();
                batch.push(tokio::spawn(async move {
                    let (rd, mut wr) = load::connect(&socket).await?.into_split();
                    wr.write_all(&ping).await?;
                    let mut rd = Reader::new(rd);
                    let f = rd.frame().await?;
                    if Peek::of(&f).is_none_or(|p| p.ty != "pong") {
                        bail!("no pong: {:?}", String::from_utf8_lossy(&f));
                    }
                    Ok::<_, anyhow::Error>((rd, wr))
                }));
            }
            for b in batch {
                conns.push(b.await??);
            }
        }
        let right_after = proc::memory(pid)?.rss_kib;
        let served = count(&stats(&socket).await?, "connections");
        tokio::time::sleep(SETTLE).await;
        Ok::<_, anyhow::Error>((conns, right_after, served))
    })?;
    let after = proc::memory(pid)?.rss_kib;
    if (served as usize) < n {
        bail!("the daemon serves {served} connections, not {n}");
    }
    drop(conns);
    drop(rt);
    target.stop()?;
    let per = after.saturating_sub(before) as f64 / n as f64;
    Ok((
        per,
        json!({
            "rss_before_kib": before, "rss_after_kib": after,
            "rss_right_after_connecting_kib": right_after,
            "each_right_after_connecting_kib": right_after.saturating_sub(before) as f64 / n as f64,
        }),
    ))
}

struct Pending {
    before_kib: u64,
    after_kib: u64,
    each_kib: f64,
    beyond_kib: f64,
    send_s: f64,
    idle_ticks: u64,
    expiry_cpu_ms: f64,
    expiry_wall_ms: f64,
}

/// Rows 6 and 7: `c.pending` questions of 1 KB with no UI (noUi wait) and a shared deadline
/// far enough out to send them all, let the daemon settle and watch it idle; then the CPU it
/// spends expiring them all (responses written and telemetry recorded).
fn pending(bin: &std::path::Path, c: &Counts, threads: usize) -> Result<Pending> {
    const PRODUCERS: usize = 8;
    let n = c.pending;
    let kind = Kind::Askbusd {
        bin: bin.to_owned(),
        telemetry: true,
        args: vec![
            "--max-pending-per-connection".into(),
            n.to_string(),
            "--max-pending".into(),
            n.max(262_144).to_string(),
            "--no-ui".into(),
            "wait".into(),
        ],
    };
    let target = Target::start(&kind)?;
    let pid = target.pid();
    let socket = target.socket().to_owned();
    let cid_len = format!("b-0-{}", n / PRODUCERS / 2).len();
    let request = Arc::new(Request::new(
        PENDING_FRAME,
        cid_len,
        Extra {
            timed: true,
            no_ui_wait: true,
        },
    )?);
    let rt = client_runtime(threads)?;
    std::thread::sleep(SETTLE);
    let before_kib = proc::memory(pid)?.rss_kib;
    let started = Instant::now();
    let deadline = started + c.send_budget + SETTLE + c.idle_window + Duration::from_secs(1);
    let result = rt.block_on(async {
        let mut readers = Vec::new();
        let mut writers = Vec::new();
        for p in 0..PRODUCERS {
            let quota = n / PRODUCERS + usize::from(p < n % PRODUCERS);
            let (rd, wr) = load::connect(&socket).await?.into_split();
            readers.push(tokio::spawn(read_responses(Reader::new(rd), quota)));
            writers.push(tokio::spawn(send_timed(
                wr,
                p,
                quota,
                request.clone(),
                deadline,
            )));
        }
        // Held to the end: dropping a write half shuts it down, and the daemon withdraws
        // the questions of a producer that has gone.
        let mut open = Vec::with_capacity(PRODUCERS);
        for w in writers {
            open.push(w.await??);
        }
        let sent = started.elapsed();
        // Every request read and accepted: the daemon holds them all.
        let wait_until = Instant::now() + Duration::from_secs(30);
        loop {
            let s = stats(&socket).await?;
            if count(&s, "pending") as usize >= n {
                break;
            }
            if count(&s["requests"], "rejected") > 0 {
                bail!("the daemon rejected pending questions: {s}");
            }
            if Instant::now() > wait_until {
                bail!("the daemon holds {} pending, not {n}", count(&s, "pending"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let after_kib = proc::memory(pid)?.rss_kib;
        let t0 = proc::cpu_ticks(pid)?;
        tokio::time::sleep(c.idle_window).await;
        let idle_ticks = proc::cpu_ticks(pid)?.saturating_sub(t0);
        let margin = Duration::from_millis(300);
        if Instant::now() + margin > deadline {
            bail!(
                "sending {n} questions took {:.1} s, past the budget of {:?}; the idle window \
                 ran into their expiry",
                sent.as_secs_f64(),
                c.send_budget
            );
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline - margin)).await;
        let e0 = proc::cpu_ticks(pid)?;
        let expiry_started = Instant::now();
        for r in readers {
            r.await??;
        }
        let expiry_wall = expiry_started.elapsed().saturating_sub(margin);
        // The telemetry thread records each expiry too; its CPU counts.
        let wait_until = Instant::now() + Duration::from_secs(30);
        while count(&stats(&socket).await?, "telemetryLines") < n as u64 {
            if Instant::now() > wait_until {
                bail!("telemetry never recorded the {n} expiries");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let expiry_ticks = proc::cpu_ticks(pid)?.saturating_sub(e0);
        drop(open);
        Ok::<_, anyhow::Error>((sent, after_kib, idle_ticks, expiry_ticks, expiry_wall))
    });
    drop(rt);
    let (sent, after_kib, idle_ticks, expiry_ticks, expiry_wall) = result?;
    target.stop()?;
    let each_kib = after_kib.saturating_sub(before_kib) as f64 / n as f64;
    Ok(Pending {
        before_kib,
        after_kib,
        each_kib,
        beyond_kib: each_kib - PENDING_FRAME as f64 / 1024.0,
        send_s: sent.as_secs_f64(),
        idle_ticks,
        expiry_cpu_ms: proc::ticks_to_ms(expiry_ticks),
        expiry_wall_ms: expiry_wall.as_secs_f64() * 1000.0,
    })
}

/// Writes `quota` timed requests in batches, each timing out at `deadline`.
async fn send_timed(
    mut wr: OwnedWriteHalf,
    p: usize,
    quota: usize,
    request: Arc<Request>,
    deadline: Instant,
) -> Result<OwnedWriteHalf> {
    let mut out = Vec::with_capacity(64 * PENDING_FRAME);
    let mut cid = Vec::new();
    for start in (0..quota).step_by(64) {
        let left = deadline
            .checked_duration_since(Instant::now())
            .ok_or_else(|| anyhow!("sending took past the questions' deadline"))?;
        for seq in start..(start + 64).min(quota) {
            cid.clear();
            write_cid(p, seq as u64, &mut cid);
            request.write_timed(&cid, left.as_millis().max(1) as u64, &mut out);
        }
        wr.write_all(&out).await?;
        out.clear();
    }
    Ok(wr)
}

/// Reads `quota` responses (the expiries), failing on an error frame.
async fn read_responses(mut rd: Reader, quota: usize) -> Result<()> {
    let mut got = 0;
    while got < quota {
        let f = rd.frame().await?;
        match Peek::of(&f) {
            Some(p) if p.ty == "ask-user-response" => got += 1,
            Some(p) if p.ty == "error" => bail!("refused: {}", String::from_utf8_lossy(&f)),
            _ => {}
        }
    }
    Ok(())
}

/// What a fan-out UI saw.
enum Seen {
    Request(u64, Instant),
    /// An ack or a withdrawal: askbusd is done with the request for this UI.
    End(u64),
}

/// Row 8: median time from writing one question to the last UI reading it, with one UI and
/// with `c.fanout_uis`; µs.
fn fanout(kind: &Kind, c: &Counts, threads: usize) -> Result<(f64, f64)> {
    let target = Target::start(kind)?;
    let socket = target.socket().to_owned();
    let relay = kind.is_relay();
    let rt = client_runtime(threads)?;
    let result = rt.block_on(async {
        let request = Request::new(300, 6, Extra::default())?;
        let response = Arc::new(Response::new(&request.first_label));
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let (rd, mut wr) = load::connect(&socket).await?.into_split();
        let mut producer = Reader::new(rd);
        let mut uis = Vec::new();
        let mut seq = 0u64;
        let mut medians = Vec::new();
        for count in [1, c.fanout_uis] {
            while uis.len() < count {
                let (rd, wr) = load::subscribe(&socket).await?;
                let answers = uis.is_empty().then(|| response.clone());
                uis.push(tokio::spawn(fan_ui(rd, wr, answers, seen_tx.clone())));
            }
            let mut samples = Vec::new();
            let mut out = Vec::new();
            let mut cid = Vec::new();
            for rep in 0..c.fanout_warmup + c.fanout_reps {
                cid.clear();
                write_cid(0, seq, &mut cid);
                request.write(&cid, &mut out);
                let t0 = Instant::now();
                wr.write_all(&out).await?;
                out.clear();
                let (mut reached, mut ended, mut last) = (0, 0, t0);
                // Every UI reads it; askbusd then acks the answering UI and withdraws it
                // from the others, which must be read before the next question.
                let ends = if relay { 0 } else { count };
                while reached < count || ended < ends {
                    match tokio::time::timeout(Duration::from_secs(10), seen.recv()).await {
                        Ok(Some(Seen::Request(s, at))) if s == seq => {
                            reached += 1;
                            last = last.max(at);
                        }
                        Ok(Some(Seen::End(s))) if s == seq => ended += 1,
                        Ok(Some(_)) => bail!("a UI saw a question of an earlier round"),
                        Ok(None) | Err(_) => bail!("the UIs did not all see question {seq}"),
                    }
                }
                let f = producer.frame().await?;
                if Peek::of(&f).is_none_or(|p| p.ty != "ask-user-response") {
                    bail!("the producer got {:?}", String::from_utf8_lossy(&f));
                }
                if rep >= c.fanout_warmup {
                    samples.push(last.duration_since(t0).as_secs_f64() * 1e6);
                }
                seq += 1;
            }
            medians.push(median(samples));
        }
        for u in &uis {
            u.abort();
        }
        Ok::<_, anyhow::Error>((medians[0], medians[1]))
    });
    drop(rt);
    target.stop()?;
    result
}

/// A UI that reports when it read each question; the first one also answers.
async fn fan_ui(
    mut rd: Reader,
    mut wr: OwnedWriteHalf,
    answers: Option<Arc<Response>>,
    seen: mpsc::UnboundedSender<Seen>,
) -> Result<()> {
    let mut out = Vec::new();
    loop {
        rd.fill().await?;
        let at = Instant::now();
        while let Some(f) = rd.next()? {
            let Some(p) = Peek::of(&f) else { continue };
            let Some(seq) = p.cid.as_deref().and_then(cid_seq) else {
                continue;
            };
            match &*p.ty {
                "ask-user-request" => {
                    let _ = seen.send(Seen::Request(seq, at));
                    if let Some(r) = &answers {
                        r.write(p.cid.as_deref().expect("checked").as_bytes(), &mut out);
                    }
                }
                "ask-user-ack" | "ask-user-withdrawn" => {
                    let _ = seen.send(Seen::End(seq));
                }
                _ => {}
            }
        }
        if !out.is_empty() {
            wr.write_all(&out).await?;
            out.clear();
        }
    }
}

/// Row 9: spawn askbusd, poll connect() until its socket accepts; median ms of `starts`.
fn start_to_ready(kind: &Kind, starts: usize) -> Result<(f64, Vec<f64>)> {
    let mut samples = Vec::with_capacity(starts);
    for _ in 0..starts {
        let t0 = Instant::now();
        let mut target = Target::spawn(kind)?;
        let socket = target.socket().to_owned();
        loop {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(15) {
                target.check_alive()?;
                bail!("askbusd did not accept within 15 s");
            }
            // Short enough for a sub-millisecond reading, long enough not to take the
            // daemon's core on a small machine.
            std::thread::sleep(Duration::from_micros(50));
        }
        samples.push(t0.elapsed().as_secs_f64() * 1000.0);
        target
            .wait_ready()
            .context("askbusd accepted but never logged ready")?;
        target.stop()?;
    }
    Ok((median(samples.clone()), samples))
}
