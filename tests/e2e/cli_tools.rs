//! `askbus watch`, `validate`, `completions` and `man`: the real binaries against a real
//! daemon (watch) or offline (the rest).

use crate::harness as common;
use crate::pty;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use common::{cli_bin, Daemon};
use pty::{Pty, ENTER};
use serde_json::{json, Value};

/// A running `askbus watch` whose stdout lines arrive on a channel.
struct Watch {
    child: Child,
    lines: Receiver<String>,
}

impl Watch {
    fn start(d: &Daemon, json: bool) -> Watch {
        let mut cmd = d.cli();
        cmd.arg("watch");
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        // It says on stderr when it is watching: only then are events certain to reach it.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.starts_with("askbus watch: watching "), "{first}");
        Watch { child, lines }
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from askbus watch")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_one_full_exchange() {
    let d = Daemon::start();
    let text_feed = Watch::start(&d, false);
    let json_feed = Watch::start(&d, true);
    let ui = Pty::askbus(&["--socket", d.socket.to_str().unwrap(), "ui"]);
    ui.wait_for("● connected").await;
    let questions = d.dir.path().join("q.json");
    std::fs::write(
        &questions,
        json!([{"question": "Proceed with the secret refactor?", "header": "Go", "type": "yesno"}])
            .to_string(),
    )
    .unwrap();
    let ask = d
        .cli()
        .args(["ask", "--json"])
        .arg(&questions)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ask_pid = ask.id();
    let mut ui = ui;
    ui.wait_for("Proceed with the secret refactor?").await;
    ui.keys(ENTER);
    let out = ask.wait_with_output().unwrap();
    assert!(out.status.success());
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = response["correlationId"].as_str().unwrap().to_owned();
    assert_eq!(response["answers"], json!({"0": "Yes"}));

    let uid = askbus::trust::effective_uid();
    let version = env!("CARGO_PKG_VERSION");
    let request = text_feed.line();
    let (time, rest) = request.split_once("  ").unwrap();
    assert!(
        time.ends_with('Z') && time.len() == "12:00:01.123Z".len(),
        "{request}"
    );
    assert_eq!(
        rest,
        format!(
            "request        {id}  askbus-cli/{version} (pid {ask_pid}) uid {uid}: Go [yesno]; \
             times out in 10m 00s"
        )
    );
    let answered = text_feed.line();
    let prefix = format!(
        "answered       {id}  askbus-cli/{version} (pid {ask_pid}) by askbus-ui/{version} (pid {}) via tui after ",
        ui.pid()
    );
    assert!(
        answered.split_once("  ").unwrap().1.starts_with(&prefix),
        "{answered}\n{prefix}"
    );

    let req: Value = serde_json::from_str(&json_feed.line()).unwrap();
    let ts = req["ts"].as_str().unwrap().to_owned();
    assert_eq!(
        req,
        json!({"type": "bus-event", "event": "request", "ts": ts, "correlationId": id,
            "producer": {"client": format!("askbus-cli/{version}"), "pid": ask_pid, "uid": uid},
            "timeoutMs": 600000, "questionTypes": ["yesno"], "headers": ["Go"]})
    );
    let end: Value = serde_json::from_str(&json_feed.line()).unwrap();
    let latency = end["latencyMs"].as_u64().expect("latencyMs");
    let ts = end["ts"].as_str().unwrap().to_owned();
    assert_eq!(
        end,
        json!({"type": "bus-event", "event": "answered", "ts": ts, "correlationId": id,
            "producer": {"client": format!("askbus-cli/{version}"), "pid": ask_pid, "uid": uid},
            "ui": {"client": format!("askbus-ui/{version}"), "pid": ui.pid()},
            "latencyMs": latency, "questionTypes": ["yesno"], "headers": ["Go"],
            "decidedBy": {"kind": "human", "via": "tui", "uid": uid,
                          "client": format!("askbus-ui/{version}")}})
    );
    // Watchers never see question text or answers.
    assert!(!request.contains("secret") && !answered.contains("Yes"));
    // Both frames conform to the schema `askbus schema` embeds (all refs resolved offline).
    let v = validator_from_bundle("server/bus-event.schema.json");
    for frame in [&req, &end] {
        let errors: Vec<String> = v.iter_errors(frame).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{frame}: {errors:?}");
    }
}

/// A validator for one schema of `askbus schema --all`, every other one registered by `$id`.
fn validator_from_bundle(path: &str) -> jsonschema::Validator {
    let out = Command::new(cli_bin())
        .args(["schema", "--all"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let bundle: serde_json::Map<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    let resources = bundle.values().map(|s| {
        (
            s["$id"].as_str().unwrap().to_owned(),
            jsonschema::Resource::from_contents(s.clone()).unwrap(),
        )
    });
    jsonschema::draft202012::options()
        .with_resources(resources)
        .build(&bundle[path])
        .unwrap()
}

#[test]
fn schema_prints_each_embedded_file_as_it_is() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/schema");
    let mut seen = 0;
    for dir in [root.clone(), root.join("client"), root.join("server")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let Some(rel) = path
                .strip_prefix(&root)
                .unwrap()
                .to_str()
                .and_then(|s| s.strip_suffix(".schema.json"))
            else {
                continue;
            };
            let out = Command::new(cli_bin())
                .args(["schema", rel])
                .output()
                .unwrap();
            assert!(out.status.success(), "{rel}");
            assert_eq!(out.stdout, std::fs::read(&path).unwrap(), "{rel}");
            seen += 1;
        }
    }
    assert!(seen >= 20, "only {seen} schemas");
    let list = Command::new(cli_bin()).arg("schema").output().unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert_eq!(list.lines().count(), seen, "{list}");
    assert!(
        list.lines().any(|l| l.starts_with("server/bus-event ")
            && l.ends_with("  bus-event (daemon → observer)")),
        "{list}"
    );
    // Short names, from a producer's point of view.
    let request = Command::new(cli_bin())
        .args(["schema", "request"])
        .output()
        .unwrap();
    assert_eq!(
        request.stdout,
        std::fs::read(root.join("client/ask-user-request.schema.json")).unwrap()
    );
    let ambiguous = Command::new(cli_bin())
        .args(["schema", "ask-user-response"])
        .output()
        .unwrap();
    assert_eq!(ambiguous.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&ambiguous.stderr)
        .contains("client/ask-user-response or server/ask-user-response"));
}

