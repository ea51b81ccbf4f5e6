//! `askbus notify` against real parts: the real daemon, a real session `dbus-daemon` started
//! here, and a notification server owned by the test on that bus (org.freedesktop.Notifications
//! in zbus) that records `Notify`/`CloseNotification` and emits `ActionInvoked` when the test
//! "clicks". Every wait is on an event (a D-Bus call, a frame), never on a sleep.

use crate::harness as common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Daemon, Raw};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedValue;

const PATH: &str = "/org/freedesktop/Notifications";
const WAIT: Duration = Duration::from_secs(30);

/// A call the notification server received.
#[derive(Debug, Clone)]
enum Call {
    Notify {
        id: u32,
        replaces: u32,
        summary: String,
        body: String,
        actions: Vec<String>,
    },
    Close {
        id: u32,
    },
}

struct Server {
    calls: mpsc::UnboundedSender<Call>,
    next: u32,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &mut self,
        _app_name: String,
        replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        _hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let id = if replaces_id != 0 {
            replaces_id
        } else {
            self.next += 1;
            self.next
        };
        let _ = self.calls.send(Call::Notify {
            id,
            replaces: replaces_id,
            summary,
            body,
            actions,
        });
        id
    }

    async fn close_notification(
        &mut self,
        id: u32,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> zbus::fdo::Result<()> {
        let _ = self.calls.send(Call::Close { id });
        Self::notification_closed(&emitter, id, 3).await?;
        Ok(())
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "askbus-test".into(),
            "askbus".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    #[zbus(signal)]
    async fn action_invoked(
        emitter: &SignalEmitter<'_>,
        id: u32,
        action_key: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn notification_closed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        reason: u32,
    ) -> zbus::Result<()>;
}

/// A session bus of the test's own, with the notification server on it.
struct Bus {
    daemon: Child,
    address: String,
    conn: zbus::Connection,
    calls: mpsc::UnboundedReceiver<Call>,
}

impl Bus {
    async fn start() -> Bus {
        let mut daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("dbus-daemon (apt install dbus-daemon)");
        let mut line = String::new();
        BufReader::new(daemon.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        let address = line.trim().to_owned();
        assert!(!address.is_empty(), "no address from dbus-daemon");
        let (tx, calls) = mpsc::unbounded_channel();
        let conn = zbus::connection::Builder::address(address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .serve_at(PATH, Server { calls: tx, next: 0 })
            .unwrap()
            .build()
            .await
            .expect("the test's notification server on the bus");
        Bus {
            daemon,
            address,
            conn,
            calls,
        }
    }

    async fn call(&mut self) -> Call {
        tokio::time::timeout(WAIT, self.calls.recv())
            .await
            .expect("a call to the notification server")
            .expect("server alive")
    }

    /// The next Notify that is not a replacement (a new notification).
    async fn next_new(&mut self) -> (u32, String, String, Vec<String>) {
        loop {
            if let Call::Notify {
                id,
                replaces: 0,
                summary,
                body,
                actions,
            } = self.call().await
            {
                return (id, summary, body, actions);
            }
        }
    }

    async fn click(&self, id: u32, key: &str) {
        let iface = self
            .conn
            .object_server()
            .interface::<_, Server>(PATH)
            .await
            .unwrap();
        Server::action_invoked(iface.signal_emitter(), id, key)
            .await
            .unwrap();
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// `askbus notify` on `d`'s socket and `bus`, its stderr lines forwarded.
struct Notifier {
    child: Child,
    _config: tempfile::TempDir,
    lines: std::sync::mpsc::Receiver<String>,
}

/// Forwards a child's stderr to the test's and to a channel.
fn forward(stderr: std::process::ChildStderr) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[notify] {line}");
            let _ = tx.send(line);
        }
    });
    rx
}

impl Notifier {
    fn start(d: &Daemon, bus: &Bus, args: &[&str]) -> Notifier {
        Notifier::start_in(d, bus, args, None)
    }

    /// With `home` as its XDG config home (where "Allow always" writes its rule), else a
    /// fresh one.
    fn start_in(d: &Daemon, bus: &Bus, args: &[&str], home: Option<&Path>) -> Notifier {
        let config = tempfile::tempdir().unwrap();
        let mut child = d
            .cli()
            .arg("notify")
            .args(args)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("XDG_CONFIG_HOME", home.unwrap_or(config.path()))
            .env_remove("ASKBUS_NTFY_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("askbus notify");
        let lines = forward(child.stderr.take().unwrap());
        Notifier {
            child,
            _config: config,
            lines,
        }
    }

    /// Waits for a stderr line containing `text`.
    fn wait_line(&self, text: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no line with {text:?}"));
            if line.contains(text) {
                return line;
            }
        }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn yesno(id: &str, extra: Value) -> Value {
    let mut req = json!({"type": "ask-user-request", "correlationId": id,
        "questions": [{"question": "Deploy <b>now</b>?", "header": "Deploy", "type": "yesno"}],
        "context": {"agent": "gemini-cli/0.61.0", "project": "shop"}});
    for (k, v) in extra.as_object().unwrap() {
        req[k] = v.clone();
    }
    req
}

async fn response(p: &mut Raw, id: &str) -> Value {
    loop {
        let f = p.recv().await;
        if f["correlationId"] == id && f["type"] == "ask-user-response" {
            return f;
        }
    }
}

/// The next `notify` bus-event a watcher sees.
async fn notify_event(w: &mut Raw) -> Value {
    loop {
        let f = w.recv_type("bus-event").await;
        if f["event"] == "notify" {
            return f;
        }
    }
}

#[test]
fn a_click_answers_and_the_notification_says_so() {
    let metrics = tempfile::tempdir().unwrap();
    let sock = metrics.path().join("metrics.sock");
    let d = Daemon::start_with(&["--metrics-listen", sock.to_str().unwrap()]);
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let mut w = d.connect().await;
        w.send(json!({"type": "watch"})).await;
        w.recv_type("watching").await;
        let _n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        p.send(yesno("q1", json!({}))).await;
        let (id, summary, body, actions) = bus.next_new().await;
        assert_eq!(summary, "gemini-cli/0.61.0 (shop) · Deploy");
        assert_eq!(body, "Deploy <b>now</b>?");
        assert_eq!(
            actions,
            ["a0", "Yes", "a1", "No", "open", "Open", "default", "Open"]
        );
        bus.click(id, "a1").await;
        let r = response(&mut p, "q1").await;
        assert_eq!(r["answers"], json!({"0": "No"}), "{r}");
        assert_eq!(r["reason"], "answered");
        // The notification is replaced by the outcome, which never repeats the answer.
        loop {
            if let Call::Notify {
                id: nid,
                replaces,
                body,
                actions,
                ..
            } = bus.call().await
            {
                assert_eq!((nid, replaces), (id, id));
                assert_eq!(body, "Answered from this notification.");
                assert!(actions.is_empty());
                break;
            }
        }
        // Each delivery reached the daemon: a `notify` event for watchers, and the metrics.
        let sent = notify_event(&mut w).await;
        assert_eq!(sent["correlationId"], "q1", "{sent}");
        assert_eq!(
            sent["notify"],
            json!({"sink": "desktop", "result": "sent", "count": 1})
        );
        assert!(sent["producer"]["client"]
            .as_str()
            .unwrap()
            .starts_with("askbus-notify/"));
        let answered = notify_event(&mut w).await;
        assert_eq!(answered["notify"]["result"], "answered", "{answered}");
        let m = common::parse_metrics(&common::scrape_unix(&sock));
        assert_eq!(
            m[r#"askbus_notifications_total{sink="desktop",result="sent"}"#],
            1.0
        );
        assert_eq!(
            m[r#"askbus_notifications_total{sink="desktop",result="answered"}"#],
            1.0
        );
    });
}

#[test]
fn an_approval_is_allowed_or_denied_in_one_click() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let _n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        for (id, key, confirmed, outcome) in [
            ("ap1", "a0", true, "proceed_once"),
            ("ap2", "a1", false, "cancel"),
        ] {
            p.send(
                json!({"type": "tool-confirmation-request", "correlationId": id,
                "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build"}},
                "details": {"type": "exec", "title": "Confirm Shell Command",
                    "command": "rm -rf build", "rootCommand": "rm", "rootCommands": ["rm"]},
                "context": {"agent": "claude-code/2.0"}}),
            )
            .await;
            let (nid, summary, body, actions) = bus.next_new().await;
            assert_eq!(summary, "claude-code/2.0 · Confirm Shell Command");
            // "Allow always" says the rule it writes before the click.
            assert!(
                body.starts_with(
                    "rm -rf build\n\"Allow always\" writes the rule: allow run_shell_command \
                     commands starting \"rm\" in every project ("
                ),
                "{body}"
            );
            assert_eq!(
                actions,
                [
                    "a0",
                    "Allow",
                    "a1",
                    "Deny",
                    "always",
                    "Allow always",
                    "open",
                    "Open",
                    "default",
                    "Open"
                ]
            );
            bus.click(nid, key).await;
            let r = loop {
                let f = p.recv().await;
                if f["type"] == "tool-confirmation-response" && f["correlationId"] == id {
                    break f;
                }
            };
            assert_eq!(r["confirmed"], confirmed, "{r}");
            assert_eq!(r["outcome"], outcome, "{r}");
            assert_eq!(r["reason"], "answered", "{r}");
            loop {
                if let Call::Notify { replaces, body, .. } = bus.call().await {
                    assert_eq!(replaces, nid);
                    assert_eq!(body, "Decided from this notification.");
                    break;
                }
            }
        }
    });
}

