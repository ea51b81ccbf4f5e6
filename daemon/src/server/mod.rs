//! The daemon: binds (or inherits) the listener, accepts connections within the limits and
//! the access rules, and shuts down in order: stop accepting, end every pending request with
//! `shutdown`, let connections flush, flush telemetry, remove the socket. The `/metrics`
//! endpoint is its other listener, in `metrics` (started and stopped with the daemon).

use std::future::Future;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod metrics;

pub use metrics::{MetricsError, MetricsServer};

use crate::access::{peer_groups, AccessRules, UidConnections};
use crate::broker::{PeerInfo, Rights};
use crate::config::DaemonConfig;
use crate::connection::{self, ConnError, ConnectionConfig};
use crate::hub::Hub;
use crate::metrics::MetricsListen;
use crate::paths::{prepare_socket_path, SocketPathError};
use crate::store::Store;
use crate::telemetry::{Counters, TelemetrySink, TelemetryWriter};

/// How long connections get to flush their last frames at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

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
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// What a reload may change while connections stay up; new connections take the current one.
#[derive(Debug)]
struct Live {
    access: AccessRules,
    max_connections: usize,
    max_connections_per_uid: usize,
    conn: Arc<ConnectionConfig>,
}

impl Live {
    fn of(config: &DaemonConfig) -> Live {
        Live {
            access: config.access.clone(),
            max_connections: config.max_connections,
            max_connections_per_uid: config.max_connections_per_uid,
            conn: Arc::new(ConnectionConfig {
                max_frame_bytes: config.max_frame_bytes,
                max_queue_bytes: config.max_queue_bytes,
                default_timeout_ms: config.limits.default_timeout_ms,
                max_timeout_ms: config.limits.max_timeout_ms,
                frame_timeout: config.frame_timeout,
            }),
        }
    }
}

/// Applies a new configuration to a running daemon (SIGHUP).
#[derive(Clone)]
pub struct Control {
    hub: Arc<Hub>,
    live: Arc<RwLock<Arc<Live>>>,
    /// What the daemon was started with: the keys only a restart can change.
    started: Arc<DaemonConfig>,
}

impl Control {
    /// New limits and timeouts apply to requests from now on, new access rules to every
    /// connected peer at once, connection limits and frame/queue sizes to new connections.
    /// Returns the keys that changed but take a restart (the listening sockets, telemetry).
    pub fn apply(&self, config: &DaemonConfig) -> Vec<&'static str> {
        self.hub.set_limits(config.limits.clone());
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Live::of(config));
        let rules = config.access.clone();
        self.hub.update_rights(|info| rules.rights(info));
        let mut restart = Vec::new();
        if config.socket != self.started.socket {
            restart.push("socket");
        }
        if config.telemetry != self.started.telemetry
            || config.telemetry_group != self.started.telemetry_group
        {
            restart.push("telemetry");
        }
        if config.metrics_listen != self.started.metrics_listen {
            restart.push("metrics_listen");
        }
        // What is shared and which nodes are shown changes at once; the connection itself,
        // and whether remote questions are read at all (a subscription), take a restart.
        match (&config.federation, &self.started.federation) {
            (Some(new), Some(old)) => {
                self.hub.set_fed_policy(
                    crate::federation::config::FederationConfig {
                        accept: old.accept,
                        ..new.clone()
                    }
                    .policy(),
                );
                let same_link = crate::federation::config::FederationConfig {
                    share: old.share,
                    share_users: old.share_users.clone(),
                    accept_nodes: old.accept_nodes.clone(),
                    ..new.clone()
                };
                if &same_link != old {
                    restart.push("federation");
                }
            }
            (None, None) => {}
            _ => restart.push("nats"),
        }
        restart
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }
}

/// A bound daemon, ready to `run`.
pub struct Daemon {
    config: DaemonConfig,
    listener: UnixListener,
    /// Whether we created the socket file (and so remove it at exit).
    owns_socket: bool,
    hub: Arc<Hub>,
    telemetry: Option<TelemetryWriter>,
    sink: TelemetrySink,
    metrics: Option<MetricsServer>,
    live: Arc<RwLock<Arc<Live>>>,
    /// The store, unless `--no-store`.
    store: Option<Arc<Store>>,
}