#[test]
fn watch_waits_for_the_daemon_and_follows_it_across_restarts() {
    let mut d = Daemon::start();
    d.kill();
    let mut child = d
        .cli()
        .arg("watch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("retrying until it is back"), "{line}");
    d.restart();
    line.clear();
    err.read_line(&mut line).unwrap();
    assert_eq!(
        line,
        format!("askbus watch: back on {}\n", d.socket.display())
    );
    // SIGTERM ends the feed cleanly.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

fn validate(input: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let child = common::spawn_with_stdin(Command::new(cli_bin()).arg("validate").args(args), input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn validate_prints_normalized_questions() {
    let input = json!({"questions": [{"question": "Deploy?\\nReally", "header": "Go\\nNow",
        "type": "choice", "x-extra": 1, "options": [
            {"label": "A\\nB", "description": "  padded\\n  "},
            {"label": "C", "description": ""}]}]});
    let (code, out, err) = validate(&input.to_string(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        got,
        json!([{"question": "Deploy?\nReally", "header": "Go\nNow", "type": "choice",
            "x-extra": 1, "options": [
                {"label": "A\nB", "description": "padded\n"},
                {"label": "C", "description": ""}]}])
    );
}

#[test]
fn validate_prints_the_references_error() {
    let one_option = json!([{"question": "Q", "header": "H", "type": "choice",
        "options": [{"label": "only", "description": ""}]}]);
    let (code, out, err) = validate(&one_option.to_string(), &[]);
    assert_eq!(code, Some(1));
    assert_eq!(out, "");
    // The reference's words, then what is allowed, numbering questions from 0 as the wire does.
    assert_eq!(
        err,
        "Question 1: type='choice' requires 'options' array with 2-4 items.\n\
         askbus: question 0 (the first): a \"choice\" needs \"options\": 2 to 4 of \
         {\"label\": \"…\", \"description\": \"…\"} (the UI adds \"Other\"; a \"yesno\" takes none).\n"
    );
    let (code, out, _) = validate(&json!([{"header": "H"}]).to_string(), &["--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"type": "error", "code": "invalid-request",
            "message": "params/questions/0 must have required property 'question'"})
    );
    // A whole frame: the daemon's own checks first.
    let frame = json!({"type": "ask-user-request", "correlationId": "c1", "timeoutMs": 1.5,
        "questions": []});
    let (code, out, _) = validate(&frame.to_string(), &["--json", "-"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"type": "error", "code": "invalid-request",
            "message": "timeoutMs must be an integer, not 1.5", "correlationId": "c1"})
    );
    let (code, _, err) = validate("{not json", &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not valid JSON"), "{err}");
}

#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Command::new(cli_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for sub in ["ask", "ui", "watch", "validate"] {
            assert!(text.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let out = Command::new(cli_bin()).arg("man").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(".ie") && text.contains(".TH askbus 1"),
        "{text}"
    );
    assert!(text.contains("validate"));
}

/// `askbus mcp` answers a line that is not JSON with JSON-RPC's parse error (-32700, id null)
/// and goes on serving: the lines after it, before and after the handshake, are answered.
#[test]
fn mcp_answers_a_line_that_is_not_json_with_a_parse_error_and_keeps_serving() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(cli_bin())
        .args(["mcp", "--socket"])
        .arg(dir.path().join("absent.sock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut exchange = |line: &str| -> Value {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let reply = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no reply to {line:?}"));
        serde_json::from_str(&reply).unwrap()
    };
    let parse_error = |v: &Value| {
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert!(v["id"].is_null(), "{v}");
        assert_eq!(v["error"]["code"], -32700, "{v}");
    };
    parse_error(&exchange("this is not json"));
    let init = exchange(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(init["id"], 1, "{init}");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    // A notification gets no reply: sent together with the next line.
    parse_error(&exchange(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"",
    ));
    parse_error(&exchange("\u{1b}[A"));
    let list = exchange(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    assert_eq!(list["id"], 3, "{list}");
    assert_eq!(list["result"]["tools"][0]["name"], "ask_person", "{list}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// `askbus mcp` answers a request too large to take (25 MB, beyond what rmcp reads) with an
/// error for that request's id, found after its huge params, and serves the next request.
#[test]
fn mcp_refuses_an_oversized_request_for_its_id_and_serves_the_next() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(cli_bin())
        .args(["mcp", "--socket"])
        .arg(dir.path().join("absent.sock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let next = || -> Value {
        let reply = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a reply in time");
        serde_json::from_str(&reply).unwrap()
    };
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(next()["id"], 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"ask_person","arguments":{{"questions":[{{"question":"{}","header":"H","type":"text"}}]}}}},"id":41}}"#,
        "x".repeat(25_000_000)
    );
    send(&huge);
    drop(huge);
    send(r#"{"jsonrpc":"2.0","id":42,"method":"tools/list"}"#);
    let refused = next();
    assert_eq!(refused["id"], 41, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bytes"),
        "{refused}"
    );
    let list = next();
    assert_eq!(list["id"], 42, "{list}");
    assert_eq!(list["result"]["tools"][0]["name"], "ask_person", "{list}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
