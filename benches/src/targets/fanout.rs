//! Row 8 of the targets: the time from one question written to the last of many UIs reading it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;

use super::Counts;
use crate::client_runtime;
use crate::load::{self, Reader};
use crate::report::median;
use crate::spawn::{Kind, Target};
use crate::wire::{cid_seq, write_cid, Extra, Peek, Request, Response};

/// What a fan-out UI saw.
enum Seen {
    Request(u64, Instant),
    /// An ack or a withdrawal: askbusd is done with the request for this UI.
    End(u64),
}

/// Row 8: median time from writing one question to the last UI reading it, with one UI and
/// with `c.fanout_uis`; µs.
pub(super) fn fanout(kind: &Kind, c: &Counts, threads: usize) -> Result<(f64, f64)> {
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
