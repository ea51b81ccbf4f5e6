//! The bench's workload over raw frames: P producers keeping C requests in flight between
//! them and U UIs answering their share, identical against askbusd and the relay. Producers
//! and UIs batch whatever is ready into one write, as any good client would; a round trip is
//! timed from just before the write of its request to the read that brought its response.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

use askbus::client::MAX_INBOUND_FRAME;
use askbus::protocol::codec;

use super::proc;
use super::wire::{cid_seq, write_cid, write_frame, Peek, Request, Response};

/// How long a run may go without a single frame arriving before it is called stuck.
const STALL: Duration = Duration::from_secs(30);

/// When the measured phase ends.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    Requests(u64),
    Duration(Duration),
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub producers: usize,
    pub uis: usize,
    /// Requests in flight, in total over the producers.
    pub in_flight: usize,
    /// Requests before the measured phase, in total.
    pub warmup: u64,
    pub stop: Stop,
    pub request: Arc<Request>,
    /// A typical request's size on the wire (correlationIds vary in length by a few bytes).
    pub frame_bytes: usize,
}

/// What one run measured.
#[derive(Debug)]
pub struct Measured {
    pub requests: u64,
    pub elapsed: Duration,
    /// Round trips, in nanoseconds.
    pub latency: Histogram<u64>,
    /// The target's CPU ticks over the measured phase, when its pid is known.
    pub cpu_ticks: Option<u64>,
}

/// A new histogram for round trips in ns (1 ns to 1 h, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Reads frames with the library's codec off one half of a connection.
pub struct Reader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    codec: LengthDelimitedCodec,
}

impl Reader {
    pub fn new(rd: OwnedReadHalf) -> Reader {
        Reader {
            rd,
            buf: BytesMut::with_capacity(64 * 1024),
            codec: codec(MAX_INBOUND_FRAME),
        }
    }

    /// Reads what the socket has; fails on EOF (the bench never expects its peer to leave).
    pub async fn fill(&mut self) -> Result<()> {
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            self.buf.reserve(64 * 1024);
        }
        match self.rd.read_buf(&mut self.buf).await {
            Ok(0) => bail!("the target closed the connection"),
            Ok(_) => Ok(()),
            Err(e) => Err(e).context("read from the target"),
        }
    }

    /// The next complete frame's payload in the buffer, if any.
    pub fn next(&mut self) -> Result<Option<BytesMut>> {
        self.codec
            .decode(&mut self.buf)
            .context("bad frame from the target")
    }

    /// Reads until one frame is complete.
    pub async fn frame(&mut self) -> Result<BytesMut> {
        loop {
            if let Some(f) = self.next()? {
                return Ok(f);
            }
            self.fill().await?;
        }
    }
}

/// Connects, subscribes and waits for `subscribed`.
pub async fn subscribe(socket: &Path) -> Result<(Reader, OwnedWriteHalf)> {
    let stream = connect(socket).await?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = Reader::new(rd);
    let mut out = Vec::new();
    write_frame(br#"{"type":"subscribe","client":"askbus-bench"}"#, &mut out);
    wr.write_all(&out).await.context("send subscribe")?;
    loop {
        let frame = rd.frame().await?;
        match Peek::of(&frame) {
            Some(p) if p.ty == "subscribed" => return Ok((rd, wr)),
            Some(p) if p.ty == "error" => {
                bail!("subscribe refused: {}", String::from_utf8_lossy(&frame))
            }
            _ => {}
        }
    }
}

pub async fn connect(socket: &Path) -> Result<UnixStream> {
    UnixStream::connect(socket)
        .await
        .with_context(|| format!("cannot connect to {}", socket.display()))
}

/// Which requests a UI answers: those whose sequence number n has n % of == k.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub k: u64,
    pub of: u64,
}

/// A UI: answers its share of the requests it is sent, ignores every other frame.
pub async fn ui(
    mut rd: Reader,
    mut wr: OwnedWriteHalf,
    share: Share,
    response: Arc<Response>,
    progress: Arc<AtomicU64>,
) -> Result<()> {
    let mut out = Vec::with_capacity(16 * 1024);
    loop {
        rd.fill().await?;
        progress.fetch_add(1, Ordering::Relaxed);
        while let Some(frame) = rd.next()? {
            let Some(peek) = Peek::of(&frame) else {
                bail!(
                    "invalid frame sent to a UI: {:?}",
                    String::from_utf8_lossy(&frame)
                );
            };
            if peek.ty != response.answers {
                continue;
            }
            let cid = peek
                .cid
                .ok_or_else(|| anyhow!("a request without a correlationId"))?;
            let seq = cid_seq(&cid).ok_or_else(|| anyhow!("not a bench correlationId: {cid:?}"))?;
            if seq % share.of == share.k {
                response.write(cid.as_bytes(), &mut out);
            }
        }
        if !out.is_empty() {
            wr.write_all(&out).await.context("UI write")?;
            out.clear();
        }
    }
}