#[test]
fn answered_elsewhere_withdrawn_or_timed_out_closes_it() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let _n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        let (mut ui, _) = d.ui().await;

        // Answered in another UI first.
        p.send(yesno("e1", json!({}))).await;
        let (id, ..) = bus.next_new().await;
        ui.recv_type("ask-user-request").await;
        ui.send(common::answer("e1", json!({"0": "Yes"}))).await;
        response(&mut p, "e1").await;
        loop {
            if let Call::Close { id: closed } = bus.call().await {
                assert_eq!(closed, id);
                break;
            }
        }

        // Withdrawn by its producer.
        p.send(yesno("e2", json!({}))).await;
        let (id, ..) = bus.next_new().await;
        p.send(json!({"type": "ask-user-cancel", "correlationId": "e2"}))
            .await;
        loop {
            if let Call::Close { id: closed } = bus.call().await {
                assert_eq!(closed, id);
                break;
            }
        }

        // Timed out (after it was shown: flushes are a second apart, and a request that ends
        // before its turn is never shown).
        p.send(yesno("e3", json!({"timeoutMs": 5000}))).await;
        let (id, ..) = bus.next_new().await;
        loop {
            if let Call::Close { id: closed } = bus.call().await {
                assert_eq!(closed, id);
                break;
            }
        }
        let r = response(&mut p, "e3").await;
        assert_eq!(r["reason"], "timeout");
    });
}

