//! `askbus web`: answer the agents' questions from a browser. An HTTP server (axum) that serves
//! an embedded page and a WebSocket under a per-server random directory (`/<sid>/`); each open
//! tab is a live UI of the daemon (`bridge`). Every request passes the Host/Origin checks of
//! `auth` first; the page's routes need a session (opened with a one-time code, see `auth`),
//! the signed-link routes (`signed`) their token. See `README.md` beside this file for the
//! security model and how to reach it from a phone.

mod assets;
mod auth;
mod bridge;
mod history;
mod signed;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State, WebSocketUpgrade};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::io::BufRead;
use tokio::sync::watch;

use auth::{Policy, Session, Sessions};
use bridge::Bridge;

/// The flags of `askbus web` (its help text is on the subcommand, in `main.rs`).
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// Address and port to serve on; port 0 picks a free one
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7870")]
    listen: SocketAddr,
    /// Allow a --listen address that other machines can reach (plain HTTP: anyone on the
    /// path can read the questions and take a session)
    #[arg(long)]
    allow_remote: bool,
    /// Also accept the page from ORIGIN, e.g. https://askbus.example.com for a TLS reverse
    /// proxy in front; repeatable
    #[arg(long = "origin", value_name = "ORIGIN")]
    origins: Vec<String>,
    /// Open the page in the default browser (the opener is given a one-time sign-in code,
    /// dead once used, never a lasting secret)
    #[arg(long)]
    open: bool,
    /// How long a sign-in code stays usable (it also ends at its first use)
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    code_ttl: Duration,
    /// The key that checks signed links (`askbus notify`'s one-tap answers) [default:
    /// web-links.key beside the socket, made on first use]
    #[arg(long, value_name = "FILE")]
    link_key: Option<PathBuf>,
}

struct App {
    policy: Policy,
    sessions: Sessions,
    bridge: Bridge,
    links: signed::Links,
    /// `http://127.0.0.1:PORT` (or the address it listens on): sign-in links start with it.
    base: String,
}

impl App {
    /// A fresh sign-in link: the server's root, a one-time code.
    fn login_link(&self) -> Result<String> {
        let code = self
            .sessions
            .new_code()
            .context("cannot read the OS's random source")?;
        Ok(format!("{}/login?code={code}", self.base))
    }

    /// Prints a fresh sign-in link, and how to get the next one.
    fn print_login_link(&self) {
        match self.login_link() {
            Ok(link) => {
                println!(
                    "Sign in with this link (single use, valid {}; press Enter here for another):",
                    humantime::format_duration(self.sessions.code_ttl())
                );
                println!("  {link}");
            }
            Err(e) => eprintln!("askbus web: {e:#}"),
        }
    }
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
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let policy = Policy::new(args.allow_remote, extra);
    let sessions =
        Sessions::new(addr.port(), args.code_ttl).context("cannot read the OS's random source")?;
    let (stop, stopping) = watch::channel(false);

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
    let app = Arc::new(App {
        policy,
        sessions,
        bridge: Bridge {
            socket: socket.clone(),
            stopping,
        },
        links: signed::Links::new(
            crate::links::key_path(args.link_key.as_deref(), &socket),
            socket.clone(),
        ),
        base: format!("http://{local}"),
    });
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
    app.print_login_link();
    if addr.ip().is_unspecified() {
        println!(
            "From another machine, use this machine's address instead of {}.",
            local.ip()
        );
    }
    // Serving starts either way (the page reconnects), but whoever started it hears now
    // that no question can arrive yet.
    if let Err(e) = askbus::client::Connection::connect(&socket).await {
        let (text, _) = crate::fail::report(&e.into());
        eprintln!(
            "askbus web: {text}\nThe page says so and shows the questions once askbusd is up."
        );
    }
    if args.open {
        // Its own code: the one printed stays good for the person at the terminal.
        match app.login_link().and_then(|link| opener_file(&link)) {
            Ok(file) => {
                if let Err(e) = open::that_detached(&file) {
                    // The opener's own error is Rust debug text ("ExitStatus(…)").
                    let why = match e.kind() {
                        std::io::ErrorKind::NotFound => "no opener such as xdg-open is installed",
                        _ => "the system's opener (xdg-open or the like) failed",
                    };
                    eprintln!("askbus web: cannot open a browser: {why}; open the link above");
                }
            }
            Err(e) => eprintln!("askbus web: {e:#}"),
        }
    }
    tokio::spawn(new_codes(app.clone()));

