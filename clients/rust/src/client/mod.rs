//! The async Rust client: a raw frame `Connection`, a `Producer` whose `ask()` returns the
//! terminal response and whose `confirm()` asks a person to approve a tool call (several
//! requests may be in flight on one connection; it reconnects and resends across a daemon
//! restart), a `Ui` that yields questions and approvals and sends answers and decisions (split into
//! `UiEvents` and a cloneable `UiAnswerer` when both must happen at once), a `Watcher` that
//! observes the bus, and the reconnecting [`UiSubscription`] and [`WatchSubscription`]. Every
//! reconnection follows the one [`Backoff`] policy all askbus clients share.
//!
//! Here: errors, finding and connecting to the socket, the framed [`Connection`]; `producer`
//! and `confirm` are the asking side, `ui` and `watcher` the two kinds of subscriber,
//! `subscription` their reconnecting wrappers.

mod backoff;
mod confirm;
mod producer;
mod subscription;
mod ui;
mod watcher;

pub use backoff::Backoff;
pub use confirm::{Confirm, Confirmation, ConfirmationReason};
pub use producer::{Producer, ProducerOptions};
pub use subscription::{UiSubscription, UiUpdate, Update, WatchSubscription, WatchUpdate};
pub use ui::{Ui, UiAnswerer, UiEvent, UiEvents};
pub use watcher::Watcher;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use crate::protocol::{
    codec, encode, ClientFrame, Code, ErrorFrame, NoUiPolicy, RequestContext, ServerFrame,
    PROTOCOL_VERSION,
};

/// The longest frame a client accepts from the daemon. Daemon frames may exceed the daemon's
/// own inbound limit (a response repeats the answers in its result), so clients allow more.
pub const MAX_INBOUND_FRAME: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to askbusd at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("connection to askbusd failed")]
    Io(#[from] std::io::Error),
    #[error("askbusd closed the connection")]
    Closed,
    #[error("askbusd sent a frame this client cannot read: {0}")]
    Protocol(String),
    /// The daemon answered with an error frame.
    #[error("{}: {}", .0.code, .0.message)]
    Rejected(ErrorFrame),
    /// The socket is served by a daemon of another uid (see [`crate::trust`]).
    #[error(transparent)]
    Untrusted(#[from] crate::trust::UntrustedDaemon),
    /// A question's deadline passed while no daemon could be reached to take it.
    #[error("no askbusd at {path} took the question before its deadline")]
    Unreachable { path: PathBuf },
}

impl ClientError {
    /// The daemon's error code, when the daemon refused something.
    pub fn code(&self) -> Option<&Code> {
        match self {
            ClientError::Rejected(e) => Some(&e.code),
            _ => None,
        }
    }
}

/// The socket path when none is given, as the daemon and every client resolve it:
/// `$ASKBUS_SOCKET`, else `$XDG_RUNTIME_DIR/askbus.sock`, else `/run/askbus/askbus.sock` for
/// root, else `/tmp/askbus-<uid>/askbus.sock`.
pub fn default_socket_path() -> PathBuf {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(p) = env("ASKBUS_SOCKET") {
        return PathBuf::from(p);
    }
    if let Some(dir) = env("XDG_RUNTIME_DIR") {
        return Path::new(&dir).join("askbus.sock");
    }
    let uid = crate::trust::effective_uid();
    if uid == 0 {
        PathBuf::from("/run/askbus/askbus.sock")
    } else {
        PathBuf::from(format!("/tmp/askbus-{uid}/askbus.sock"))
    }
}

/// How long a connect refused for a full accept queue (`EAGAIN`) or a socket nobody listens
/// on for the moment (`ECONNREFUSED`, a daemon restarting) is retried.
pub const CONNECT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// `connect`, retried briefly (10 ms doubling to 200 ms, for [`CONNECT_RETRY`]) while the
/// daemon is too busy to accept (a flood of connections by another user fills its queue)
/// or restarting. A missing socket fails at once.
async fn connect_retrying(path: &Path) -> std::io::Result<UnixStream> {
    let deadline = tokio::time::Instant::now() + CONNECT_RETRY;
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        match UnixStream::connect(path).await {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::ConnectionRefused
                ) && tokio::time::Instant::now() + pause < deadline =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            r => return r,
        }
    }
}

/// A raw frame connection to the daemon.
pub struct Connection {
    reader: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    writer: FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>,
}