#[test]
fn open_without_a_web_url_says_how_to_answer() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let _n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        p.send(common::request_with(
            "t1",
            json!({"questions": [{"question": "Your name?", "header": "Name", "type": "text"}]}),
        ))
        .await;
        let (id, _, body, actions) = bus.next_new().await;
        assert_eq!(body, "Your name?");
        // A text question has no one-click answer: only Open.
        assert_eq!(actions, ["open", "Open", "default", "Open"]);
        bus.click(id, "open").await;
        loop {
            if let Call::Notify { replaces, body, .. } = bus.call().await {
                assert_eq!(replaces, id);
                assert!(body.contains("askbus ui"), "{body}");
                break;
            }
        }
    });
}

#[test]
fn a_burst_of_a_thousand_is_batched_and_memory_stays_flat() {
    let d = Daemon::start_with(&["--max-pending-per-connection", "2000"]);
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        let mut rss = Vec::new();
        for round in 0..2 {
            for i in 0..1000 {
                p.send(yesno(&format!("b{round}-{i}"), json!({}))).await;
            }
            // Wait until the notifier told about the whole burst: the singles it showed plus
            // the count in the summary...
            let mut calls = 0;
            let mut open: HashSet<u32> = HashSet::new();
            let mut ids: HashSet<u32> = HashSet::new();
            let mut singles: HashSet<u32> = HashSet::new();
            loop {
                match bus.call().await {
                    Call::Notify { id, summary, .. } => {
                        calls += 1;
                        open.insert(id);
                        ids.insert(id);
                        match summary.strip_suffix(" requests are waiting") {
                            Some(count) => {
                                let count: usize = count.parse().unwrap();
                                if count + singles.len() == 1000 {
                                    break;
                                }
                            }
                            None => {
                                singles.insert(id);
                            }
                        }
                    }
                    Call::Close { id } => {
                        open.remove(&id);
                    }
                }
            }
            // ...then answer them all in another UI: every notification closes.
            let (mut ui, pending) = d.ui().await;
            assert_eq!(pending, 1000);
            let mut answered = 0;
            while answered < 1000 {
                let f = ui.recv().await;
                if f["type"] == "ask-user-request" {
                    let id = f["correlationId"].as_str().unwrap();
                    ui.send(common::answer(id, json!({"0": "Yes"}))).await;
                    answered += 1;
                }
            }
            while !open.is_empty() {
                match bus.call().await {
                    Call::Notify { id, .. } => {
                        calls += 1;
                        open.insert(id);
                        ids.insert(id);
                    }
                    Call::Close { id } => {
                        open.remove(&id);
                    }
                }
            }
            eprintln!(
                "round {round}: {calls} Notify calls, {} notifications",
                ids.len()
            );
            assert!(ids.len() <= 4, "{} notifications for 1,000", ids.len());
            assert!(calls <= 60, "{calls} Notify calls for 1,000");
            rss.push(n.rss_kib());
        }
        eprintln!("notifier RSS after each burst: {rss:?} KiB");
        assert!(
            rss[1] <= rss[0] + rss[0] / 4 + 1024,
            "memory grew from {} to {} KiB",
            rss[0],
            rss[1]
        );
    });
}

#[test]
fn a_malformed_report_is_refused_and_counts_nothing() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let mut c = d.connect().await;
        for (frame, message) in [
            (
                json!({"type": "notify-report", "sink": "ntfy", "result": "delivered"}),
                "result must be one of sent, failed, answered, not \"delivered\"",
            ),
            (
                json!({"type": "notify-report", "sink": "Ntfy!", "result": "sent"}),
                "sink must be 1 to 32 lowercase letters",
            ),
            (
                json!({"type": "notify-report", "sink": "ntfy", "result": "sent", "correlationIds": [1]}),
                "correlationIds[0] must be a string, not a number",
            ),
            (
                json!({"type": "notify-report", "result": "sent"}),
                "notify-report needs \"sink\"",
            ),
        ] {
            c.send(frame).await;
            let e = c.recv_error("invalid-frame").await;
            assert!(
                e["message"].as_str().unwrap().starts_with(message),
                "{e}"
            );
        }
        // The connection is still served.
        c.ping().await;
    });
}

