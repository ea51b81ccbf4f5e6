//! `askbus bench chat`: issue 34's targets for `askbus chat telegram`, against askbusd and a
//! loopback stand-in of the Bot API (`crate::telegram`) the bench serves itself.
//!
//! - Latency: one producer asks one question at a time; the time from just before the
//!   producer's write of the request to the instant the stand-in has read the `sendMessage`
//!   that posts it (so askbusd's read and routing are inside the figure: an upper bound on
//!   "after it reaches askbusd"). The producer then withdraws it, and the time to the
//!   `editMessageText` that ends its message is reported too; the next request waits for that
//!   edit, so every request gets a message of its own (none goes to the digest).
//! - Idle: the producer leaves many questions pending (a 2 h timeout, so no countdown changes
//!   in the window); once the chat has posted its own messages and the digest names all the
//!   rest, and a settling pause has passed, the chat process's CPU ticks over a window, the
//!   calls it made to the stand-in in that window, and its resident memory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::UnboundedReceiver;

use super::pending::send_timed;
use super::{count, row, stats, Bound, Common, SETTLE};
use crate::load::{self, histogram, Reader};
use crate::report::Latency;
use crate::spawn::{Kind, Target};
use crate::telegram::{self, Call};
use crate::wire::{write_cid, write_frame, Extra, Peek, Request};
use crate::{client_runtime, next_to_me, proc};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Requests timed one at a time [default: 1000; 100 with --quick]
    #[arg(long, value_name = "N")]
    requests: Option<u64>,
    /// Questions left pending while the chat idles [default: 1000; 200 with --quick]
    #[arg(long, value_name = "N")]
    pending: Option<usize>,
}

/// The timed requests' size on the wire, as the targets' sequential rows.
const FRAME: usize = 300;
/// The pending ones': a timeout of 2 h takes more room than a bare question.
const PENDING_FRAME: usize = 400;
/// Messages of their own the chat keeps (its default `--max-messages`); the rest wait in the
/// digest.
const OWN_MESSAGES: usize = 10;
/// The pending questions' timeout: the countdown's words change 30 min in, far past the window.
const PENDING_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
/// How long one step may take before the run is called stuck.
const STUCK: Duration = Duration::from_secs(30);

pub fn run(a: Args) -> Result<ExitCode> {
    proc::raise_nofile()?;
    let bin = a.common.daemon()?;
    let askbus = next_to_me("askbus")?;
    let (n, warmup, window) = if a.common.quick {
        (a.requests.unwrap_or(100), 10, Duration::from_secs(1))
    } else {
        (a.requests.unwrap_or(1_000), 50, Duration::from_secs(10))
    };
    let pending_n = a
        .pending
        .unwrap_or(if a.common.quick { 200 } else { 1_000 });
    if n == 0 || pending_n <= OWN_MESSAGES {
        bail!("--requests must be at least 1 and --pending above {OWN_MESSAGES}");
    }
    let daemon = Target::start(&Kind::Askbusd {
        bin,
        telemetry: true,
        args: vec![
            "--max-pending-per-connection".into(),
            pending_n.max(128).to_string(),
        ],
        policies: None,
    })?;
    let socket = daemon.socket().to_owned();
    // One thread: the stand-in and the producer share it, as a chat service and an agent
    // would share a small machine; the chat and askbusd have their own processes.
    let rt = client_runtime(1)?;
    let (base, calls) = rt.block_on(telegram::serve())?;
    let chat = Target::start(&Kind::Chat {
        askbus,
        socket: socket.clone(),
        args: vec![
            "telegram".into(),
            "--chat".into(),
            telegram::CHAT.to_string(),
            "--allow-user".into(),
            telegram::CHAT.to_string(),
            "--api-base".into(),
            base,
        ],
        env: vec![("ASKBUS_TELEGRAM_TOKEN".into(), telegram::TOKEN.into())],
    })?;
    let mut on = Chat {
        socket,
        calls,
        pid: chat.pid(),
    };
    let timed = rt.block_on(latency(&mut on, warmup, n))?;
    let idle = rt.block_on(idle(&mut on, pending_n, window))?;
    drop(rt);
    chat.stop()?;
    daemon.stop()?;

    let ms = |ns: f64| ns / 1000.0;
    let posted = Latency::of(&timed.posted);
    let ended = Latency::of(&timed.ended);
    let mut rows = vec![
        row(
            format!(
                "a request to its Telegram message (producer's write to sendMessage), p50 of {n}"
            ),
            Bound::Le(50.0),
            ms(posted.p50),
            "ms",
            json!({"p50_ms": ms(posted.p50), "p95_ms": ms(timed.posted_p95_us), "p99_ms": ms(posted.p99),
                "max_ms": ms(posted.max), "requests": n,
                "chat_cpu_us_per_request": timed.chat_cpu_ms * 1000.0 / n as f64}),
        ),
        row(
            format!("a request to its Telegram message, p95 of {n}"),
            Bound::Report,
            ms(timed.posted_p95_us),
            "ms",
            json!({"p99_ms": ms(posted.p99)}),
        ),
        row(
            format!(
                "a withdrawn request to its message's edit (cancel to editMessageText), p50 of {n}"
            ),
            Bound::Report,
            ms(ended.p50),
            "ms",
            json!({"p95_ms": ms(timed.ended_p95_us), "max_ms": ms(ended.max)}),
        ),
    ];
    rows.push(row(
        format!(
            "askbus chat idle with {pending_n} pending: CPU ticks over {} s",
            window.as_secs()
        ),
        Bound::Eq(0.0),
        idle.ticks as f64,
        "ticks",
        json!({"ticks_per_s": proc::ticks_per_second(), "calls_in_window": idle.calls,
            "posted": idle.posted, "intake_cpu_ms": idle.intake_cpu_ms}),
    ));
    rows.push(row(
        format!("askbus chat RSS with {pending_n} pending"),
        Bound::Le(20.0),
        idle.rss_kib as f64 / 1024.0,
        "MiB",
        json!({"rss_kib": idle.rss_kib, "peak_kib": idle.peak_kib}),
    ));
    a.common.finish(1, rows)
}

