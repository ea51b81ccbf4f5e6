//! One peer's connection: one task that reads frames and hands them to the hub, writes the
//! frames a burst produced once it has handled the burst, and finishes writes the socket would
//! not take at once. Frames for this peer produced by other connections are written by those
//! connections' tasks (see [`crate::outbox`]); this task is only woken for its own input, a
//! full socket, or a replay step.
//!
//! Here: the task's loop, half-closes and lingering closes, and the dispatch of each frame the
//! door (`crate::intake`) read to the broker (`Conn::handle`). `reader` takes frames off the socket; `error` words the
//! refusals and closes that are the daemon's own.

mod error;
mod history;
mod reader;

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use tokio::net::UnixStream;
use tokio::time::Duration;
use tokio_util::sync::CancellationToken;

pub use error::ConnError;
use reader::{FrameReader, Next, Read};

use crate::broker::{PeerId, PeerInfo};
use crate::hub::Hub;
use crate::intake::{self, Refused, Request};
use crate::outbox::{Batch, Outbox};
use crate::protocol::{self, encode, FrameError, ServerFrame, LENGTH_PREFIX_BYTES};
use crate::telemetry::Counters;

/// Settings every connection reads.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    pub max_frame_bytes: usize,
    pub max_queue_bytes: usize,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    /// How long a frame may take to arrive once its first byte has.
    pub frame_timeout: Duration,
}

/// Serves one connection until the peer leaves, misbehaves past recovery, its outbox
/// overflows, or `close` is cancelled (daemon shutdown, after pending requests were ended).
pub async fn serve(
    stream: UnixStream,
    id: PeerId,
    info: PeerInfo,
    hub: Arc<Hub>,
    config: Arc<ConnectionConfig>,
    close: CancellationToken,
) {
    let stream = Arc::new(stream);
    let outbox = Outbox::new(stream.clone(), config.max_queue_bytes);
    hub.connect(id, info, outbox.clone());
    let mut conn = Conn {
        id,
        hub: &hub,
        shared_hub: hub.clone(),
        outbox: outbox.clone(),
        config: &config,
        batch: Batch::new(),
        history: None,
    };
    let mut frames = FrameReader::new(stream.clone(), &config);
    // Set when we close on the peer because of what it sent (not when it left or at shutdown).
    let mut closing_on_error = false;
    loop {
        if outbox.take_replay() {
            hub.replay(id, &mut conn.batch);
            conn.batch.flush();
        }
        let stalled = outbox.is_stalled();
        let ready = tokio::select! {
            biased;
            _ = close.cancelled() => break,
            _ = outbox.cancel_token().cancelled() => break,
            // A write error means the peer went away; its reader sees that next.
            _ = outbox.write_stalled(), if stalled => continue,
            _ = outbox.woken() => continue,
            ready = frames.readable() => ready,
        };
        let read = match ready {
            Ok(()) => frames.read_ready(|payload| {
                Counters::bump(&hub.counters.frames_in);
                conn.handle(payload)
            }),
            Err(stalled) => stalled,
        };
        // Everything this burst produced, for every peer, in one write each.
        conn.batch.flush();
        let err = match read {
            Read::More => continue,
            Read::Closed => break,
            Read::Eof => {
                // A half-close is not a disconnect: a one-shot producer (`nc -N`, `socat`)
                // shuts its write side after its request and reads the answer.
                if hub.run_in(&mut conn.batch, |b, _, _| b.half_close(id)) {
                    conn.batch.flush();
                    serve_half_closed(&stream, &outbox, &close).await;
                }
                break;
            }
            Read::CloseOnError => {
                closing_on_error = true;
                break;
            }
            Read::TooLarge => ConnError::FrameTooLarge {
                limit: config.max_frame_bytes,
            },
            Read::Stalled => ConnError::FrameTimeout {
                ms: config.frame_timeout.as_millis(),
            },
        };
        // The stream is no longer at a frame boundary: say why, then close.
        conn.reply_error(&err.to_frame_error());
        conn.batch.flush();
        closing_on_error = true;
        break;
    }
    hub.disconnect(id);
    drop(conn);
    if !outbox.cancel_token().is_cancelled() {
        // What is still queued (a goodbye error frame, shutdown answers) goes out first; a
        // peer that does not read for that long loses it.
        let _ = tokio::time::timeout(LINGER, outbox.drain()).await;
    }
    shutdown_write(&stream);
    if closing_on_error {
        discard_until_eof(&stream).await;
    }
}