#[test]
fn nothing_to_notify_is_an_error() {
    let d = Daemon::start();
    let out = d
        .cli()
        .args(["notify", "--no-desktop"])
        .env("XDG_CONFIG_HOME", d.dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to notify"), "{err}");
}

/// A request the test's HTTP server received.
#[derive(Debug)]
struct Http {
    path: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// An HTTP server of the test's own on loopback: records each request and answers with the
/// next status of `statuses` (200 once they run out).
async fn http_server(statuses: Vec<u16>) -> (String, mpsc::UnboundedReceiver<Http>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut statuses = statuses.into_iter();
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let (head_len, content_length) = loop {
                let mut chunk = [0u8; 4096];
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    break (i + 4, len);
                }
            };
            if head_len == 0 {
                continue;
            }
            while buf.len() < head_len + content_length {
                let mut chunk = [0u8; 4096];
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
            let mut lines = head.lines();
            let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_owned();
            let headers = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
                .collect();
            let body = serde_json::from_slice(&buf[head_len..]).unwrap_or(Value::Null);
            let status = statuses.next().unwrap_or(200);
            let reply =
                format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            let _ = s.write_all(reply.as_bytes()).await;
            let _ = tx.send(Http {
                path,
                headers,
                body,
            });
        }
    });
    (base, rx)
}

async fn next_http(rx: &mut mpsc::UnboundedReceiver<Http>) -> Http {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a push")
        .expect("server alive")
}

/// `askbus notify` pushing only (no desktop), with a short retry for the tests.
fn push_notifier(d: &Daemon, args: &[&str], env: &[(&str, &str)]) -> Notifier {
    let config = tempfile::tempdir().unwrap();
    let mut cmd = d.cli();
    cmd.args(["notify", "--no-desktop"])
        .args(args)
        .env("XDG_CONFIG_HOME", config.path())
        .env("ASKBUS_NOTIFY_RETRY_MS", "50")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("askbus notify");
    let lines = forward(child.stderr.take().unwrap());
    Notifier {
        child,
        _config: config,
        lines,
    }
}

#[test]
fn ntfy_gets_the_fields_headers_and_signed_action_urls() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let (base, mut rx) = http_server(vec![503]).await;
        let topic = format!("{base}/askbus-test");
        let _n = push_notifier(
            &d,
            &[
                "--ntfy",
                &topic,
                "--push-after",
                "0",
                "--web-url",
                "http://127.0.0.1:7870/",
            ],
            &[("ASKBUS_NTFY_TOKEN", "tk_secret")],
        );
        let mut p = d.connect().await;
        p.send(yesno("n1", json!({}))).await;
        // The first publish gets 503: it is retried, the same.
        let first = next_http(&mut rx).await;
        let h = next_http(&mut rx).await;
        assert_eq!(first.body, h.body);
        assert_eq!(h.path, "/");
        assert_eq!(h.headers["authorization"], "Bearer tk_secret");
        assert!(h.headers["content-type"].starts_with("application/json"));
        let b = &h.body;
        assert_eq!(b["topic"], "askbus-test");
        assert_eq!(b["title"], "gemini-cli/0.61.0 (shop) · Deploy");
        assert_eq!(b["message"], "Deploy <b>now</b>?");
        assert_eq!(b["priority"], 4);
        assert_eq!(b["tags"], json!(["robot"]));
        let actions = b["actions"].as_array().unwrap();
        assert_eq!(actions.len(), 3, "{b}");
        for (a, label) in actions.iter().zip(["Yes", "No"]) {
            assert_eq!(a["action"], "http");
            assert_eq!(a["method"], "POST");
            assert_eq!(a["label"], label);
            let url = a["url"].as_str().unwrap();
            assert!(url.starts_with("http://127.0.0.1:7870/a/v1."), "{url}");
        }
        assert_eq!(actions[2]["action"], "view");
        assert_eq!(actions[2]["label"], "Open");
        let click = b["click"].as_str().unwrap();
        assert!(click.starts_with("http://127.0.0.1:7870/o/v1."), "{click}");
        // No token, no answer, nothing of the page's secrets in what leaves the machine.
        assert!(!b.to_string().contains("answers"));
    });
}

#[test]
fn redacted_pushes_carry_no_question_text() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let (base, mut rx) = http_server(vec![]).await;
        let hook = format!("{base}/hook");
        let _n = push_notifier(
            &d,
            &[
                "--webhook",
                &hook,
                "--push-after",
                "0",
                "--redact",
                "--web-url",
                "http://127.0.0.1:7870",
            ],
            &[],
        );
        let mut p = d.connect().await;
        p.send(common::request_with(
            "r1",
            json!({"context": {"agent": "claude-code"}}),
        ))
        .await;
        let h = next_http(&mut rx).await;
        assert_eq!(h.path, "/hook");
        let text = h.body.to_string();
        for secret in ["Which database", "Database", "SQLite", "PostgreSQL"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(
            h.body["message"],
            "agent claude-code is waiting for an answer"
        );
        assert_eq!(h.body["correlationIds"], json!(["r1"]));
        // Option labels are the agent's text: only "Open" is left.
        let labels: Vec<&str> = h.body["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["Open"]);
    });
}