/// How much of a phase a producer sends.
#[derive(Debug, Clone, Copy)]
enum Quota {
    Count(u64),
    For(Duration),
}

struct Producer {
    idx: usize,
    rd: Reader,
    wr: OwnedWriteHalf,
    window: usize,
    next_seq: u64,
    /// Requests sent and not answered yet, by sequence number, with when they were written.
    in_flight: HashMap<u64, Instant>,
    request: Arc<Request>,
    progress: Arc<AtomicU64>,
}

impl Producer {
    /// Sends `quota` requests keeping `window` in flight, and waits for every answer.
    /// Returns how many round trips it recorded.
    async fn phase(&mut self, quota: Quota, mut hist: Option<&mut Histogram<u64>>) -> Result<u64> {
        let started = Instant::now();
        let mut sent = 0u64;
        let mut done = 0u64;
        let mut out = Vec::with_capacity(self.window * self.request.wire_len(24));
        let mut batch: Vec<u64> = Vec::with_capacity(self.window);
        let mut cid = Vec::with_capacity(32);
        loop {
            while self.in_flight.len() + batch.len() < self.window
                && match quota {
                    Quota::Count(n) => sent < n,
                    Quota::For(d) => started.elapsed() < d,
                }
            {
                cid.clear();
                write_cid(self.idx, self.next_seq, &mut cid);
                self.request.write(&cid, &mut out);
                batch.push(self.next_seq);
                self.next_seq += 1;
                sent += 1;
            }
            if !out.is_empty() {
                let at = Instant::now();
                self.in_flight.extend(batch.drain(..).map(|s| (s, at)));
                self.wr.write_all(&out).await.context("producer write")?;
                out.clear();
            }
            if self.in_flight.is_empty() {
                return Ok(done);
            }
            self.rd.fill().await?;
            let read_at = Instant::now();
            self.progress.fetch_add(1, Ordering::Relaxed);
            while let Some(frame) = self.rd.next()? {
                let Some(peek) = Peek::of(&frame) else {
                    bail!(
                        "invalid frame sent to a producer: {:?}",
                        String::from_utf8_lossy(&frame)
                    );
                };
                match &*peek.ty {
                    ty if ty == self.request.kind.response_type() => {}
                    "error" => bail!(
                        "the target refused a request: {}",
                        String::from_utf8_lossy(&frame)
                    ),
                    _ => continue,
                }
                let seq = peek.cid.as_deref().and_then(cid_seq);
                let Some(sent_at) = seq.and_then(|s| self.in_flight.remove(&s)) else {
                    bail!(
                        "a response to no request in flight: {:?}",
                        String::from_utf8_lossy(&frame)
                    );
                };
                if let Some(h) = hist.as_deref_mut() {
                    h.saturating_record(read_at.duration_since(sent_at).as_nanos().max(1) as u64);
                }
                done += 1;
            }
        }
    }
}

/// Splits `total` into `parts` shares that add up to it.
fn share(total: u64, parts: usize, i: usize) -> u64 {
    total / parts as u64 + u64::from((i as u64) < total % parts as u64)
}

/// Runs `w` against the target on `socket`; `pid` (when the bench started the target) is read
/// for CPU time over the measured phase.
pub async fn run(socket: &Path, w: &Workload, pid: Option<u32>) -> Result<Measured> {
    run_across(socket, socket, w, pid).await
}