/// Serves a peer that shut its write side while it still has something to receive: its
/// frames are written until the broker has nothing more for it (`Outbox::finish`), it closes
/// its end too (which withdraws what it asked), or the connection must end.
async fn serve_half_closed(stream: &UnixStream, outbox: &Outbox, close: &CancellationToken) {
    let hangup = hangup(stream);
    tokio::pin!(hangup);
    loop {
        if outbox.is_finished() {
            return;
        }
        let stalled = outbox.is_stalled();
        tokio::select! {
            biased;
            _ = close.cancelled() => return,
            _ = outbox.cancel_token().cancelled() => return,
            _ = &mut hangup => return,
            _ = outbox.write_stalled(), if stalled => {}
            _ = outbox.woken() => {}
        }
    }
}

/// Completes when the peer has closed its end entirely (not just its write side): the socket
/// then reports a hang-up. The stream's own registration is always writable and at end of
/// input, so a duplicate descriptor registered for reading only is watched, on which the
/// hang-up is the one event left to come. If no descriptor is left for it, the peer is
/// treated as gone at once, as before half-closes were served.
async fn hangup(stream: &UnixStream) {
    use std::os::fd::AsFd;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    let Ok(fd) = stream.as_fd().try_clone_to_owned() else {
        return;
    };
    // SAFETY: `fd` is an open descriptor owned by the `OwnedFd` the AsyncFd takes, which
    // closes it only when the AsyncFd is dropped.
    let Ok(watch) = (unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }) else {
        return;
    };
    loop {
        match watch.ready(Interest::WRITABLE).await {
            Ok(guard) if guard.ready().is_write_closed() => return,
            Ok(mut guard) => guard.clear_ready(),
            Err(_) => return,
        }
    }
}

/// How long a closing connection may take to write its last frames, and how long one we close
/// on an error keeps reading (and discarding) what the peer still sends: closing a Unix socket
/// with unread input resets it, and the peer would then lose the error frame that says why.
const LINGER: Duration = Duration::from_secs(1);

async fn discard_until_eof(stream: &UnixStream) {
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        loop {
            if stream.readable().await.is_err() {
                break;
            }
            match stream.try_read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
    })
    .await;
}

/// Ends our direction of the stream, so the peer reads EOF after our last frame even while
/// other handles to the socket (an outbox on someone's batch) are still alive.
fn shutdown_write(stream: &UnixStream) {
    // SAFETY: the descriptor is owned by `stream`, open for the call's duration; shutdown(2)
    // neither closes nor invalidates it.
    unsafe {
        libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR);
    }
}

struct Conn<'a> {
    id: PeerId,
    hub: &'a Hub,
    /// The same hub, for the history worker's task.
    shared_hub: Arc<Hub>,
    /// The history worker, started by the first `history` query.
    history: Option<tokio::sync::mpsc::Sender<protocol::HistoryQueryFrame>>,
    outbox: Outbox,
    config: &'a ConnectionConfig,
    /// The outboxes this burst of frames has queued frames on.
    batch: Batch,
}