#[test]
fn a_failing_target_is_retried_then_reported() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let (base, mut rx) = http_server(vec![500; 100]).await;
        let hook = format!("{base}/hook");
        let n = push_notifier(&d, &["--webhook", &hook, "--push-after", "0"], &[]);
        let mut p = d.connect().await;
        p.send(yesno("f1", json!({}))).await;
        for _ in 0..6 {
            next_http(&mut rx).await;
        }
        // Six attempts, then it gives up and says so.
        let line = n.wait_line("webhook failed f1");
        assert!(line.contains("gave up after 6 attempts"), "{line}");
        assert!(line.contains("HTTP 500"), "{line}");
        assert!(rx.try_recv().is_err(), "a seventh attempt");
        // ...and `askbus watch` shows the failure.
        let mut watch = d
            .cli()
            .args(["watch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
        p.send(yesno("f2", json!({}))).await;
        // f1's report may reach the daemon after `watch` subscribed (the notifier logs before
        // it reports): the line to read is f2's.
        let line = tokio::task::spawn_blocking(move || {
            lines
                .find_map(|l| {
                    l.ok()
                        .filter(|l| l.contains("notify") && l.contains(" f2 "))
                })
                .unwrap()
        })
        .await
        .unwrap();
        let _ = watch.kill();
        let _ = watch.wait();
        assert!(
            line.contains(": webhook failed: gave up after 6 attempts"),
            "{line}"
        );
    });
}

/// `POST url` (an absolute http:// URL on loopback) with no body, as ntfy's http action does;
/// the status and the response text.
fn post(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

#[test]
fn a_pushed_action_url_answers_through_askbus_web_once() {
    let metrics = tempfile::tempdir().unwrap();
    let sock = metrics.path().join("metrics.sock");
    let d = Daemon::start_with(&["--metrics-listen", sock.to_str().unwrap()]);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("links.key");
    let mut web = Command::new(common::cli_bin())
        .arg("--socket")
        .arg(&d.socket)
        .args(["web", "--listen", "127.0.0.1:0", "--link-key"])
        .arg(&key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(web.stdout.take().unwrap());
    let base = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "askbus web printed no link"
        );
        if let Some(i) = line.find("http://127.0.0.1:") {
            let url = line[i..].trim();
            let end = url[7..].find('/').map_or(url.len(), |j| j + 7);
            break url[..end].to_owned();
        }
    };
    common::rt().block_on(async {
        let (hook, mut rx) = http_server(vec![]).await;
        let topic = format!("{hook}/t");
        let _n = push_notifier(
            &d,
            &[
                "--ntfy",
                &topic,
                "--push-after",
                "0",
                "--web-url",
                &base,
                "--link-key",
                key.to_str().unwrap(),
            ],
            &[],
        );
        let mut w = d.connect().await;
        w.send(json!({"type": "watch"})).await;
        w.recv_type("watching").await;
        let mut p = d.connect().await;
        p.send(yesno("w1", json!({}))).await;
        p.send(yesno("w2", json!({}))).await;
        let mut urls: HashMap<String, String> = HashMap::new();
        while urls.len() < 2 {
            let h = next_http(&mut rx).await;
            assert_eq!(h.body["actions"][0]["label"], "Yes");
            let yes = h.body["actions"][0]["url"].as_str().unwrap().to_owned();
            let key = if urls.is_empty() { "first" } else { "second" };
            urls.insert(key.to_owned(), yes);
        }
        // The first push's "Yes" answers its question once...
        let (status, text) = tokio::task::spawn_blocking({
            let url = urls["first"].clone();
            move || post(&url)
        })
        .await
        .unwrap();
        assert_eq!(status, 200, "{text}");
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "Yes"}), "{r}");
        let answered = r["correlationId"].as_str().unwrap().to_owned();
        // ...and never again.
        let (status, _) = tokio::task::spawn_blocking({
            let url = urls["first"].clone();
            move || post(&url)
        })
        .await
        .unwrap();
        assert_eq!(status, 409);
        // The answer counts as one answered from a notification, on the bus and in the
        // metrics (the link's own report; the notifier cannot see a tap on the phone).
        let link = loop {
            let e = notify_event(&mut w).await;
            if e["notify"]["sink"] == "link" {
                break e;
            }
        };
        assert_eq!(link["correlationId"], answered.as_str(), "{link}");
        assert_eq!(
            link["notify"],
            json!({"sink": "link", "result": "answered", "count": 1})
        );
        let m = common::parse_metrics(&common::scrape_unix(&sock));
        assert_eq!(
            m[r#"askbus_notifications_total{sink="link",result="answered"}"#],
            1.0
        );
        // The other question, answered in another UI first: its link says so.
        let other = if answered == "w1" { "w2" } else { "w1" };
        let (mut ui, _) = d.ui().await;
        ui.send(common::answer(other, json!({"0": "No"}))).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "No"}), "{r}");
        let (status, text) = tokio::task::spawn_blocking({
            let url = urls["second"].clone();
            move || post(&url)
        })
        .await
        .unwrap();
        assert_eq!(status, 409, "{text}");
        assert!(text.contains("already answered"), "{text}");
        // Refused links answered nothing, so nothing more was counted.
        let m = common::parse_metrics(&common::scrape_unix(&sock));
        assert_eq!(
            m[r#"askbus_notifications_total{sink="link",result="answered"}"#],
            1.0
        );
    });
    let _ = web.kill();
    let _ = web.wait();
}