/// Runs `w` with the producers on `producers` and the UIs on `uis`: two federated nodes, for a
/// question's round trip across them.
pub async fn run_across(
    producers: &Path,
    uis_on: &Path,
    w: &Workload,
    pid: Option<u32>,
) -> Result<Measured> {
    if w.producers == 0 || w.uis == 0 {
        bail!("a run needs at least one producer and one UI");
    }
    if w.in_flight < w.producers {
        bail!(
            "--in-flight {} is less than --producers {}: every producer keeps at least one request in flight",
            w.in_flight,
            w.producers
        );
    }
    let progress = Arc::new(AtomicU64::new(0));
    let response = Arc::new(w.request.response());
    let mut uis: Vec<JoinHandle<Result<()>>> = Vec::with_capacity(w.uis);
    for k in 0..w.uis {
        let (rd, wr) = subscribe(uis_on).await?;
        let share = Share {
            k: k as u64,
            of: w.uis as u64,
        };
        uis.push(tokio::spawn(ui(
            rd,
            wr,
            share,
            response.clone(),
            progress.clone(),
        )));
    }
    let result = drive(producers, w, pid, progress, &mut uis).await;
    for u in &uis {
        u.abort();
    }
    result
}

async fn drive(
    socket: &Path,
    w: &Workload,
    pid: Option<u32>,
    progress: Arc<AtomicU64>,
    uis: &mut [JoinHandle<Result<()>>],
) -> Result<Measured> {
    let (warm_tx, mut warm_rx) = mpsc::channel::<Result<()>>(w.producers);
    let (go_tx, go_rx) = watch::channel(false);
    let mut producers = Vec::with_capacity(w.producers);
    for i in 0..w.producers {
        let (rd, wr) = connect(socket).await?.into_split();
        let mut p = Producer {
            idx: i,
            rd: Reader::new(rd),
            wr,
            window: share(w.in_flight as u64, w.producers, i) as usize,
            next_seq: 0,
            in_flight: HashMap::new(),
            request: w.request.clone(),
            progress: progress.clone(),
        };
        let warmup = share(w.warmup, w.producers, i);
        let measured = match w.stop {
            Stop::Requests(n) => Quota::Count(share(n, w.producers, i)),
            Stop::Duration(d) => Quota::For(d),
        };
        let warm_tx = warm_tx.clone();
        let mut go = go_rx.clone();
        producers.push(tokio::spawn(async move {
            let warm = p.phase(Quota::Count(warmup), None).await.map(|_| ());
            let failed = warm.is_err();
            let _ = warm_tx.send(warm).await;
            if failed {
                return Err(anyhow!("warm-up failed"));
            }
            go.wait_for(|go| *go)
                .await
                .context("the run was abandoned")?;
            let mut hist = histogram();
            let n = p.phase(measured, Some(&mut hist)).await?;
            Ok::<_, anyhow::Error>((hist, n))
        }));
    }
    drop(warm_tx);
    for _ in 0..w.producers {
        let warm = watch_stall(&progress, uis, warm_rx.recv()).await?;
        warm.ok_or_else(|| anyhow!("a producer stopped during the warm-up"))??;
    }
    let cpu0 = pid.map(proc::cpu_ticks).transpose()?;
    let started = Instant::now();
    go_tx.send_replace(true);
    let mut latency = histogram();
    let mut requests = 0;
    for p in producers {
        let (hist, n) = watch_stall(&progress, uis, p)
            .await?
            .context("a producer panicked")??;
        latency.add(&hist).expect("same bounds");
        requests += n;
    }
    let elapsed = started.elapsed();
    let cpu_ticks = match (pid, cpu0) {
        (Some(pid), Some(c0)) => Some(proc::cpu_ticks(pid)?.saturating_sub(c0)),
        _ => None,
    };
    Ok(Measured {
        requests,
        elapsed,
        latency,
        cpu_ticks,
    })
}

/// Awaits `fut`, failing instead if a UI fails or no frame arrives anywhere for `STALL`.
async fn watch_stall<F: std::future::Future>(
    progress: &AtomicU64,
    uis: &mut [JoinHandle<Result<()>>],
    fut: F,
) -> Result<F::Output> {
    tokio::pin!(fut);
    let mut seen = progress.load(Ordering::Relaxed);
    let mut since = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            out = &mut fut => return Ok(out),
            _ = tick.tick() => {}
        }
        for u in uis.iter_mut() {
            if u.is_finished() {
                return match u.await {
                    Ok(Err(e)) => Err(e.context("a UI failed")),
                    _ => Err(anyhow!("a UI stopped")),
                };
            }
        }
        let now = progress.load(Ordering::Relaxed);
        if now != seen {
            seen = now;
            since = Instant::now();
        } else if since.elapsed() > STALL {
            bail!("no frame from the target for {STALL:?}; is it stuck?");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_add_up() {
        for (total, parts) in [(10, 3), (64, 8), (7, 8), (200_000, 8), (1, 1)] {
            let sum: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(sum, total);
        }
    }
}