    // The page's directory: routes written out whole (a nested "/" would not match "/<sid>/").
    let sid = app.sessions.sid().to_owned();
    let at = |rest: &str| format!("/{sid}/{rest}");
    let page = Router::new()
        .route(&at(""), get(index))
        .route(&at("assets/{name}"), get(asset))
        .route(&at("ws"), get(websocket))
        .route(&at("history"), get(history::history))
        .route(&at("logout"), post(logout))
        .route_layer(middleware::from_fn_with_state(app.clone(), signed_in));
    let router = Router::new()
        .route("/login", get(login_redirect))
        .route(&at("login"), get(login))
        .merge(page)
        .route("/a/{token}", get(signed::confirm_page).post(signed::answer))
        .route("/o/{token}", get(signed::open))
        .route("/links.css", get(links_css))
        .fallback(unknown_page)
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

/// A page that sends the browser on to `link`, in a fresh directory only this user can enter
/// (mode 0700, the file 0600; under `$XDG_RUNTIME_DIR`, else the temporary directory): the
/// opener is given this file's path, never the code, because every local user can read every
/// process's command line (`/proc/PID/cmdline`). Jupyter opens its browser the same way.
fn opener_file(link: &str) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let mut tag = [0u8; 8];
    getrandom::fill(&mut tag).context("cannot read the OS's random source")?;
    let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    let dir = base.join(format!("askbus-web-open-{tag}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot make {}", dir.display()))?;
    let file = dir.join("open.html");
    let html = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={link}\">\
         <title>askbus web</title><p><a href=\"{link}\">Open askbus web</a></p>\n"
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file)
        .with_context(|| format!("cannot write {}", file.display()))?;
    f.write_all(html.as_bytes())?;
    Ok(file)
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

/// Every request passes here first: Host and Origin. The refusals say nothing about what is
/// pending.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let signed_link = req.uri().path().starts_with("/a/");
    let mut resp = match app.policy.site(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(why) => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.to_string())
                .unwrap_or_default();
            eprintln!(
                "askbus web: refused {} {} from {peer}: {why} (Host {}, Origin {})",
                req.method(),
                crate::term::sanitize(&short_path(req.uri().path())),
                header_text(req.headers().get(header::HOST)),
                header_text(req.headers().get(header::ORIGIN)),
            );
            page(
                StatusCode::FORBIDDEN,
                &format!("Forbidden: {why}. If askbus web is behind a reverse proxy, start it with --origin and the public address."),
            )
        }
    };
    assets::security_headers(resp.headers_mut());
    if signed_link {
        // The confirmation page's one button is a form posting to the page's own URL.
        resp.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(assets::CSP_FORM),
        );
    }
    resp
}

/// A path as logged: a signed link's token is cut (it may still be good).
fn short_path(path: &str) -> String {
    match path.get(..3) {
        Some("/a/" | "/o/") => format!("{}…", &path[..3]),
        _ => path.to_owned(),
    }
}

/// The page's routes: only for a signed-in browser. Its session goes with the request, so the
/// WebSocket can close when it is signed out.
async fn signed_in(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    match app.sessions.session(req.headers()) {
        Some((secret, session)) => {
            req.extensions_mut().insert(SessionRef { secret, session });
            next.run(req).await
        }
        None => unauthorized(),
    }
}

#[derive(Clone)]
struct SessionRef {
    secret: String,
    session: Arc<Session>,
}

/// 401: not signed in (or no longer).
fn unauthorized() -> Response {
    page(
        StatusCode::UNAUTHORIZED,
        "This is askbus web. You are not signed in (or were signed out, or askbus web restarted). \
         Open a sign-in link: press Enter in the terminal where askbus web runs for a new one, \
         or send it SIGUSR1 (kill -USR1 PID) and read its output.",
    )
}

/// Any path outside the page's directory: how to get in.
async fn unknown_page() -> Response {
    unauthorized()
}

/// `GET /login?code=…`: the printed link. Sends the browser on to the page's directory with
/// the code still unused, so the cookie the next step sets is scoped to that directory. Only a
/// live code learns where that directory is: the directory is what keeps the session cookie
/// from every other server on this host (cookies ignore ports), so it is as secret as a code.
async fn login_redirect(State(app): State<Arc<App>>, uri: Uri) -> Response {
    match auth::query_param(uri.query(), "code").map(|c| app.sessions.check_code(&c)) {
        Some(Ok(())) => {
            let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
            redirect(&format!("./{}/login{query}", app.sessions.sid()))
        }
        Some(Err(e)) => code_refused(&app, e),
        None => unauthorized(),
    }
}

