//! The `/metrics` HTTP endpoint, on a loopback TCP address or a Unix socket: it renders the
//! hub's registry with the hub's counts at each scrape.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;

use crate::hub::Hub;
use crate::metrics::MetricsListen;
use crate::paths::{prepare_socket_path, SocketPathError};

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(transparent)]
    SocketPath(#[from] SocketPathError),
    #[error("cannot listen for metrics on {listen}: {source}")]
    Bind {
        listen: MetricsListen,
        source: std::io::Error,
    },
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// A bound `/metrics` endpoint, ready to `serve`.
pub struct MetricsServer {
    listener: Listener,
    listen: MetricsListen,
}

impl MetricsServer {
    /// Binds `listen`. A Unix socket is created 0660 (the daemon's group may scrape it),
    /// under the same rules as the main socket. Must be called inside a tokio runtime.
    pub fn bind(listen: &MetricsListen) -> Result<MetricsServer, MetricsError> {
        let bind_err = |source| MetricsError::Bind {
            listen: listen.clone(),
            source,
        };
        let listener = match listen {
            MetricsListen::Tcp(addr) => {
                let l = std::net::TcpListener::bind(addr).map_err(bind_err)?;
                l.set_nonblocking(true).map_err(bind_err)?;
                Listener::Tcp(TcpListener::from_std(l).map_err(bind_err)?)
            }
            MetricsListen::Unix(path) => {
                prepare_socket_path(path)?;
                // SAFETY: umask only swaps the process's file mode mask.
                let old = unsafe { libc::umask(0o117) };
                let bound = std::os::unix::net::UnixListener::bind(path);
                unsafe { libc::umask(old) };
                let l = bound.map_err(bind_err)?;
                l.set_nonblocking(true).map_err(bind_err)?;
                Listener::Unix(UnixListener::from_std(l).map_err(bind_err)?)
            }
        };
        // The address actually bound (port 0 picks one).
        let listen = match (&listener, listen) {
            (Listener::Tcp(l), _) => MetricsListen::Tcp(l.local_addr().map_err(bind_err)?),
            (Listener::Unix(_), other) => other.clone(),
        };
        Ok(MetricsServer { listener, listen })
    }

    pub fn listen(&self) -> &MetricsListen {
        &self.listen
    }

    /// Serves `/metrics` until `stop`; removes the Unix socket it created.
    pub async fn serve(self, hub: Arc<Hub>, stop: CancellationToken) {
        loop {
            let served = match &self.listener {
                Listener::Tcp(l) => tokio::select! {
                    _ = stop.cancelled() => break,
                    r = l.accept() => r.map(|(s, _)| spawn_http(s, &hub)),
                },
                Listener::Unix(l) => tokio::select! {
                    _ = stop.cancelled() => break,
                    r = l.accept() => r.map(|(s, _)| spawn_http(s, &hub)),
                },
            };
            if let Err(e) = served {
                tracing::warn!(error = %e, "metrics accept failed; backing off");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        if let MetricsListen::Unix(path) = &self.listen {
            remove_socket(path);
        }
    }
}

fn remove_socket(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(error = %e, socket = %path.display(), "could not remove the metrics socket");
    }
}

fn spawn_http<S>(stream: S, hub: &Arc<Hub>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let hub = hub.clone();
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |req| {
            let hub = hub.clone();
            async move { Ok::<_, Infallible>(respond(&req, &hub)) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        // A scraper that stalls is dropped, not kept forever.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), conn).await;
    });
}

fn respond<B>(req: &Request<B>, hub: &Hub) -> Response<Full<Bytes>> {
    let reply = |status, text: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
            .body(Full::new(Bytes::from(text)))
            .expect("static response parts are valid")
    };
    if req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "askbusd serves /metrics only\n".into(),
        );
    }
    match *req.method() {
        Method::GET => reply(StatusCode::OK, hub.render_metrics()),
        Method::HEAD => reply(StatusCode::OK, String::new()),
        _ => {
            let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".into());
            r.headers_mut().insert(
                "allow",
                hyper::header::HeaderValue::from_static("GET, HEAD"),
            );
            r
        }
    }
}
