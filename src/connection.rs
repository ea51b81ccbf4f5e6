//! One peer's connection: a reader that parses frames and hands them to the hub, and a writer
//! that drains the connection's bounded queue onto the socket, batching whatever is queued
//! into one flush.

use std::sync::Arc;

use bytes::BytesMut;
use futures_util::SinkExt;
use tokio::io::AsyncReadExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::time::{Duration, Instant};
use tokio_util::codec::{Decoder, FramedWrite, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;

use crate::broker::{PeerId, PeerInfo, ValidRequest};
use crate::hub::{outbox, Hub, Inbox, Out, Outbox};
use crate::protocol::{
    self, codec, encode, is_frame_too_large, ErrorCode, FrameError, Inbound, ServerFrame,
};
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

/// Frames the daemon writes may be larger than those it accepts (a response carries a UI's
/// answers twice, plus the envelope); only the inbound direction is capped.
const MAX_OUTBOUND_FRAME: usize = u32::MAX as usize;

enum Next {
    Continue,
    Close,
}

/// Serves one connection until the peer leaves, misbehaves past recovery, its queue
/// overflows, or `close` is cancelled (daemon shutdown, after pending requests were ended).
pub async fn serve(
    stream: UnixStream,
    id: PeerId,
    info: PeerInfo,
    hub: Arc<Hub>,
    config: Arc<ConnectionConfig>,
    close: CancellationToken,
) {
    let (rd, wr) = stream.into_split();
    let (outbox, inbox) = outbox(config.max_queue_bytes);
    let cancel = outbox.cancel.clone();
    hub.connect(id, info, outbox.clone());
    let writer = tokio::spawn(write_loop(wr, inbox, id, hub.clone(), cancel.clone()));
    let mut conn = Conn {
        id,
        hub: &hub,
        outbox,
        config: &config,
    };
    let mut frames = FrameReader::new(rd, &config);
    // Set when we close on the peer because of what it sent (not when it left or at shutdown).
    let mut closing_on_error = false;
    loop {
        let read = tokio::select! {
            _ = close.cancelled() => break,
            _ = cancel.cancelled() => break,
            read = frames.next() => read,
        };
        let err = match read {
            Read::Frame(payload) => {
                Counters::bump(&hub.counters.frames_in);
                match conn.handle(&payload) {
                    Next::Continue => continue,
                    Next::Close => {
                        closing_on_error = true;
                        break;
                    }
                }
            }
            Read::Closed => break,
            Read::TooLarge => FrameError::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame length exceeds the limit of {} bytes; closing the connection",
                    config.max_frame_bytes
                ),
            ),
            Read::Stalled => FrameError::new(
                ErrorCode::FrameTimeout,
                format!(
                    "frame not completed within {} ms; closing the connection",
                    config.frame_timeout.as_millis()
                ),
            ),
        };
        // The stream is no longer at a frame boundary: say why, then close.
        conn.reply_error(&err);
        closing_on_error = true;
        break;
    }
    hub.disconnect(id);
    // The writer finishes what is queued (a goodbye error frame, shutdown answers), then exits
    // once every sender is gone.
    drop(conn);
    let _ = writer.await;
    if closing_on_error {
        frames.linger().await;
    }
}

/// How long a connection we close on an error keeps reading (and discarding) what the peer
/// still sends. Closing a Unix socket with unread input resets it, and the peer would then
/// lose the error frame that says why it was closed.
const LINGER: Duration = Duration::from_secs(1);

async fn discard_until_eof(rd: &mut OwnedReadHalf) {
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// What reading the next frame gave.
enum Read {
    Frame(BytesMut),
    /// The peer closed (or the socket failed); mid-frame data, if any, is dropped.
    Closed,
    /// The length prefix exceeded the limit.
    TooLarge,
    /// A frame was started but not finished within the partial-frame deadline.
    Stalled,
}

/// Reads frames with the shared codec, and bounds how long a started frame may take, so a
/// peer trickling bytes (or stopping mid-frame) cannot hold a buffer forever. An idle
/// connection between frames has no deadline and costs no timer.
struct FrameReader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    codec: LengthDelimitedCodec,
    timeout: Duration,
    /// When the frame now in `buf` began arriving.
    partial_since: Option<Instant>,
}

impl FrameReader {
    fn new(rd: OwnedReadHalf, config: &ConnectionConfig) -> Self {
        FrameReader {
            rd,
            buf: BytesMut::with_capacity(8 * 1024),
            codec: codec(config.max_frame_bytes),
            timeout: config.frame_timeout,
            partial_since: None,
        }
    }

    /// After the writer has shut down its side: read the peer's remaining input until it
    /// closes (or `LINGER` passes), so the close does not reset the connection.
    async fn linger(&mut self) {
        discard_until_eof(&mut self.rd).await;
    }