impl Conn<'_> {
    fn reply(&mut self, frame: bytes::Bytes) {
        // With a store, a reply waits behind this connection's frames that wait for a commit
        // (a pong never overtakes the error of the request before it).
        let Some(frame) = self.hub.reply_in_order(self.id, frame) else {
            return;
        };
        match self.outbox.push(&frame, &mut self.batch) {
            Ok(()) => Counters::bump(&self.hub.counters.frames_out),
            // Our own replies overflowing means the peer does not read what it asks for.
            Err(_) => self.outbox.cancel(),
        }
    }

    fn reply_error(&mut self, err: &FrameError) {
        self.hub.counters.count_error(err.code);
        if err.code.closes_connection() {
            tracing::warn!(peer = self.id, code = %err.code, "{}", err.message);
        } else {
            tracing::debug!(peer = self.id, code = %err.code, "{}", err.message);
        }
        self.reply(encode(&ServerFrame::error(err)));
    }

    /// One frame, through the door (`intake::read`), then to the broker or answered here.
    fn handle(&mut self, payload: &[u8]) -> Next {
        let id = self.id;
        match intake::read(payload) {
            Ok(Request::Ask(req)) => self
                .hub
                .run_in(&mut self.batch, |b, now, fx| b.ask(id, req, now, fx)),
            Ok(Request::Answer(resp)) => self
                .hub
                .run_in(&mut self.batch, |b, now, fx| b.respond(id, resp, now, fx)),
            Ok(Request::Decide(resp)) => self
                .hub
                .run_in(&mut self.batch, |b, now, fx| b.decide(id, resp, now, fx)),
            Ok(Request::Cancel {
                kind,
                id: cid,
                reason,
            }) => self.hub.run_in(&mut self.batch, |b, now, fx| {
                b.cancel_because(id, &cid, kind, reason, now, fx)
            }),
            Ok(Request::Hello {
                protocol,
                client,
                via,
            }) => {
                if let Some(client) = client {
                    self.hub
                        .run_in(&mut self.batch, |b, _, _| b.set_client(id, client));
                }
                if let Some(via) = via {
                    self.hub
                        .run_in(&mut self.batch, |b, _, _| b.set_via(id, &via));
                }
                self.reply(encode(&ServerFrame::Welcome {
                    protocol,
                    server: crate::SERVER_NAME.to_owned(),
                    max_frame_bytes: self.config.max_frame_bytes as u64,
                    default_timeout_ms: self.config.default_timeout_ms,
                    max_timeout_ms: self.config.max_timeout_ms,
                }));
            }
            Ok(Request::Ping { id }) => self.reply(encode(&ServerFrame::Pong { id })),
            Ok(Request::Stats) => self.reply(self.hub.stats_frame_for(id)),
            Ok(Request::Subscribe {
                client,
                filter,
                via,
            }) => self.hub.run_in(&mut self.batch, |b, _, fx| {
                if let Some(via) = via {
                    b.set_via(id, &via);
                }
                b.subscribe(id, client, filter, fx)
            }),
            Ok(Request::Watch { client }) => self
                .hub
                .run_in(&mut self.batch, |b, _, fx| b.watch(id, client, fx)),
            Ok(Request::NotifyReport(report)) => self
                .hub
                .run_in(&mut self.batch, |b, _, fx| b.notify_report(id, report, fx)),
            Ok(Request::History(query)) => {
                let worker = self.history.get_or_insert_with(|| {
                    history::spawn(self.shared_hub.clone(), id, self.outbox.clone())
                });
                if worker.try_send(query).is_err() {
                    self.reply_error(&FrameError::new(
                        protocol::ErrorCode::InvalidFrame,
                        format!(
                            "at most {} history queries may wait for their answers on one connection",
                            history::MAX_QUEUED
                        ),
                    ));
                }
            }
            Err(Refused::Request { kind, context, err }) => {
                self.hub.run_in(&mut self.batch, |b, _, fx| {
                    b.reject(id, kind, context.as_deref(), err, fx)
                })
            }
            Err(Refused::Frame(err)) => {
                self.reply_error(&err);
                if err.code.closes_connection() {
                    return Next::Close;
                }
            }
        }
        Next::Continue
    }
}

/// Refuses a connection before it is served: one error frame, then close.
/// Refuses a connection at once, costing the daemon one write and one close: the error
/// frame is written if the socket takes it now (a fresh socket's buffer always does), the
/// write side is shut so the peer reads it and then EOF, and what the peer already sent is
/// drained so the close does not reset the connection. No task, no timer, no descriptor
/// held: a peer connecting in a loop past its quota cannot pile up descriptors.
pub fn refuse_now(stream: &UnixStream, err: &FrameError) {
    let payload = encode(&ServerFrame::error(err));
    let mut frame = Vec::with_capacity(LENGTH_PREFIX_BYTES + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    let _ = stream.try_write(&frame);
    shutdown_write(stream);
    let mut sink = [0u8; 4096];
    while matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {}
}
