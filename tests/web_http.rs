//! `askbus web` over plain HTTP, against the real daemon: the token, the login link, the Host
//! and Origin checks on pages and on the WebSocket handshake, and the refusal to listen beyond
//! loopback without `--allow-remote`. (The page itself is tested in a browser: tests/web/.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{choice_request, cli_bin, Daemon};
use serde_json::json;

/// A running `askbus web` on a free loopback port.
struct Web {
    child: Child,
    port: u16,
    token: String,
}

impl Web {
    fn start(daemon: &Daemon) -> Web {
        let mut child = Command::new(cli_bin())
            .arg("--socket")
            .arg(&daemon.socket)
            .args(["web", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn askbus web");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        for line in out.lines() {
            let line = line.expect("read stdout");
            if let Some(link) = line.trim().strip_prefix("http://127.0.0.1:") {
                let (port, rest) = link.split_once('/').expect("a path");
                let token = rest.strip_prefix("?token=").expect("a token");
                return Web {
                    port: port.parse().expect("a port"),
                    token: token.to_owned(),
                    child,
                };
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("askbus web printed no link");
    }

    fn cookie(&self) -> String {
        format!("askbus-web-{}={}", self.port, self.token)
    }

    /// Sends `GET path` with `headers` (Host is added unless given) and returns the status
    /// and the whole response text (only the head for a 101).
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut req = format!("GET {path} HTTP/1.1\r\n");
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("connection"))
        {
            req += "Connection: close\r\n";
        }
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req += &format!("Host: 127.0.0.1:{}\r\n", self.port);
        }
        for (k, v) in headers {
            req += &format!("{k}: {v}\r\n");
        }
        req += "\r\n";
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(_) => break,
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
        (status, text)
    }

    fn upgrade(&self, headers: &[(&str, &str)]) -> (u16, String) {
        let mut all = vec![
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        all.extend_from_slice(headers);
        self.get("/ws", &all)
    }
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

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_request_needs_the_token_and_the_page_own_origin() {
    let daemon = Daemon::start();
    let rt = common::rt();
    let web = Web::start(&daemon);
    let marker = "MARKER-the-question-text";
    let mut producer = rt.block_on(daemon.connect());
    let mut req = choice_request("web-1");
    req["questions"][0]["question"] = json!(marker);
    rt.block_on(producer.send(req));

    for path in [
        "/",
        "/assets/app.js",
        "/assets/style.css",
        "/ws",
        "/missing",
    ] {
        let (status, text) = web.get(path, &[]);
        assert_eq!(status, 401, "{path}: {text}");
        assert!(!text.contains(marker));
        assert!(text.contains("content-security-policy: default-src 'none'"));
    }
    let wrong = format!("/?token={}", "0".repeat(48));
    assert_eq!(web.get(&wrong, &[]).0, 401);

    // The link: a cookie (HttpOnly, SameSite=Strict) and a redirect that drops the token.
    let (status, text) = web.get(&format!("/?token={}", web.token), &[]);
    assert_eq!(status, 303, "{text}");
    let set_cookie = format!(
        "set-cookie: {}; Path=/; HttpOnly; SameSite=Strict\r\n",
        web.cookie()
    );
    assert!(text.contains(&set_cookie), "{text}");
    assert!(text.contains("location: ./\r\n"), "{text}");

    let cookie = web.cookie();
    let (status, text) = web.get("/", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("<script type=\"module\" src=\"assets/app.js\">"));
    let bearer = format!("Bearer {}", web.token);
    assert_eq!(
        web.get("/assets/app.js", &[("Authorization", &bearer)]).0,
        200
    );
    assert_eq!(web.get("/assets/nothing.js", &[("Cookie", &cookie)]).0, 404);

    // A foreign Host (DNS rebinding) or Origin is refused, token or not.
    let rebound = [
        ("Cookie", cookie.as_str()),
        ("Host", "rebound.example:7870"),
    ];
    assert_eq!(web.get("/", &rebound).0, 403);
    let foreign = [
        ("Cookie", cookie.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(web.get("/", &foreign).0, 403);

    // The WebSocket handshake, the same way; then the genuine one is accepted.
    let own_origin = format!("http://127.0.0.1:{}", web.port);
    assert_eq!(web.upgrade(&[("Origin", &own_origin)]).0, 401);
    assert_eq!(
        web.upgrade(&[("Cookie", &cookie), ("Origin", "http://evil.example")])
            .0,
        403
    );
    assert_eq!(
        web.upgrade(&[("Cookie", &cookie), ("Origin", "null")]).0,
        403
    );
    let (status, text) = web.upgrade(&[("Cookie", &cookie), ("Origin", &own_origin)]);
    assert_eq!(status, 101, "{text}");
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
