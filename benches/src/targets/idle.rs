//! Row 5 of the targets: the memory an idle, connected producer costs askbusd.

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::{count, stats, SETTLE};
use crate::load::{self, Reader};
use crate::spawn::{Kind, Target};
use crate::wire::{write_frame, Peek};
use crate::{client_runtime, proc};

/// Row 5: RSS per connected, idle producer (each has had a ping answered, so the daemon has
/// really set it up).
pub(super) fn idle_connections(
    bin: &std::path::Path,
    n: usize,
    threads: usize,
) -> Result<(f64, Value)> {
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
        policies: None,
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
