//! The store's targets (issue 28): askbusd with its store against itself with `--no-store`
//! (throughput at 64 in flight, sequential p50), side by side, alternated; a restart with many
//! questions pending (start to ready to answer); and the durable round trip against NATS
//! JetStream's (a persisted publish with its ack, then a consumer's ack, file storage, the same
//! payload). The history rows (a query over a million records, RSS against history) are in
//! `history.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use serde_json::json;

use super::federation::NatsServer;
use super::pending::{read_responses, send_timed};
use super::{count, row, stats, Args, Bound, Counts, Row, PENDING_FRAME, SETTLE};
use crate::load::{self, histogram};
use crate::report::{median, Latency};
use crate::spawn::{Kind, Target, TempDir};
use crate::wire::{Extra, Request};
use crate::{client_runtime, daemon_kind, measure, proc, On, Spec};

/// The store's rows: on vs `--no-store` (throughput, sequential p50), a restart with
/// `c.pending` pending, a history query over `c.history` records and the RSS beside it, the
/// durable round trip against JetStream's.
pub(super) fn rows(
    a: &Args,
    c: &Counts,
    bin: &std::path::Path,
    seq: &Spec,
    conc: &Spec,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let t = on_off(conc, bin, a.rounds, |r| r.requests_per_s)?;
    rows.push(row(
        "throughput, 64 in flight, store on vs --no-store",
        Bound::Ge(0.8),
        t.on / t.off,
        "×",
        json!({"store_per_s": t.on, "no_store_per_s": t.off}),
    ));
    rows.push(row(
        "the same with --store-sync normal (no fsync per commit)",
        Bound::Ge(0.8),
        t.normal / t.off,
        "×",
        json!({"store_per_s": t.normal, "no_store_per_s": t.off}),
    ));
    let l = on_off(seq, bin, a.rounds, |r| r.latency_us.p50)?;
    rows.push(row(
        "sequential round trip p50, store on vs --no-store",
        Bound::Le(1.25),
        l.on / l.off,
        "×",
        json!({"store_us": l.on, "no_store_us": l.off}),
    ));
    rows.push(row(
        "the same with --store-sync normal (no fsync per commit)",
        Bound::Le(1.25),
        l.normal / l.off,
        "×",
        json!({"store_us": l.normal, "no_store_us": l.off}),
    ));
    let r = restart(bin, c, a.client_threads as usize)?;
    rows.push(row(
        format!(
            "restart with {} pending: start to ready to answer",
            c.pending
        ),
        Bound::Le(2000.0),
        r.ready_ms,
        "ms",
        json!({
            "accepting_ms": r.accepting_ms,
            "rss_before_kib": r.rss_before_kib,
            "rss_after_kib": r.rss_after_kib,
            "store_bytes": r.store_bytes,
        }),
    ));
    let h = super::history::history(bin, c.history)?;
    rows.push(row(
        format!(
            "history query over {} records, one project and one day (the socket's frame)",
            h.records
        ),
        Bound::Le(50.0),
        h.socket_ms,
        "ms",
        json!({
            "direct_ms": h.direct_ms,
            "records_answered": h.answered,
            "fill_s": h.fill_s,
            "store_mib": h.store_mib,
        }),
    ));
    // SQLite's page caches are bounded (2 MiB for each of the daemon's two connections);
    // history kept in memory would cost about a KiB a record.
    rows.push(row(
        format!(
            "daemon RSS with {} records of history beyond an empty store's",
            h.records
        ),
        Bound::Le(8.0),
        (h.rss_kib as f64 - h.rss_empty_kib as f64) / 1024.0,
        "MiB",
        json!({
            "rss_kib": h.rss_kib,
            "rss_empty_store_kib": h.rss_empty_kib,
            "start_to_ready_ms": h.ready_ms,
        }),
    ));
    let nats = nats_server(a.nats_server.as_deref());
    let (askbus_us, js_us) = against_jetstream(seq, bin, &nats, a.rounds)?;
    rows.push(row(
        "durable round trip p50 vs JetStream's (persisted publish + ack, consumer ack)",
        Bound::Report,
        askbus_us / js_us,
        "×",
        json!({"askbus_us": askbus_us, "jetstream_us": js_us}),
    ));
    Ok(())
}

/// How long a restart may take before the bench gives up on it.
const READY_LIMIT: Duration = Duration::from_secs(120);

