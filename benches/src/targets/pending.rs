//! Rows 6 and 7 of the targets: the memory a pending question costs, that askbusd sleeps
//! while questions wait, and the CPU it spends expiring them all at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

use super::{count, stats, Counts, PENDING_FRAME, SETTLE};
use crate::load::{self, Reader};
use crate::spawn::{Kind, Target};
use crate::wire::{write_cid, Extra, Peek, Request};
use crate::{client_runtime, proc};

pub(super) struct Pending {
    pub(super) before_kib: u64,
    pub(super) after_kib: u64,
    pub(super) each_kib: f64,
    pub(super) beyond_kib: f64,
    pub(super) send_s: f64,
    pub(super) idle_ticks: u64,
    pub(super) expiry_cpu_ms: f64,
    pub(super) expiry_wall_ms: f64,
}

/// Rows 6 and 7: `c.pending` questions of 1 KB with no UI (noUi wait) and a shared deadline
/// far enough out to send them all, let the daemon settle and watch it idle; then the CPU it
/// spends expiring them all (responses written and telemetry recorded).
pub(super) fn pending(bin: &std::path::Path, c: &Counts, threads: usize) -> Result<Pending> {
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
            // The per-uid byte budget (64 MiB by default) would refuse the 100,000 of the full
            // run; what is measured here is what each costs, not that limit.
            "--max-pending-bytes-per-uid".into(),
            (n * PENDING_FRAME * 4).max(64 << 20).to_string(),
            "--no-ui".into(),
            "wait".into(),
        ],
        policies: None,
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
pub(super) async fn send_timed(
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
pub(super) async fn read_responses(mut rd: Reader, quota: usize) -> Result<()> {
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