impl Daemon {
    /// Binds the configured socket (mode 0600), refusing to replace anything but a stale
    /// socket. Must be called inside a tokio runtime.
    pub fn bind(config: DaemonConfig) -> Result<Daemon, DaemonError> {
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
        config: DaemonConfig,
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
                let (w, s) = TelemetryWriter::start(path, config.telemetry_group, counters.clone())
                    .map_err(|source| DaemonError::Telemetry {
                        path: path.clone(),
                        source,
                    })?;
                (Some(w), s)
            }
            None => (None, TelemetrySink::disabled()),
        };
        let metrics = config
            .metrics_listen
            .as_ref()
            .map(MetricsServer::bind)
            .transpose()?;
        let node = match &config.federation {
            Some(f) => f.node.clone(),
            None => node_name(),
        };
        let hub = Arc::new(Hub::new(
            config.limits.clone(),
            sink.clone(),
            counters,
            &node,
        ));
        let store = match &config.store {
            Some(opts) => {
                let store = Arc::new(Store::open(opts)?);
                hub.attach_store(store.clone(), config.resume_grace);
                Some(store)
            }
            None => None,
        };
        let live = Arc::new(RwLock::new(Arc::new(Live::of(&config))));
        Ok(Daemon {
            store,
            config,
            listener,
            owns_socket,
            hub,
            telemetry,
            sink,
            metrics,
            live,
        })
    }

    /// The handle that reloads this daemon's configuration.
    pub fn control(&self) -> Control {
        Control {
            hub: self.hub.clone(),
            live: self.live.clone(),
            started: Arc::new(self.config.clone()),
        }
    }

    /// Where `/metrics` is served (with the port actually bound).
    pub fn metrics_listen(&self) -> Option<&MetricsListen> {
        self.metrics.as_ref().map(|m| m.listen())
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
            store,
            config,
            listener,
            owns_socket,
            hub,
            telemetry,
            sink,
            metrics,
            live,
        } = self;
        let stop_timer = CancellationToken::new();
        let close = CancellationToken::new();
        let tracker = TaskTracker::new();
        let timer = tokio::spawn({
            let hub = hub.clone();
            let stop = stop_timer.clone();
            async move { hub.run_timer(stop).await }
        });
        let trimmer = tokio::spawn({
            let hub = hub.clone();
            let stop = stop_timer.clone();
            async move { hub.trim_when_quiet(stop).await }
        });
        let stop_metrics = CancellationToken::new();
        let metrics = metrics.map(|m| tokio::spawn(m.serve(hub.clone(), stop_metrics.clone())));
        let releaser = store.as_ref().map(|store| {
            let hub = hub.clone();
            let committed = store.committed();
            tokio::spawn(async move { hub.follow_store(committed).await })
        });
        let active = Arc::new(AtomicUsize::new(0));
        let per_uid = Arc::new(UidConnections::default());
        let next_id = AtomicU64::new(1);
        let mut refusal_log = RateLimited::default();
        // Closed to accept (and refuse) one connection when descriptors run out.
        let mut spare = std::fs::File::open("/dev/null").ok();
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
                    if emfile {
                        // Answer (not leave hanging) the connection waiting in the queue,
                        // with the descriptor kept spare for this.
                        drop(spare.take());
                        answer_with_spare(&listener, hub.counters.as_ref());
                        spare = std::fs::File::open("/dev/null").ok();
                    }
                    let now = Instant::now();
                    refusal_log.log(now, |suppressed| {
                        tracing::warn!(error = %e, suppressed, "accept failed; backing off")
                    });
                    let pause = if emfile { 100 } else { 10 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                }
            };
            Counters::bump(&hub.counters.connections_total);
            let Some(mut info) = peer_info(&stream) else {
                continue;
            };
            let live = live.read().unwrap_or_else(|e| e.into_inner()).clone();
            info.rights = live.access.rights(&info);
            let mut refuse = |stream: UnixStream, why: ConnError| {
                Counters::bump(&hub.counters.connections_refused);
                // A peer refused in a loop would write thousands of lines a second.
                refusal_log.log(Instant::now(), |suppressed| {
                    tracing::warn!(
                        pid = info.pid,
                        uid = info.uid,
                        suppressed,
                        "connection refused: {}",
                        why.summary()
                    )
                });
                let err = why.to_frame_error();
                hub.counters.count_error(err.code);
                connection::refuse_now(&stream, &err);
            };
            if !AccessRules::may_connect(info.rights) {
                refuse(stream, ConnError::Forbidden { uid: info.uid });
                continue;
            }
            if active.load(Ordering::Relaxed) >= live.max_connections {
                let limit = live.max_connections;
                refuse(stream, ConnError::TooManyConnections { limit });
                continue;
            }
            let Some(slot) = per_uid.acquire(info.uid, live.max_connections_per_uid) else {
                let (uid, limit) = (info.uid, live.max_connections_per_uid);
                refuse(stream, ConnError::TooManyForUid { uid, limit });
                continue;
            };
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            active.fetch_add(1, Ordering::Relaxed);
            let (hub, cfg, close, active) = (
                hub.clone(),
                live.conn.clone(),
                close.clone(),
                active.clone(),
            );
            tracker.spawn(async move {
                tracing::debug!(peer = id, pid = info.pid, uid = info.uid, "connected");
                connection::serve(stream, id, info, hub, cfg, close).await;
                drop(slot);
                active.fetch_sub(1, Ordering::Relaxed);
                tracing::debug!(peer = id, "disconnected");
            });
        }
        drop(listener);
        let (pending, uis) = hub.counts();
        tracing::info!(pending, uis, "shutting down");
        if store.is_none() {
            hub.shutdown();
        }
        // With a store, pending requests stay pending: connections close without a terminal
        // frame, and a restarted daemon takes them up again.
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
        if let Some(store) = store {
            // Everything queued is committed before the process exits.
            let _ = tokio::task::spawn_blocking(move || store.close()).await;
            if let Some(r) = releaser {
                let _ = r.await;
            }
        }
        let _ = trimmer.await;
        // Flush on a blocking thread: the writer thread may be busy with a backlog.
        let _ = tokio::task::spawn_blocking(move || sink.flush_blocking()).await;
        drop(telemetry);
        stop_metrics.cancel();
        if let Some(m) = metrics {
            let _ = m.await;
        }
        if owns_socket {
            // remove_file never follows a symlink; we only remove what we bound.
            if let Err(e) = std::fs::remove_file(&config.socket) {
                tracing::warn!(error = %e, socket = %config.socket.display(), "could not remove socket");
            }
        }
        tracing::info!("stopped");
    }
}