/// Medians of askbusd with its store (a fresh file each run; `--store-sync full`, the
/// default, and `normal`) and with `--no-store`, alternated.
pub(super) struct OnOff {
    pub(super) on: f64,
    pub(super) normal: f64,
    pub(super) off: f64,
}

/// askbusd as `daemon_kind` makes it for `spec`, with a store at `path` when given, synced
/// as `sync` says (`full` or `normal`).
fn kind(bin: &Path, spec: &Spec, path: Option<&Path>, sync: &str) -> Result<Kind> {
    let mut k = daemon_kind(Some(bin), true, &spec.workload)?;
    if let (Some(path), Kind::Askbusd { args, .. }) = (path, &mut k) {
        args.extend(["--store".into(), path.display().to_string()]);
        args.extend(["--store-sync".into(), sync.into()]);
    }
    Ok(k)
}

/// `f` of a run of `spec` against askbusd with a new store (each sync mode) and against
/// `--no-store`, `rounds` times each, alternated: the medians.
pub(super) fn on_off(
    spec: &Spec,
    bin: &Path,
    rounds: u64,
    f: impl Fn(&crate::report::Run) -> f64,
) -> Result<OnOff> {
    let (mut on, mut normal, mut off) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (sync, into) in [("full", &mut on), ("normal", &mut normal)] {
            let dir = TempDir::new()?;
            let with = kind(bin, spec, Some(&dir.0.join("store.db")), sync)?;
            into.push(f(&measure(&On::Start(with), spec)?));
        }
        off.push(f(&measure(
            &On::Start(kind(bin, spec, None, "full")?),
            spec,
        )?));
    }
    Ok(OnOff {
        on: median(on),
        normal: median(normal),
        off: median(off),
    })
}

/// A restart with `n` pending, as measured.
pub(super) struct Restart {
    pub(super) ready_ms: f64,
    pub(super) accepting_ms: f64,
    pub(super) rss_before_kib: u64,
    pub(super) rss_after_kib: u64,
    pub(super) store_bytes: u64,
}