/// The chat under measure: the daemon it watches, the calls it makes to the stand-in, its pid.
struct Chat {
    socket: PathBuf,
    calls: UnboundedReceiver<Call>,
    pid: u32,
}

/// The next call the chat makes that `want` accepts (the others are passed over).
async fn next_call(
    calls: &mut UnboundedReceiver<Call>,
    what: &str,
    want: impl Fn(&Call) -> bool,
) -> Result<Call> {
    let deadline = tokio::time::Instant::now() + STUCK;
    loop {
        match tokio::time::timeout_at(deadline, calls.recv()).await {
            Ok(Some(c)) if want(&c) => return Ok(c),
            Ok(Some(_)) => {}
            Ok(None) => bail!("the stand-in stopped"),
            Err(_) => bail!("askbus chat never made {what} within {STUCK:?}"),
        }
    }
}

/// Reads the producer's frames to the terminal response of `cid`.
async fn response(rd: &mut Reader, cid: &[u8]) -> Result<()> {
    loop {
        let f = tokio::time::timeout(STUCK, rd.frame())
            .await
            .context("no response to a withdrawn request")??;
        match Peek::of(&f) {
            Some(p)
                if p.ty == "ask-user-response"
                    && p.cid.as_deref().map(str::as_bytes) == Some(cid) =>
            {
                return Ok(())
            }
            Some(p) if p.ty == "error" => bail!("refused: {}", String::from_utf8_lossy(&f)),
            _ => {}
        }
    }
}

struct Timed {
    /// Producer's write to sendMessage, ns.
    posted: hdrhistogram::Histogram<u64>,
    posted_p95_us: f64,
    /// Cancel to editMessageText, ns.
    ended: hdrhistogram::Histogram<u64>,
    ended_p95_us: f64,
    chat_cpu_ms: f64,
}