impl Connection {
    pub async fn connect(path: &Path) -> Result<Connection, ClientError> {
        let stream = connect_retrying(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.to_owned(),
                source,
            })?;
        crate::trust::check_daemon(&stream, path)?;
        let (rd, wr) = stream.into_split();
        Ok(Connection {
            reader: FramedRead::new(rd, codec(MAX_INBOUND_FRAME)),
            writer: FramedWrite::new(wr, codec(MAX_INBOUND_FRAME)),
        })
    }

    pub async fn send(&mut self, frame: &ClientFrame<'_>) -> Result<(), ClientError> {
        self.send_raw(encode(frame)).await
    }

    /// Sends a payload as is (tests and tools that speak raw JSON).
    pub async fn send_raw(&mut self, payload: Bytes) -> Result<(), ClientError> {
        match self.writer.send(payload).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.why_closed(e).await),
        }
    }

    /// A write failed: the daemon may have said why before it closed the connection (e.g.
    /// `forbidden`), and that is the error worth reporting.
    async fn why_closed(&mut self, err: std::io::Error) -> ClientError {
        let last_words = tokio::time::timeout(std::time::Duration::from_secs(1), self.recv()).await;
        match last_words {
            Ok(Ok(Some(ServerFrame::Error(e)))) => ClientError::Rejected(e),
            _ => ClientError::Io(err),
        }
    }

    /// The next frame, or `None` when the daemon closed the connection.
    pub async fn recv(&mut self) -> Result<Option<ServerFrame>, ClientError> {
        match self.reader.next().await {
            None => Ok(None),
            Some(Err(e)) => Err(e.into()),
            Some(Ok(payload)) => serde_json::from_slice(&payload)
                .map(Some)
                .map_err(|e| ClientError::Protocol(e.to_string())),
        }
    }

    /// `hello`, returning the daemon's `welcome` frame.
    pub async fn hello(&mut self, client: Option<&str>) -> Result<ServerFrame, ClientError> {
        self.send(&ClientFrame::Hello {
            protocol: PROTOCOL_VERSION,
            client,
            via: None,
        })
        .await?;
        match self.recv().await? {
            Some(ServerFrame::Error(e)) => Err(ClientError::Rejected(e)),
            Some(welcome @ ServerFrame::Welcome { .. }) => Ok(welcome),
            Some(other) => Err(ClientError::Protocol(format!(
                "expected welcome, got a {} frame",
                serde_json::to_value(&other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                    .unwrap_or_default()
            ))),
            None => Err(ClientError::Closed),
        }
    }

    /// The daemon's live counters.
    pub async fn stats(&mut self) -> Result<Map<String, Value>, ClientError> {
        self.send(&ClientFrame::Stats).await?;
        loop {
            match self.recv().await? {
                Some(ServerFrame::Stats(s)) => return Ok(s),
                Some(ServerFrame::Error(e)) => return Err(ClientError::Rejected(e)),
                Some(_) => continue,
                None => return Err(ClientError::Closed),
            }
        }
    }

    /// One page of the daemon's history (`history` frame): the records `filter` matches,
    /// newest first, at most `limit` (the daemon's default when `None`), after `cursor` (the
    /// previous page's); with the next page's cursor, `None` after the last. Only this uid's
    /// records unless it is an operator; a daemon without a store refuses it
    /// (`store-unavailable`).
    pub async fn history(
        &mut self,
        filter: &crate::protocol::HistoryFilter,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<(Vec<crate::history::HistoryRecord>, Option<String>), ClientError> {
        self.send(&ClientFrame::History {
            filter,
            limit,
            cursor,
        })
        .await?;
        loop {
            match self.recv().await? {
                Some(ServerFrame::History { records, cursor }) => {
                    let records = records
                        .into_iter()
                        .map(serde_json::from_value)
                        .collect::<Result<Vec<crate::history::HistoryRecord>, _>>()
                        .map_err(|e| ClientError::Protocol(format!("a history record: {e}")))?;
                    return Ok((records, cursor));
                }
                Some(ServerFrame::Error(e)) => return Err(ClientError::Rejected(e)),
                Some(_) => continue,
                None => return Err(ClientError::Closed),
            }
        }
    }

    pub(crate) fn into_split(
        self,
    ) -> (
        FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
        FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>,
    ) {
        (self.reader, self.writer)
    }
}

/// One question set to ask.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The `questions` array, as the ask_user tool takes it.
    pub questions: Value,
    /// Chosen by the client when `None`.
    pub correlation_id: Option<String>,
    pub timeout_ms: Option<u64>,
    pub no_ui: Option<NoUiPolicy>,
    /// Who is asking, about what; shown to UIs with the questions and used by their filters.
    pub context: Option<RequestContext>,
}

/// A correlationId unique across processes and time: pid, clock and a counter.
pub fn new_correlation_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos:x}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::task::Poll;

    use super::*;

    /// A Unix socket bound at `path` but not listening yet: a connect to it is refused
    /// (`ECONNREFUSED`), as while a daemon restarts, until `listen` runs.
    fn bound_not_listening(path: &Path) -> OwnedFd {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain socket(2)/bind(2) on a zeroed sockaddr_un whose path fits (checked).
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            let bytes = path.as_os_str().as_bytes();
            assert!(bytes.len() < addr.sun_path.len());
            for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
                *d = *s as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            let r = libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                len,
            );
            assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
            fd
        }
    }

    /// A refused connect is retried: the first attempt (made in the first poll) is refused,
    /// so a client without the retry would be done with an error there; this one waits, and
    /// connects once the socket listens. No timing: the order of events decides.
    #[tokio::test]
    async fn a_refused_connect_is_retried_until_the_daemon_listens() {
        let dir = std::env::temp_dir().join(format!("askbus-retry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("askbus.sock");
        let fd = bound_not_listening(&path);
        let mut attempt = Box::pin(connect_retrying(&path));
        let first = std::future::poll_fn(|cx| Poll::Ready(attempt.as_mut().poll(cx))).await;
        assert!(
            first.is_pending(),
            "a refused connect ended at once: {first:?}"
        );
        // SAFETY: listen(2) on the socket bound above.
        assert_eq!(unsafe { libc::listen(fd.as_raw_fd(), 16) }, 0);
        attempt.await.expect("connected once the socket listens");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A missing socket is not a daemon restarting: it fails at once, with no retry.
    #[tokio::test]
    async fn a_missing_socket_fails_at_once() {
        let path = std::env::temp_dir().join("askbus-no-such-dir-for-retry/askbus.sock");
        let mut attempt = Box::pin(connect_retrying(&path));
        let first = std::future::poll_fn(|cx| Poll::Ready(attempt.as_mut().poll(cx))).await;
        match first {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
            other => panic!("expected NotFound at once, got {other:?}"),
        }
    }
}