/// Asks `c.pending` questions of 1 KB with no UI and a deadline far off, of askbusd with a
/// store; stops it (SIGTERM, the producers still connected) and starts it again on the same
/// file: the time from spawn to its socket accepting, and to its `stats` counting every
/// question pending again (restored, ready to be shown and answered).
pub(super) fn restart(bin: &Path, c: &Counts, threads: usize) -> Result<Restart> {
    const PRODUCERS: usize = 8;
    let n = c.pending;
    let dir = TempDir::new()?;
    let store = dir.0.join("store.db");
    let kind = Kind::Askbusd {
        bin: bin.to_owned(),
        telemetry: false,
        args: vec![
            "--store".into(),
            store.display().to_string(),
            "--max-pending-per-connection".into(),
            n.to_string(),
            "--max-pending".into(),
            n.max(262_144).to_string(),
            "--max-pending-bytes-per-uid".into(),
            (n * PENDING_FRAME * 4).max(64 << 20).to_string(),
            "--no-ui".into(),
            "wait".into(),
        ],
        policies: None,
    };
    let first = Target::start(&kind)?;
    let socket = first.socket().to_owned();
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
    // Far enough out that none expires while the bench runs.
    let deadline = Instant::now() + Duration::from_secs(3600);
    let (open, readers) = rt.block_on(async {
        let mut readers = Vec::new();
        let mut writers = Vec::new();
        for p in 0..PRODUCERS {
            let quota = n / PRODUCERS + usize::from(p < n % PRODUCERS);
            let (rd, wr) = load::connect(&socket).await?.into_split();
            readers.push(tokio::spawn(read_responses(load::Reader::new(rd), quota)));
            writers.push(tokio::spawn(send_timed(
                wr,
                p,
                quota,
                request.clone(),
                deadline,
            )));
        }
        let mut open = Vec::with_capacity(PRODUCERS);
        for w in writers {
            open.push(w.await??);
        }
        wait_pending(&socket, n).await?;
        Ok::<_, anyhow::Error>((open, readers))
    })?;
    std::thread::sleep(SETTLE);
    let rss_before_kib = proc::memory(first.pid())?.rss_kib;
    // Stopped with its producers still connected: what is pending stays pending.
    first.stop_within(READY_LIMIT)?;
    drop(open);
    for r in readers {
        r.abort();
    }
    let store_bytes = std::fs::metadata(&store).map_or(0, |m| m.len())
        + std::fs::metadata(format!("{}-wal", store.display())).map_or(0, |m| m.len());

    let t0 = Instant::now();
    let mut second = Target::spawn(&kind)?;
    let socket = second.socket().to_owned();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if t0.elapsed() > READY_LIMIT {
            second.check_alive()?;
            bail!("askbusd did not accept within {READY_LIMIT:?} of a restart");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let accepting_ms = t0.elapsed().as_secs_f64() * 1000.0;
    rt.block_on(wait_pending(&socket, n))?;
    let ready_ms = t0.elapsed().as_secs_f64() * 1000.0;
    second.wait_ready()?;
    std::thread::sleep(SETTLE);
    let rss_after_kib = proc::memory(second.pid())?.rss_kib;
    second.stop_within(READY_LIMIT)?;
    Ok(Restart {
        ready_ms,
        accepting_ms,
        rss_before_kib,
        rss_after_kib,
        store_bytes,
    })
}

/// Until the daemon on `socket` holds `n` pending (polled over `stats`, 5 ms apart).
async fn wait_pending(socket: &Path, n: usize) -> Result<()> {
    let until = Instant::now() + READY_LIMIT;
    loop {
        let s = stats(socket).await?;
        if count(&s, "pending") as usize >= n {
            return Ok(());
        }
        if count(&s["requests"], "rejected") > 0 {
            bail!("the daemon rejected pending questions: {s}");
        }
        if Instant::now() > until {
            bail!("the daemon holds {} pending, not {n}", count(&s, "pending"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The durable round trip's sequential p50 (µs): askbusd with a store (`spec`, one producer,
/// one UI) against JetStream's, alternated on one nats-server.
pub(super) fn against_jetstream(
    spec: &Spec,
    bin: &Path,
    nats_server: &Path,
    rounds: u64,
) -> Result<(f64, f64)> {
    let nats = NatsServer::start(nats_server)?;
    let rt = client_runtime(2)?;
    let (warmup, n) = match spec.workload.stop {
        load::Stop::Requests(n) => (spec.workload.warmup, n),
        load::Stop::Duration(_) => bail!("a number of requests is needed"),
    };
    let payload = vec![b'x'; spec.workload.frame_bytes];
    let (mut askbus, mut js) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let dir = TempDir::new()?;
        let with = kind(bin, spec, Some(&dir.0.join("store.db")), "full")?;
        askbus.push(measure(&On::Start(with), spec)?.latency_us.p50);
        drop(dir);
        js.push(rt.block_on(jetstream(&nats.url(), round, &payload, warmup, n))?);
    }
    Ok((median(askbus), median(js)))
}

/// One producer publishes `payload` to a file-storage stream and waits for its ack (the
/// message persisted), a durable pull consumer receives it and acks it, waiting for the
/// server's confirmation: the p50 of that round trip (µs) over `n` after `warmup`.
async fn jetstream(url: &str, round: u64, payload: &[u8], warmup: u64, n: u64) -> Result<f64> {
    use async_nats::jetstream::{self, consumer, stream};
    let client = async_nats::connect(url)
        .await
        .context("cannot connect to nats-server")?;
    let js = jetstream::new(client);
    let name = format!("BENCH{round}");
    let subject = format!("bench.durable.{round}");
    let s = js
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .context("cannot create the stream")?;
    let c = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("bench".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .context("cannot create the consumer")?;
    let mut messages = c.messages().await.context("cannot pull")?;
    let payload = bytes::Bytes::copy_from_slice(payload);
    let mut h = histogram();
    for i in 0..warmup + n {
        let t0 = Instant::now();
        js.publish(subject.clone(), payload.clone())
            .await?
            .await
            .context("publish not acknowledged")?;
        let m = messages
            .next()
            .await
            .context("the consumer's stream ended")?
            .map_err(|e| anyhow::anyhow!("pull: {e}"))?;
        m.double_ack()
            .await
            .map_err(|e| anyhow::anyhow!("ack: {e}"))?;
        if i >= warmup {
            h.record(t0.elapsed().as_nanos().max(1) as u64)?;
        }
    }
    drop(messages);
    js.delete_stream(&name).await.ok();
    Ok(Latency::of(&h).p50)
}

/// The nats-server to use: `--nats-server`, else `$NATS_SERVER`, else the one on PATH.
pub(super) fn nats_server(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_owned).unwrap_or_else(|| {
        std::env::var_os("NATS_SERVER").map_or_else(|| PathBuf::from("nats-server"), PathBuf::from)
    })
}