/// `warmup` then `n` requests, one at a time, each posted, then withdrawn and edited.
async fn latency(on: &mut Chat, warmup: u64, n: u64) -> Result<Timed> {
    let (socket, calls, pid) = (&on.socket, &mut on.calls, on.pid);
    let cid_len = format!("b-0-{}", (warmup + n) / 2).len();
    let request = Request::new(FRAME, cid_len, Extra::default())?;
    let (rd, mut wr) = load::connect(socket).await?.into_split();
    let mut rd = Reader::new(rd);
    let (mut posted, mut ended) = (histogram(), histogram());
    let (mut out, mut cid) = (Vec::new(), Vec::new());
    let mut cpu0 = 0;
    for seq in 0..warmup + n {
        if seq == warmup {
            cpu0 = proc::cpu_ticks(pid)?;
        }
        cid.clear();
        write_cid(0, seq, &mut cid);
        out.clear();
        request.write(&cid, &mut out);
        let asked = Instant::now();
        wr.write_all(&out).await?;
        let post = next_call(calls, "the request's sendMessage", |c| {
            c.method == "sendMessage"
        })
        .await?;
        if !post.text.contains("Which database?") || post.buttons < 3 {
            bail!("the chat posted something else: {:?}", post.text);
        }
        out.clear();
        let cancel = json!({"type": "ask-user-cancel",
            "correlationId": std::str::from_utf8(&cid)?});
        write_frame(cancel.to_string().as_bytes(), &mut out);
        let withdrawn = Instant::now();
        wr.write_all(&out).await?;
        let edit = next_call(calls, "the withdrawn request's edit", |c| {
            c.method == "editMessageText" && c.message_id == post.message_id
        })
        .await?;
        if edit.buttons != 0 {
            bail!("the ended request's message kept its buttons");
        }
        response(&mut rd, &cid).await?;
        if seq >= warmup {
            let ns = |d: Duration| d.as_nanos().max(1) as u64;
            posted.record(ns(post.at.saturating_duration_since(asked)))?;
            ended.record(ns(edit.at.saturating_duration_since(withdrawn)))?;
        }
    }
    let chat_cpu_ms = proc::ticks_to_ms(proc::cpu_ticks(pid)?.saturating_sub(cpu0));
    let p95 = |h: &hdrhistogram::Histogram<u64>| h.value_at_quantile(0.95) as f64 / 1000.0;
    Ok(Timed {
        posted_p95_us: p95(&posted),
        ended_p95_us: p95(&ended),
        posted,
        ended,
        chat_cpu_ms,
    })
}

struct Idle {
    ticks: u64,
    /// Calls other than the long poll the chat made in the window.
    calls: usize,
    /// Messages posted for the pending requests (their own and the digest).
    posted: usize,
    intake_cpu_ms: f64,
    rss_kib: u64,
    peak_kib: u64,
}

/// `pending_n` questions left pending; the chat watched once it has settled.
async fn idle(on: &mut Chat, pending_n: usize, window: Duration) -> Result<Idle> {
    let (socket, calls, pid) = (&on.socket, &mut on.calls, on.pid);
    let cid_len = format!("b-1-{}", pending_n / 2).len();
    let request = Arc::new(Request::new(
        PENDING_FRAME,
        cid_len,
        Extra {
            timed: true,
            no_ui_wait: false,
        },
    )?);
    let cpu0 = proc::cpu_ticks(pid)?;
    let (rd, wr) = load::connect(socket).await?.into_split();
    // Held to the end: a producer that leaves withdraws its requests.
    let _held = (
        rd,
        send_timed(wr, 1, pending_n, request, Instant::now() + PENDING_TIMEOUT).await?,
    );
    let wait_until = Instant::now() + STUCK;
    while (count(&stats(socket).await?, "pending") as usize) < pending_n {
        if Instant::now() > wait_until {
            bail!("the daemon never held the {pending_n} pending");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Settled: a message of its own for the first ones, and the digest naming all the rest.
    let digest = format!(
        "<b>{} more requests are waiting</b>",
        pending_n - OWN_MESSAGES
    );
    let (mut own, mut posted, mut digested) = (0, 0, false);
    while own < OWN_MESSAGES || !digested {
        let c = next_call(calls, "the pending requests' messages", |_| true).await?;
        posted += usize::from(c.method == "sendMessage");
        own += usize::from(c.method == "sendMessage" && c.buttons > 0);
        digested |= c.text.contains(&digest);
    }
    tokio::time::sleep(SETTLE).await;
    let intake_cpu_ms = proc::ticks_to_ms(proc::cpu_ticks(pid)?.saturating_sub(cpu0));
    while let Ok(c) = calls.try_recv() {
        posted += usize::from(c.method == "sendMessage");
    }
    let t0 = proc::cpu_ticks(pid)?;
    tokio::time::sleep(window).await;
    let ticks = proc::cpu_ticks(pid)?.saturating_sub(t0);
    let mut in_window = 0;
    while calls.try_recv().is_ok() {
        in_window += 1;
    }
    let mem = proc::memory(pid)?;
    Ok(Idle {
        ticks,
        calls: in_window,
        posted,
        intake_cpu_ms,
        rss_kib: mem.rss_kib,
        peak_kib: mem.peak_kib,
    })
}