/// At most one log line a second for a kind of event that a peer can cause in a loop; the
/// next line says how many were left out (`suppressed`).
#[derive(Default)]
struct RateLimited {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    fn log(&mut self, now: Instant, line: impl FnOnce(u64)) {
        match self.last {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => self.suppressed += 1,
            _ => {
                line(self.suppressed);
                self.suppressed = 0;
                self.last = Some(now);
            }
        }
    }
}

/// Accepts one queued connection with the descriptor just freed and refuses it with
/// `too-many-connections`, so a client waiting in the queue while the daemon is out of
/// descriptors is answered at once instead of hanging.
fn answer_with_spare(listener: &UnixListener, counters: &Counters) {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: accept4 on our listening descriptor; the new descriptor is owned below.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if fd < 0 {
        return;
    }
    // SAFETY: `fd` is a freshly accepted socket nobody else owns.
    let std_stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    let Ok(stream) = UnixStream::from_std(std_stream) else {
        return;
    };
    Counters::bump(&counters.connections_total);
    Counters::bump(&counters.connections_refused);
    let err = ConnError::OutOfDescriptors.to_frame_error();
    counters.count_error(err.code);
    connection::refuse_now(&stream, &err);
}

fn peer_info(stream: &UnixStream) -> Option<PeerInfo> {
    match stream.peer_cred() {
        Ok(cred) => Some(PeerInfo {
            client: None,
            pid: cred.pid(),
            uid: cred.uid(),
            gid: cred.gid(),
            groups: peer_groups(stream),
            rights: Rights::default(),
        }),
        Err(e) => {
            tracing::warn!(error = %e, "no peer credentials; dropping connection");
            None
        }
    }
}

/// This machine's name, for telemetry records (room for several federated daemons).
pub fn node_name() -> String {
    crate::federation::config::host_name()
}