fn code_refused(app: &App, e: auth::CodeError) -> Response {
    page(
        StatusCode::UNAUTHORIZED,
        &format!(
            "{}. Sign-in links work once and for {}: press Enter in the terminal where \
             askbus web runs for a new one (or send it SIGUSR1).",
            capitalized(&e.to_string()),
            humantime::format_duration(app.sessions.code_ttl())
        ),
    )
}

/// `GET /<sid>/login?code=…[&q=ID]`: uses the code up, opens a session, and sends the browser
/// to the page (on question ID) with the code gone from the address bar and the history.
async fn login(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let Some(code) = auth::query_param(uri.query(), "code") else {
        return unauthorized();
    };
    match app.sessions.redeem(&code) {
        Ok(secret) => {
            let fragment = auth::query_param(uri.query(), "q")
                .map(|id| format!("#q={}", auth::percent_encode(&id)))
                .unwrap_or_default();
            let mut r = redirect(&format!("./{fragment}"));
            let cookie = app.sessions.login_cookie(&secret, &headers);
            r.headers_mut().insert(
                header::SET_COOKIE,
                HeaderValue::from_str(&cookie).expect("ascii"),
            );
            r
        }
        Err(e) => code_refused(&app, e),
    }
}

/// `POST /<sid>/logout`: signs this browser out; `?all=1` signs out every session (every
/// device) and voids the unused codes.
async fn logout(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    axum::Extension(me): axum::Extension<SessionRef>,
) -> Response {
    debug_assert_eq!(method, Method::POST);
    let all = auth::query_param(uri.query(), "all").is_some_and(|v| v == "1");
    let text = if all {
        let n = app.sessions.revoke_all();
        println!("askbus web: signed out everywhere ({n} sessions), at a page's request");
        "Signed out everywhere."
    } else {
        app.sessions.revoke(&me.secret);
        "Signed out."
    };
    let mut r = page(StatusCode::OK, text);
    let cookie = app.sessions.logout_cookie(&headers);
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).expect("ascii"),
    );
    r
}

/// A 303 to `location` (relative, so that a reverse proxy serving under a prefix keeps it).
fn redirect(location: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    r.headers_mut().insert(
        header::LOCATION,
        HeaderValue::from_str(location).expect("a URL-safe location"),
    );
    r
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// New sign-in links on demand: a line on stdin (Enter, where askbus web runs in a terminal,
/// an SSH session included) or SIGUSR1 prints one; SIGHUP signs every session out first.
async fn new_codes(app: Arc<App>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut usr1), Ok(mut hup)) = (
        signal(SignalKind::user_defined1()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    // Lines are read on a thread of their own: a blocking read in the runtime's pool would
    // hold up the exit on SIGTERM while stdin stays open.
    let (line_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if line.is_err() || line_tx.send(()).is_err() {
                return;
            }
        }
    });
    let mut stdin_open = true;
    loop {
        tokio::select! {
            line = lines.recv(), if stdin_open => match line {
                Some(()) => app.print_login_link(),
                // No terminal (a service, /dev/null): the signals remain.
                None => stdin_open = false,
            },
            _ = usr1.recv() => app.print_login_link(),
            _ = hup.recv() => {
                let n = app.sessions.revoke_all();
                println!("askbus web: SIGHUP: signed out every session ({n}) and voided unused links");
                app.print_login_link();
            }
        }
    }
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

/// The signed-link pages' stylesheet: the page's own (no secret in it), outside the session.
async fn links_css() -> Response {
    match assets::find("style.css") {
        Some(a) => serve(a),
        None => not_found().await,
    }
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
    axum::Extension(me): axum::Extension<SessionRef>,
    Query(q): Query<WsQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let revoked = me.session.revoked.clone();
    let filter = bridge::filter(q.project, q.agent, q.session, q.node);
    // An answer never needs more than the daemon accepts in one frame.
    ws.max_message_size(askbus::protocol::DEFAULT_MAX_FRAME_BYTES)
        .on_upgrade(move |socket| async move {
            bridge::tab(socket, &app.bridge, peer, filter, revoked).await
        })
}
