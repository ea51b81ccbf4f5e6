//! The daemon: binds (or inherits) the listener, accepts connections within the limits and
//! the access rules, and shuts down in order: stop accepting, end every pending request with
//! `shutdown`, let connections flush, flush telemetry, remove the socket.

use std::future::Future;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::broker::{Limits, PeerInfo};
use crate::connection::{self, ConnectionConfig};
use crate::hub::Hub;
use crate::paths::{effective_uid, prepare_socket_path, SocketPathError};
use crate::protocol::{ErrorCode, FrameError, DEFAULT_MAX_FRAME_BYTES};
use crate::telemetry::{Counters, TelemetrySink, TelemetryWriter};

/// How long connections get to flush their last frames at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Everything the daemon is configured with.
#[derive(Debug, Clone)]
pub struct Config {
    pub socket: PathBuf,
    /// `None` disables telemetry.
    pub telemetry: Option<PathBuf>,
    pub limits: Limits,
    pub max_frame_bytes: usize,
    pub max_connections: usize,
    /// Unsent bytes a connection may have queued before it is dropped as not reading.
    pub max_queue_bytes: usize,
    /// Peers whose uid is listed may connect; the daemon's own uid and root always may.
    pub allowed_uids: Vec<u32>,
    /// How long a frame may take to arrive once it has started.
    pub frame_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: crate::paths::default_socket_path(),
            telemetry: Some(crate::paths::default_telemetry_path()),
            limits: Limits::default(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_connections: 4096,
            max_queue_bytes: 8 * 1024 * 1024,
            allowed_uids: Vec::new(),
            frame_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    SocketPath(#[from] SocketPathError),
    #[error("cannot bind {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open telemetry file {path}: {source}")]
    Telemetry {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A bound daemon, ready to `run`.
pub struct Daemon {
    config: Config,
    listener: UnixListener,
    /// Whether we created the socket file (and so remove it at exit).
    owns_socket: bool,
    hub: Arc<Hub>,
    telemetry: Option<TelemetryWriter>,
    sink: TelemetrySink,
}

impl Daemon {
    /// Binds the configured socket (mode 0600), refusing to replace anything but a stale
    /// socket. Must be called inside a tokio runtime.
    pub fn bind(config: Config) -> Result<Daemon, DaemonError> {
        prepare_socket_path(&config.socket)?;
        // The umask makes the socket 0600 from the moment it exists: no window in which
        // another user could connect before a chmod.
        // SAFETY: umask only swaps the process's file mode mask.
        let old = unsafe { libc::umask(0o177) };
        let bound = StdUnixListener::bind(&config.socket);
        unsafe { libc::umask(old) };
        let std_listener = bound.map_err(|source| DaemonError::Bind {
            path: config.socket.clone(),
            source,
        })?;
        Self::from_std(config, std_listener, true)
    }

    /// Serves an already-bound listener (e.g. inherited from systemd); `owns_socket` says
    /// whether to remove the socket file at exit.
    pub fn from_std(
        config: Config,
        std_listener: StdUnixListener,
        owns_socket: bool,
    ) -> Result<Daemon, DaemonError> {
        let bind_err = |source| DaemonError::Bind {
            path: config.socket.clone(),
            source,
        };
        std_listener.set_nonblocking(true).map_err(bind_err)?;
        let listener = UnixListener::from_std(std_listener).map_err(bind_err)?;
        let counters = Arc::new(Counters::default());
        let (telemetry, sink) = match &config.telemetry {
            Some(path) => {
                let (w, s) = TelemetryWriter::start(path, counters.clone()).map_err(|source| {
                    DaemonError::Telemetry {
                        path: path.clone(),
                        source,
                    }
                })?;
                (Some(w), s)
            }
            None => (None, TelemetrySink::disabled()),
        };
        let hub = Arc::new(Hub::new(
            config.limits.clone(),
            sink.clone(),
            counters,
            &node_name(),
        ));
        Ok(Daemon {
            config,
            listener,
            owns_socket,
            hub,
            telemetry,
            sink,
        })
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.config.socket
    }

    pub fn telemetry_path(&self) -> Option<&std::path::Path> {
        self.telemetry.as_ref().map(|t| t.path())
    }

    /// Serves until `shutdown` completes, then shuts down in order.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Daemon {
            config,
            listener,
            owns_socket,
            hub,
            telemetry,
            sink,
        } = self;
        let conn_config = Arc::new(ConnectionConfig {
            max_frame_bytes: config.max_frame_bytes,
            max_queue_bytes: config.max_queue_bytes,
            default_timeout_ms: config.limits.default_timeout_ms,
            max_timeout_ms: config.limits.max_timeout_ms,
            frame_timeout: config.frame_timeout,
        });
        let stop_timer = CancellationToken::new();
        let close = CancellationToken::new();
        let tracker = TaskTracker::new();
        let timer = tokio::spawn({
            let hub = hub.clone();
            let stop = stop_timer.clone();
            async move { hub.run_timer(stop).await }
        });
        let active = Arc::new(AtomicUsize::new(0));
        let next_id = AtomicU64::new(1);
        let own_uid = effective_uid();
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                r = listener.accept() => r,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors (or a transient failure): back off instead of spinning
                    // or exiting; connections that close free descriptors.
                    let emfile = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                    tracing::warn!(error = %e, "accept failed; backing off");
                    let pause = if emfile { 100 } else { 10 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                }
            };
            Counters::bump(&hub.counters.connections_total);
            let Some(info) = peer_info(&stream) else {
                continue;
            };
            let allowed =
                info.uid == own_uid || info.uid == 0 || config.allowed_uids.contains(&info.uid);
            if !allowed {
                Counters::bump(&hub.counters.connections_refused);
                tracing::warn!(
                    pid = info.pid,
                    uid = info.uid,
                    "connection refused: uid not allowed"
                );
                let err = FrameError::new(
                    ErrorCode::Forbidden,
                    format!("uid {} may not connect to this askbusd", info.uid),
                );
                hub.counters.count_error(err.code);
                tracker.spawn(async move { connection::refuse(stream, &err).await });
                continue;
            }
            if active.load(Ordering::Relaxed) >= config.max_connections {
                Counters::bump(&hub.counters.connections_refused);
                tracing::warn!(
                    pid = info.pid,
                    uid = info.uid,
                    limit = config.max_connections,
                    "connection refused: too many connections"
                );
                let err = FrameError::new(
                    ErrorCode::TooManyConnections,
                    format!(
                        "the daemon already serves {} connections",
                        config.max_connections
                    ),
                );
                hub.counters.count_error(err.code);
                tracker.spawn(async move { connection::refuse(stream, &err).await });
                continue;
            }
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            active.fetch_add(1, Ordering::Relaxed);
            let (hub, cfg, close, active) = (
                hub.clone(),
                conn_config.clone(),
                close.clone(),
                active.clone(),
            );
            tracker.spawn(async move {
                tracing::debug!(peer = id, pid = info.pid, uid = info.uid, "connected");
                connection::serve(stream, id, info, hub, cfg, close).await;
                active.fetch_sub(1, Ordering::Relaxed);
                tracing::debug!(peer = id, "disconnected");
            });
        }
        drop(listener);
        let (pending, uis) = hub.counts();
        tracing::info!(pending, uis, "shutting down");
        hub.shutdown();
        close.cancel();
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not drain in time; closing them");
        }
        stop_timer.cancel();
        let _ = timer.await;
        // Flush on a blocking thread: the writer thread may be busy with a backlog.
        let _ = tokio::task::spawn_blocking(move || sink.flush_blocking()).await;
        drop(telemetry);
        if owns_socket {
            // remove_file never follows a symlink; we only remove what we bound.
            if let Err(e) = std::fs::remove_file(&config.socket) {
                tracing::warn!(error = %e, socket = %config.socket.display(), "could not remove socket");
            }
        }
        tracing::info!("stopped");
    }
}

fn peer_info(stream: &UnixStream) -> Option<PeerInfo> {
    match stream.peer_cred() {
        Ok(cred) => Some(PeerInfo {
            client: None,
            pid: cred.pid(),
            uid: cred.uid(),
            gid: cred.gid(),
        }),
        Err(e) => {
            tracing::warn!(error = %e, "no peer credentials; dropping connection");
            None
        }
    }
}

/// This machine's name, for telemetry records (room for several federated daemons).
pub fn node_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
