//! The baseline relay (`askbus-bench relay`, hidden): the least a broker with askbus's framing can do.
//! A connection that subscribes is a UI; every other frame is a request, forwarded unchanged
//! to every UI; a UI's frame goes, unchanged, to the producer of its correlationId. It reads
//! nothing but a frame's type and correlationId, validates nothing, and keeps no state beyond
//! the correlationId → producer map, so askbusd's cost is what it adds above this.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use askbus::client::MAX_INBOUND_FRAME;
use askbus::protocol::codec;

use super::spawn::RELAY_READY;
use super::wire::Peek;

/// Frames queued for one connection before its reader waits (backpressure, not loss: the
/// relay is a baseline, not a daemon that must stay up against slow readers).
const QUEUE_FRAMES: usize = 4096;

type Tx = mpsc::Sender<Bytes>;

#[derive(Default)]
struct Shared {
    /// The UIs' queues, replaced whole on (un)subscribe so a broadcast takes one Arc clone.
    uis: RwLock<Arc<Vec<(u64, Tx)>>>,
    /// Who asked each pending correlationId.
    pending: Mutex<HashMap<Box<str>, Tx>>,
}

/// Runs the relay on `socket` until SIGTERM or SIGINT.
pub fn main(socket: &Path) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-relay")
        .build()
        .context("cannot start the runtime")?;
    rt.block_on(serve(socket))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(socket: &Path) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let listener = UnixListener::bind(socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    eprintln!("{RELAY_READY} {}", socket.display());
    let shared = Arc::new(Shared::default());
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                next_id += 1;
                tokio::spawn(connection(stream, next_id, shared.clone()));
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let _ = std::fs::remove_file(socket);
    Ok(())
}

const SUBSCRIBED: &[u8] = br#"{"type":"subscribed"}"#;

async fn connection(stream: UnixStream, id: u64, shared: Arc<Shared>) {
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(QUEUE_FRAMES);
    let writer = tokio::spawn(write_loop(wr, rx));
    let mut frames = FramedRead::new(rd, codec(MAX_INBOUND_FRAME));
    let mut is_ui = false;
    while let Some(Ok(frame)) = frames.next().await {
        let frame = frame.freeze();
        match route(&frame, is_ui, &tx, &shared) {
            Route::Drop => {}
            Route::Subscribe => {
                is_ui = true;
                {
                    let mut uis = shared.uis.write().expect("uis lock");
                    let mut next = (**uis).clone();
                    next.push((id, tx.clone()));
                    *uis = Arc::new(next);
                }
                if tx.send(Bytes::from_static(SUBSCRIBED)).await.is_err() {
                    break;
                }
            }
            Route::To(producer) => {
                let _ = producer.send(frame).await;
            }
            Route::Broadcast => {
                let uis = shared.uis.read().expect("uis lock").clone();
                for (_, ui) in uis.iter() {
                    let _ = ui.send(frame.clone()).await;
                }
            }
        }
    }
    if is_ui {
        let mut uis = shared.uis.write().expect("uis lock");
        let next: Vec<_> = uis.iter().filter(|(u, _)| *u != id).cloned().collect();
        *uis = Arc::new(next);
    }
    // The pending map may still hold this connection's queue; the peer is gone either way.
    writer.abort();
}

enum Route {
    Drop,
    Subscribe,
    To(Tx),
    Broadcast,
}

/// Where a frame goes. A UI's frame is an answer for the producer that asked; any other
/// connection's frame is a request (remembered, then broadcast), or its subscribe.
fn route(frame: &[u8], is_ui: bool, tx: &Tx, shared: &Shared) -> Route {
    let Some(peek) = Peek::of(frame) else {
        return Route::Drop;
    };
    if !is_ui && peek.ty == "subscribe" {
        return Route::Subscribe;
    }
    let Some(cid) = peek.cid else {
        return Route::Drop;
    };
    let mut pending = shared.pending.lock().expect("pending lock");
    if is_ui {
        pending.remove(&*cid).map_or(Route::Drop, Route::To)
    } else {
        pending.insert(cid.into(), tx.clone());
        Route::Broadcast
    }
}

/// Writes queued frames, feeding everything already queued before one flush (as askbusd's
/// connection writer does).
async fn write_loop(wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut sink = FramedWrite::new(wr, codec(u32::MAX as usize));
    while let Some(first) = rx.recv().await {
        if sink.feed(first).await.is_err() {
            return;
        }
        while let Ok(more) = rx.try_recv() {
            if sink.feed(more).await.is_err() {
                return;
            }
        }
        if SinkExt::<Bytes>::flush(&mut sink).await.is_err() {
            return;
        }
    }
}