/// Characters that must never leave askbus raw for a desktop or a phone: escapes and other
/// controls, bidi overrides and isolates, zero-width and tag characters.
fn raw_unsafe(s: &str) -> bool {
    s.chars().any(|c| {
        c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
    })
}

/// A choice whose option labels (the agent's text) carry an OSC 52 clipboard write, a
/// right-to-left override, a zero-width space and hidden tag characters.
fn evil_choice(id: &str) -> Value {
    json!({"type": "ask-user-request", "correlationId": id,
        "questions": [{"question": "Pick\u{202E}one", "header": "Pick", "type": "choice",
            "options": [
                {"label": "Yes\u{1b}]52;c;cHduZWQ=\u{7}", "description": "a"},
                {"label": "No\u{202E}sey\u{200B}\u{E0068}\u{E0069}", "description": "b"}]}],
        "context": {"agent": "gemini-cli/0.61.0"}})
}

#[test]
fn button_labels_titles_and_bodies_are_neutralized_on_desktop_and_phone() {
    let d = Daemon::start();
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let _n = Notifier::start(&d, &bus, &[]);
        let mut p = d.connect().await;
        p.send(evil_choice("e1")).await;
        let (_, summary, body, actions) = bus.next_new().await;
        for s in actions.iter().chain([&summary, &body]) {
            assert!(!raw_unsafe(s), "raw on the desktop: {s:?} in {actions:?}");
        }
        // Visibly replaced, not dropped.
        assert!(
            actions.iter().any(|a| a.starts_with("Yes␛]52")),
            "{actions:?}"
        );

        let (base, mut rx) = http_server(vec![]).await;
        let topic = format!("{base}/t");
        let _push = push_notifier(
            &d,
            &[
                "--ntfy",
                &topic,
                "--push-after",
                "0",
                "--web-url",
                "http://127.0.0.1:7870/",
            ],
            &[],
        );
        let h = next_http(&mut rx).await;
        let b = &h.body;
        let mut texts = vec![b["title"].as_str().unwrap(), b["message"].as_str().unwrap()];
        for a in b["actions"].as_array().unwrap() {
            texts.push(a["label"].as_str().unwrap());
        }
        assert!(texts.len() >= 4, "{b}");
        for s in texts {
            assert!(!raw_unsafe(s), "raw in the push: {s:?} in {b}");
        }
    });
}

/// A daemon restart does not push a restored request to the phone again (issue 28): askbusd
/// is SIGKILLed with a request pending on its store and started again; the notifier
/// reconnects and is replayed that request, which it already pushed, and pushes only what is
/// new (each push names its question; two later requests are pushed in the order they were
/// asked, after the replay, so a second push of the first would have come before them).
#[test]
fn a_restored_request_is_not_pushed_again_after_a_daemon_restart() {
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("askbus.db");
    let mut d = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let ask = |id: &str| {
        json!({"type": "ask-user-request", "correlationId": id,
            "questions": [{"question": format!("Deploy {id}?"), "header": "Deploy", "type": "yesno"}]})
    };
    let rt = common::rt();
    let (mut rx, _n) = rt.block_on(async {
        let (base, mut rx) = http_server(vec![]).await;
        let topic = format!("{base}/askbus-test");
        let n = push_notifier(&d, &["--ntfy", &topic, "--push-after", "0"], &[]);
        let mut p = d.connect().await;
        p.send(ask("r1")).await;
        assert_eq!(next_http(&mut rx).await.body["message"], "Deploy r1?");
        (rx, n)
    });
    d.kill();
    d.restart();
    rt.block_on(async {
        // Its producer re-attaches; the notifier is replayed r1 whenever it reconnects.
        let mut p = d.connect().await;
        p.send(ask("r1")).await;
        let (mut ui, pending) = d.ui().await;
        assert_eq!(pending, 1, "r1 is pending again");
        ui.recv_type("ask-user-request").await;
        // Once the notifier is back (it subscribed: two UIs), two new requests.
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let mut c = d.connect().await;
            c.send(json!({"type": "stats"})).await;
            if c.recv_type("stats").await["uis"] == 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the notifier never came back"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        p.send(ask("r2")).await;
        p.send(ask("r3")).await;
        let pushed: Vec<Value> = vec![
            next_http(&mut rx).await.body["message"].clone(),
            next_http(&mut rx).await.body["message"].clone(),
        ];
        assert_eq!(
            pushed,
            [json!("Deploy r2?"), json!("Deploy r3?")],
            "r1 pushed again?"
        );
    });
}

