//! `askbus web`: answer the agents' questions from a browser. An HTTP server (axum) that serves
//! an embedded page and a WebSocket; each open tab is a live UI of the daemon (`bridge`), and
//! every request passes the access checks of `auth` first. See `README.md` beside this file
//! for the security model and how to reach it from a phone.

mod assets;
mod auth;
mod bridge;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State, WebSocketUpgrade};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use auth::{Policy, Token, Verdict};
use bridge::Bridge;

/// The flags of `askbus web` (its help text is on the subcommand, in `main.rs`).
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// Address and port to serve on; port 0 picks a free one
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7870")]
    listen: SocketAddr,
    /// Allow a --listen address that other machines can reach (plain HTTP: anyone on the
    /// path can read the questions and the token)
    #[arg(long)]
    allow_remote: bool,
    /// Also accept the page from ORIGIN, e.g. https://askbus.example.com for a TLS reverse
    /// proxy in front; repeatable
    #[arg(long = "origin", value_name = "ORIGIN")]
    origins: Vec<String>,
    /// Open the page in the default browser
    #[arg(long)]
    open: bool,
}

struct App {
    policy: Policy,
    bridge: Bridge,
}

pub async fn run(args: WebArgs, socket: PathBuf) -> Result<ExitCode> {
    let extra = args
        .origins
        .iter()
        .map(|o| auth::parse_origin(o))
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)?;
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        bail!(
            "refusing to listen on {} without --allow-remote: other machines could reach it. \
             To answer from a phone, prefer an SSH tunnel or a TLS reverse proxy to 127.0.0.1 \
             (see `askbus web --help`)",
            args.listen
        );
    }
    let token = Token::generate().context("cannot read the OS's random source")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let policy = Policy::new(token, addr.port(), args.allow_remote, extra);
    let (stop, stopping) = watch::channel(false);
    let app = Arc::new(App {
        policy,
        bridge: Bridge {
            socket: socket.clone(),
            stopping,
        },
    });

    let local = if addr.ip().is_unspecified() {
        SocketAddr::new(
            if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            },
            addr.port(),
        )
    } else {
        addr
    };
    let link = format!("http://{local}/?token={}", app.policy.token().as_str());
    if !addr.ip().is_loopback() {
        eprintln!(
            "askbus web: WARNING: listening on {addr}, reachable from other machines over plain \
             HTTP: anyone who can see the traffic can read the questions and take the token. \
             Prefer an SSH tunnel, or a reverse proxy with TLS in front of 127.0.0.1."
        );
    }
    println!(
        "askbus web: serving the questions of askbusd at {} on http://{local}/",
        socket.display()
    );
    println!("Open this link (it carries the access token: keep it to yourself):");
    println!("  {link}");
    if addr.ip().is_unspecified() {
        println!(
            "From another machine, use this machine's address instead of {}.",
            local.ip()
        );
    }
    // Serving starts either way (the page reconnects), but whoever started it hears now
    // that no question can arrive yet.
    if let Err(e) = askbusd::client::Connection::connect(&socket).await {
        let (text, _) = crate::fail::report(&e.into());
        eprintln!(
            "askbus web: {text}\nThe page says so and shows the questions once askbusd is up."
        );
    }
    if args.open {
        if let Err(e) = open::that_detached(&link) {
            // The opener's own error is Rust debug text ("ExitStatus(unix_wait_status(768))").
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no opener such as xdg-open is installed",
                _ => "the system's opener (xdg-open or the like) failed",
            };
            eprintln!("askbus web: cannot open a browser: {why}; open the link above");
        }
    }

    let router = Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
        .route("/ws", get(websocket))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        stopped().await;
        let _ = stop.send(true);
    })
    .await
    .context("the web server failed")?;
    Ok(ExitCode::SUCCESS)
}

/// SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

/// Every request passes here first: Host, Origin, token. The refusals say nothing about
/// what is pending.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let verdict = app.policy.check(req.method(), req.uri(), req.headers());
    let mut resp = match verdict {
        Verdict::Allow => next.run(req).await,
        Verdict::Login { location } => {
            let cookie = app.policy.login_cookie(req.headers());
            let mut r = StatusCode::SEE_OTHER.into_response();
            let h = r.headers_mut();
            h.insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).expect("ascii"));
            h.insert(
                header::LOCATION,
                HeaderValue::from_str(&location).expect("ascii"),
            );
            r
        }
        Verdict::Forbidden(why) => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.to_string())
                .unwrap_or_default();
            eprintln!(
                "askbus web: refused {} {} from {peer}: {why} (Host {}, Origin {})",
                req.method(),
                crate::term::sanitize(req.uri().path()),
                header_text(req.headers().get(header::HOST)),
                header_text(req.headers().get(header::ORIGIN)),
            );
            page(
                StatusCode::FORBIDDEN,
                &format!("Forbidden: {why}. If askbus web is behind a reverse proxy, start it with --origin and the public address."),
            )
        }
        Verdict::Unauthorized => page(
            StatusCode::UNAUTHORIZED,
            "This is askbus web. Open the link that `askbus web` printed when it started: it carries the access token.",
        ),
    };
    assets::security_headers(resp.headers_mut());
    resp
}

/// A request header as a log line shows it: its text (made safe for a terminal), or "none".
fn header_text(v: Option<&HeaderValue>) -> String {
    match v {
        None => "none".into(),
        Some(v) => format!(
            "\"{}\"",
            crate::term::sanitize(&String::from_utf8_lossy(v.as_bytes()))
        ),
    }
}

/// A one-paragraph HTML page for refusals.
fn page(status: StatusCode, text: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>askbus web</title><p>{}</p>\n",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    serve(&assets::INDEX)
}

async fn asset(Path(name): Path<String>) -> Response {
    match assets::find(&name) {
        Some(a) => serve(a),
        None => not_found().await,
    }
}

async fn not_found() -> Response {
    page(StatusCode::NOT_FOUND, "Not found.")
}

fn serve(a: &'static assets::Asset) -> Response {
    ([(header::CONTENT_TYPE, a.content_type)], Body::from(a.body)).into_response()
}

/// The page's filter rides on the WebSocket's query (`/ws?project=P&agent=A`), so each tab
/// subscribes with its own (a tab's filter changes by reconnecting). Other keys (the token)
/// are not the bridge's business.
#[derive(Debug, serde::Deserialize)]
struct WsQuery {
    project: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    node: Option<String>,
}

async fn websocket(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<WsQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let filter = bridge::filter(q.project, q.agent, q.session, q.node);
    // An answer never needs more than the daemon accepts in one frame.
    ws.max_message_size(askbusd::protocol::DEFAULT_MAX_FRAME_BYTES)
        .on_upgrade(
            move |socket| async move { bridge::tab(socket, &app.bridge, peer, filter).await },
        )
}