    /// The next frame. Cancel-safe: bytes already read stay in the buffer.
    async fn next(&mut self) -> Read {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    // Whatever follows is the start of the next frame, starting now.
                    self.partial_since = (!self.buf.is_empty()).then(Instant::now);
                    return Read::Frame(frame);
                }
                Ok(None) => {}
                Err(e) if is_frame_too_large(&e) => return Read::TooLarge,
                Err(_) => return Read::Closed,
            }
            let read = match self.partial_since {
                None => self.rd.read_buf(&mut self.buf).await,
                Some(since) => {
                    let deadline = since + self.timeout;
                    match tokio::time::timeout_at(deadline, self.rd.read_buf(&mut self.buf)).await {
                        Ok(read) => read,
                        Err(_) => return Read::Stalled,
                    }
                }
            };
            match read {
                Ok(0) | Err(_) => return Read::Closed,
                Ok(_) => {
                    if self.partial_since.is_none() {
                        self.partial_since = Some(Instant::now());
                    }
                }
            }
        }
    }
}

struct Conn<'a> {
    id: PeerId,
    hub: &'a Hub,
    outbox: Outbox,
    config: &'a ConnectionConfig,
}

impl Conn<'_> {
    fn reply(&self, frame: bytes::Bytes) {
        if !self.outbox.push(frame) {
            // Our own replies overflowing means the peer does not read what it asks for.
            self.outbox.cancel.cancel();
        }
    }

    fn reply_error(&self, err: &FrameError) {
        self.hub.counters.count_error(err.code);
        if err.code.closes_connection() {
            tracing::warn!(peer = self.id, code = %err.code, "{}", err.message);
        } else {
            tracing::debug!(peer = self.id, code = %err.code, "{}", err.message);
        }
        self.reply(encode(&ServerFrame::error(err)));
    }

    fn handle(&mut self, payload: &[u8]) -> Next {
        let frame = match protocol::parse_inbound(payload) {
            Ok(frame) => frame,
            Err(err) if err.ask_request => {
                let id = self.id;
                self.hub.run(|b, _, fx| b.reject_malformed(id, err, fx));
                return Next::Continue;
            }
            Err(err) => {
                self.reply_error(&err);
                return if err.code.closes_connection() {
                    Next::Close
                } else {
                    Next::Continue
                };
            }
        };
        let id = self.id;
        match frame {
            Inbound::Hello { protocol, client } => {
                if let Some(client) = client {
                    self.hub.run(|b, _, _| b.set_client(id, client));
                }
                self.reply(encode(&ServerFrame::Welcome {
                    protocol,
                    server: crate::SERVER_NAME.to_owned(),
                    max_frame_bytes: self.config.max_frame_bytes as u64,
                    default_timeout_ms: self.config.default_timeout_ms,
                    max_timeout_ms: self.config.max_timeout_ms,
                }));
            }
            Inbound::Ping { id } => self.reply(encode(&ServerFrame::Pong { id })),
            Inbound::Stats => self.reply(self.hub.stats_frame()),
            Inbound::Subscribe { client } => self.hub.run(|b, _, fx| b.subscribe(id, client, fx)),
            Inbound::Watch { client } => self.hub.run(|b, _, fx| b.watch(id, client, fx)),
            Inbound::AskUserRequest(req) => match ValidRequest::check(req) {
                Ok(req) => self.hub.run(|b, now, fx| b.ask(id, req, now, fx)),
                Err((cid, err)) => self.hub.run(|b, _, fx| b.reject(id, &cid, err, fx)),
            },
            Inbound::AskUserCancel { correlation_id } => self
                .hub
                .run(|b, now, fx| b.cancel(id, &correlation_id, now, fx)),
            Inbound::AskUserResponse(resp) => {
                self.hub.run(|b, now, fx| b.respond(id, resp, now, fx))
            }
        }
        Next::Continue
    }
}

async fn write_loop(
    wr: OwnedWriteHalf,
    mut inbox: Inbox,
    id: PeerId,
    hub: Arc<Hub>,
    cancel: CancellationToken,
) {
    let mut sink = FramedWrite::new(wr, codec(MAX_OUTBOUND_FRAME));
    loop {
        let first = tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            item = inbox.rx.recv() => item,
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        let mut written = 0;
        // Feed everything already queued, then flush once.
        while let Some(item) = next {
            match item {
                Out::Frame(frame) => {
                    let len = frame.len();
                    let fed = tokio::select! {
                        biased;
                        _ = cancel.cancelled() => return,
                        r = sink.feed(frame) => r,
                    };
                    if fed.is_err() {
                        return;
                    }
                    inbox.written(len);
                    written += 1;
                }
                Out::Replay => hub.replay(id),
            }
            next = inbox.rx.try_recv().ok();
        }
        let flushed = tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            r = SinkExt::<bytes::Bytes>::flush(&mut sink) => r,
        };
        if flushed.is_err() {
            return;
        }
        hub.counters
            .frames_out
            .fetch_add(written, std::sync::atomic::Ordering::Relaxed);
    }
    let _ = SinkExt::<bytes::Bytes>::flush(&mut sink).await;
    let _ = shutdown_write(sink.into_inner()).await;
}

async fn shutdown_write(mut wr: OwnedWriteHalf) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    wr.shutdown().await
}

/// Refuses a connection before it is served: one error frame, then close.
pub async fn refuse(stream: UnixStream, err: &FrameError) {
    let (mut rd, wr) = stream.into_split();
    let mut sink = FramedWrite::new(wr, codec(MAX_OUTBOUND_FRAME));
    let send = sink.send(encode(&ServerFrame::error(err)));
    if tokio::time::timeout(LINGER, send).await.is_ok() {
        let _ = shutdown_write(sink.into_inner()).await;
        discard_until_eof(&mut rd).await;
    }
}