/// Restarted with askbusd (an upgrade restarts both), a notifier does not push the restored
/// requests again either: what it pushed is recorded beside the socket
/// (`askbus-notify.pushed`), and the new process pushes only what is new. The record keeps
/// only pending requests.
#[test]
fn a_notifier_restarted_with_the_daemon_does_not_push_again() {
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("askbus.db");
    let mut d = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let ask = |id: &str| {
        json!({"type": "ask-user-request", "correlationId": id,
            "questions": [{"question": format!("Deploy {id}?"), "header": "Deploy", "type": "yesno"}]})
    };
    let record = d.socket.with_file_name("askbus-notify.pushed");
    let rt = common::rt();
    let (base, mut rx) = rt.block_on(async {
        let (base, mut rx) = http_server(vec![]).await;
        let topic = format!("{base}/askbus-test");
        let n = push_notifier(&d, &["--ntfy", &topic, "--push-after", "0"], &[]);
        let mut p = d.connect().await;
        for id in ["r1", "gone"] {
            p.send(ask(id)).await;
            assert_eq!(
                next_http(&mut rx).await.body["message"],
                format!("Deploy {id}?")
            );
        }
        // "gone" ends while no notifier runs: the next one prunes it from the record.
        let (mut ui, _) = d.ui().await;
        ui.recv_type("ask-user-request").await;
        ui.recv_type("ask-user-request").await;
        ui.send(common::answer("gone", json!({"0": "Yes"}))).await;
        ui.recv_type("ask-user-ack").await;
        drop(n);
        (base, rx)
    });
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(text.lines().any(|l| l == "r1"), "{text}");
    d.kill();
    d.restart();
    rt.block_on(async {
        let mut p = d.connect().await;
        p.send(ask("r1")).await;
        let topic = format!("{base}/askbus-test");
        let n = push_notifier(&d, &["--ntfy", &topic, "--push-after", "0"], &[]);
        n.wait_line("watching");
        p.send(ask("r2")).await;
        assert_eq!(
            next_http(&mut rx).await.body["message"],
            "Deploy r2?",
            "r1 pushed again?"
        );
        let text = std::fs::read_to_string(&record).unwrap();
        let mut ids: Vec<&str> = text.lines().collect();
        ids.sort_unstable();
        assert_eq!(ids, ["r1", "r2"], "only what is pending");
    });
}

/// A hook's approval in project shop (the agent offers no "always" of its own: askbus's rule
/// is the "always"), waiting for a person.
fn shell_approval(id: &str, command: &str) -> Value {
    let root = command.split(' ').next().unwrap();
    json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": root, "rootCommands": [root]},
        "outcomes": ["proceed_once", "cancel"], "noUi": "wait",
        "context": {"project": "shop"}})
}

/// A daemon deciding by the policy rules, with `config` as its config home.
fn policy_daemon(config: &Path, admin: &Path) -> Daemon {
    Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .env("XDG_CONFIG_HOME", config)
        .args(&["--policy-admin-dir", admin.to_str().unwrap()])
        .start()
}

/// The next identical call is then allowed by the rule with no UI; a different one is asked.
async fn the_rule_decides_the_next_call(d: &Daemon, p: &mut Raw) {
    p.send(shell_approval("next-1", "npm test")).await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (&r["correlationId"], &r["outcome"]),
        (&json!("next-1"), &json!("proceed_once")),
        "{r}"
    );
    let (mut ui, _) = d.ui().await;
    p.send(shell_approval("next-2", "rm -rf out")).await;
    let asked = ui.recv_type("tool-confirmation-request").await;
    assert_eq!(asked["correlationId"], "next-2", "{asked}");
}

/// The desktop's "Allow always": its body says the rule before the click; the click writes it
/// in the request's project, sends the agent Allow once, and the daemon decides the next
/// identical call by it.
#[test]
fn the_desktop_allow_always_says_and_writes_its_rule() {
    let config = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let d = policy_daemon(config.path(), admin.path());
    let file = config.path().join("askbus/policies/askbus-rules.toml");
    common::rt().block_on(async {
        let mut bus = Bus::start().await;
        let _n = Notifier::start_in(&d, &bus, &[], Some(config.path()));
        let mut p = d.connect().await;
        p.send(shell_approval("da1", "npm run build")).await;
        let (nid, _, body, actions) = bus.next_new().await;
        assert_eq!(
            body,
            format!(
                "npm run build\n\"Allow always\" writes the rule: allow run_shell_command \
                 commands starting \"npm\" in project shop ({}, user tier, priority 4.95)",
                file.display()
            )
        );
        assert_eq!(actions[4..6], ["always", "Allow always"], "{actions:?}");
        assert!(!file.exists(), "showing it writes nothing");
        bus.click(nid, "always").await;
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (&r["correlationId"], &r["outcome"], &r["confirmed"]),
            (&json!("da1"), &json!("proceed_once"), &json!(true)),
            "{r}"
        );
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(
            written.contains("commandPrefix = \"npm\"")
                && written.contains("askbusProject = \"shop\""),
            "{written}"
        );
        loop {
            if let Call::Notify { replaces, body, .. } = bus.call().await {
                assert_eq!(replaces, nid);
                assert_eq!(body, "Decided from this notification.");
                break;
            }
        }
        the_rule_decides_the_next_call(&d, &mut p).await;
    });
}

/// `askbus web` on a free loopback port with `key` and `home`; its base URL, and its stdout
/// (kept open: `askbus web` prints there).
// The child is returned; the caller kills and waits for it.
#[allow(clippy::zombie_processes)]
fn web_with_key(d: &Daemon, key: &Path, home: &Path) -> (Child, String, impl Sized) {
    let mut web = Command::new(common::cli_bin())
        .arg("--socket")
        .arg(&d.socket)
        .args(["web", "--listen", "127.0.0.1:0", "--link-key"])
        .arg(key)
        .env("XDG_CONFIG_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(web.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = web.kill();
            let _ = web.wait();
            panic!("askbus web printed no link");
        }
        if let Some(i) = line.find("http://127.0.0.1:") {
            let url = line[i..].trim();
            let end = url[7..].find('/').map_or(url.len(), |j| j + 7);
            return (web, url[..end].to_owned(), out);
        }
    }
}

fn get(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

/// A push of an approval keeps Allow and Deny one tap, and its third button "Allow always…"
/// opens (never POSTs) its answer link's page, which says the rule before its one button;
/// the press writes the rule and the daemon decides the next identical call by it. "Open" is
/// the notification's own tap. A redacted push offers no "Allow always…".
#[test]
fn a_pushed_allow_always_opens_the_page_that_shows_its_rule() {
    let config = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let d = policy_daemon(config.path(), admin.path());
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("links.key");
    let (mut web, base, _out) = web_with_key(&d, &key, config.path());
    let file = config.path().join("askbus/policies/askbus-rules.toml");
    common::rt().block_on(async {
        let (hook, mut rx) = http_server(vec![]).await;
        let topic = format!("{hook}/t");
        let args = [
            "--ntfy",
            &topic,
            "--push-after",
            "0",
            "--web-url",
            &base,
            "--link-key",
            key.to_str().unwrap(),
        ];
        let n = push_notifier(&d, &args, &[]);
        let mut p = d.connect().await;
        p.send(shell_approval("pa1", "npm run build")).await;
        let h = next_http(&mut rx).await;
        let b = &h.body;
        let actions = b["actions"].as_array().unwrap();
        let labels: Vec<&str> = actions
            .iter()
            .map(|a| a["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["Allow", "Deny", "Allow always…"], "{b}");
        assert_eq!(
            (&actions[0]["action"], &actions[1]["action"]),
            (&json!("http"), &json!("http"))
        );
        assert_eq!(actions[2]["action"], "view", "{b}");
        let always = actions[2]["url"].as_str().unwrap().to_owned();
        assert!(always.starts_with(&format!("{base}/a/v1.")), "{always}");
        let click = b["click"].as_str().unwrap();
        assert!(click.starts_with(&format!("{base}/o/v1.")), "{click}");
        let (status, text) = tokio::task::spawn_blocking({
            let url = always.clone();
            move || get(&url)
        })
        .await
        .unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(
            text.contains(&format!(
                "It writes the rule <code>allow run_shell_command commands starting \
                 &quot;npm&quot; in project shop ({}, user tier, priority 4.95)</code>",
                file.display()
            )),
            "{text}"
        );
        assert!(!file.exists(), "opening the page writes nothing");
        let (status, text) = tokio::task::spawn_blocking(move || post(&always))
            .await
            .unwrap();
        assert_eq!(status, 200, "{text}");
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (&r["correlationId"], &r["outcome"]),
            (&json!("pa1"), &json!("proceed_once")),
            "{r}"
        );
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(
            written.contains("commandPrefix = \"npm\"")
                && written.contains("askbusProject = \"shop\""),
            "{written}"
        );
        the_rule_decides_the_next_call(&d, &mut p).await;
        drop(n);
        // Redacted: the page would name the command, so no "Allow always…".
        let mut redacted = args.to_vec();
        redacted.push("--redact");
        let _n = push_notifier(&d, &redacted, &[]);
        p.send(shell_approval("pa2", "cargo build")).await;
        let h = loop {
            let h = next_http(&mut rx).await;
            // A push the first notifier may still have sent is not redacted.
            if h.body["title"] == "askbus" {
                break h;
            }
        };
        let labels: Vec<&str> = h.body["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["Allow", "Deny", "Open"], "{}", h.body);
    });
    let _ = web.kill();
    let _ = web.wait();
}
