//! Every error code the daemon sends, over the real socket: which frames cause it, and
//! whether the connection survives (it must, except where the contract says it closes).

use crate::harness as common;

use std::time::Duration;

use common::{choice_request, request_with, Daemon};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_ping_and_unsupported_protocol() {
    let d = Daemon::start();
    let mut c = d.connect().await;
    c.send(json!({"protocol": 1, "type": "hello", "client": "t/1"}))
        .await;
    let w = c.recv_type("welcome").await;
    assert_eq!(w["protocol"], 1);
    assert_eq!(
        w["server"],
        format!("askbusd/{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(w["maxFrameBytes"], 1_048_576);
    assert_eq!(w["defaultTimeoutMs"], 600_000);
    assert_eq!(w["maxTimeoutMs"], 86_400_000);
    for id in [json!(7), json!("x"), json!({"a": [1]}), Value::Null] {
        c.send(json!({"type": "ping", "id": id})).await;
        assert_eq!(c.recv_type("pong").await, json!({"type": "pong", "id": id}));
    }
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv_type("pong").await, json!({"type": "pong"}));
    c.send(json!({"type": "hello"})).await;
    c.recv_error("invalid-frame").await;
    c.send(json!({"type": "hello", "protocol": 2})).await;
    c.recv_error("unsupported-protocol").await;
    c.expect_closed().await;
}

/// PROTOCOL.md: any `protocol` but the JSON integer 1 is refused, so also 1 written as a
/// float; the connection is closed after the error, as for protocol 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_with_protocol_1_written_as_a_float_is_refused() {
    let d = Daemon::start();
    for spelling in ["1.0", "1e0", "1E+0", "10e-1"] {
        let mut c = d.connect().await;
        let payload = format!(r#"{{"type":"hello","protocol":{spelling},"client":"t/1"}}"#);
        c.send_payload(payload.as_bytes()).await;
        let err = c.recv_error("unsupported-protocol").await;
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("send the JSON integer 1"),
            "{spelling}: {err}"
        );
        c.expect_closed().await;
    }
    // The integer itself still works, on a fresh connection.
    let mut c = d.connect().await;
    c.send_payload(br#"{"type":"hello","protocol":1}"#).await;
    c.recv_type("welcome").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_errors_and_the_connection_survives() {
    let d = Daemon::start();
    let mut c = d.connect().await;
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{not json", "invalid-json"),
        (b"", "invalid-json"),
        (b"\xff\xfe\x00{}", "invalid-json"),
        (b"{\"type\":\"ping\",\"id\":\"\xc3\x28\"}", "invalid-json"),
        (b"[1,2,3]", "invalid-frame"),
        (b"\"ask-user-request\"", "invalid-frame"),
        (b"42", "invalid-frame"),
        (b"null", "invalid-frame"),
        (b"{}", "invalid-frame"),
        (b"{\"type\":7}", "invalid-frame"),
        (b"{\"type\":null}", "invalid-frame"),
        (b"{\"type\":\"welcome\"}", "unknown-type"),
        (b"{\"type\":\"\"}", "unknown-type"),
        (b"{\"type\":\"subscribe\",\"client\":5}", "invalid-frame"),
        // Found by fuzzing: a number past an f64 or nesting past serde_json's limit, where
        // the fast parser skips or keeps a value raw (the questions' read as raw text then
        // killed the connection's task without an answer).
        (
            br#"{"type":"ask-user-request","correlationId":"f","questions":[7e777]}"#,
            "invalid-json",
        ),
        (
            br#"{"type":"tool-confirmation-request","correlationId":"f","toolCall":{"name":"n"},"x":-1E+400}"#,
            "invalid-json",
        ),
        (
            br#"{"type":"ask-user-response","correlationId":"f","answers":{},"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
            "invalid-json",
        ),
    ];
    for (payload, code) in cases {
        c.send_payload(payload).await;
        let e = c.recv_error(code).await;
        assert!(e.get("correlationId").is_none(), "{e}");
    }
    c.ping().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_length_prefix_closes_only_that_connection() {
    let d = Daemon::start_with(&["--max-frame-bytes", "1024"]);
    let mut bystander = d.connect().await;
    let mut c = d.connect().await;
    // Exactly the limit is fine.
    let mut at_limit = json!({"type": "ping", "id": ""}).to_string().into_bytes();
    let pad = 1024 - at_limit.len();
    at_limit = json!({"type": "ping", "id": "x".repeat(pad)})
        .to_string()
        .into_bytes();
    assert_eq!(at_limit.len(), 1024);
    c.send_payload(&at_limit).await;
    c.recv_type("pong").await;
    // One byte more is refused from the prefix alone, before any payload is sent.
    c.send_raw(&1025u32.to_be_bytes()).await;
    c.recv_error("frame-too-large").await;
    c.expect_closed().await;
    // A 4 GiB prefix as well.
    let mut c2 = d.connect().await;
    c2.send_raw(&u32::MAX.to_be_bytes()).await;
    c2.recv_error("frame-too-large").await;
    c2.expect_closed().await;
    bystander.ping().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_fields_are_checked_with_clear_messages() {
    let d = Daemon::start();
    let mut c = d.connect().await;
    let q = choice_request("x")["questions"].clone();
    let cases = [
        (
            json!({"type": "ask-user-request", "questions": q}),
            None,
            "correlationId",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": "", "questions": q}),
            None,
            "empty",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": 5, "questions": q}),
            None,
            "string",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": "x".repeat(129), "questions": q}),
            None,
            "128",
        ),
        (
            request_with("a", json!({"timeoutMs": 0})),
            Some("a"),
            "timeoutMs",
        ),
        (
            request_with("a", json!({"timeoutMs": -1})),
            Some("a"),
            "timeoutMs",
        ),
        (
            request_with("a", json!({"timeoutMs": 2.5})),
            Some("a"),
            "timeoutMs",
        ),
        (
            request_with("a", json!({"timeoutMs": "100"})),
            Some("a"),
            "timeoutMs",
        ),
        (
            request_with("a", json!({"noUi": "never"})),
            Some("a"),
            "noUi",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": "a"}),
            Some("a"),
            "params must have required property 'questions'",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": "a", "questions": []}),
            Some("a"),
            "params/questions must NOT have fewer than 1 items",
        ),
        (
            json!({"type": "ask-user-request", "correlationId": "a", "questions": [
                {"question": "Q?", "header": "H", "type": "choice", "options": [{"label": "only", "description": ""}]}
            ]}),
            Some("a"),
            "Question 1: type='choice' requires 'options' array with 2-4 items.",
        ),
    ];
    for (frame, id, needle) in cases {
        c.send(frame.clone()).await;
        let e = c.recv_error("invalid-request").await;
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{frame} → {msg}");
        assert_eq!(e["correlationId"].as_str(), id, "{e}");
    }
    // A correlationId of exactly 128 characters (not bytes) is fine.
    let mut ok = choice_request(&"é".repeat(128));
    ok["noUi"] = json!("reject");
    c.send(ok).await;
    assert_eq!(c.recv_type("ask-user-response").await["reason"], "no-ui");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_pending_per_connection_and_in_total() {
    let d = Daemon::start_with(&["--max-pending-per-connection", "3", "--max-pending", "5"]);
    let mut a = d.connect().await;
    for i in 0..3 {
        a.send(choice_request(&format!("a{i}"))).await;
    }
    a.send(choice_request("a3")).await;
    assert_eq!(
        a.recv_error("too-many-pending").await["correlationId"],
        "a3"
    );
    let mut b = d.connect().await;
    b.send(choice_request("b0")).await;
    b.send(choice_request("b1")).await;
    b.send(choice_request("b2")).await;
    let e = b.recv_error("too-many-pending").await;
    assert_eq!(e["correlationId"], "b2");
    assert!(e["message"].as_str().unwrap().contains("5"), "{e}");
    // Freed slots can be used again.
    a.send(json!({"type": "ask-user-cancel", "correlationId": "a0"}))
        .await;
    a.recv_type("ask-user-response").await;
    b.send(choice_request("b2")).await;
    b.ping().await;
    let stats = stats(&d).await;
    assert_eq!(stats["pending"], 5);
    assert_eq!(stats["errors"]["too-many-pending"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_are_refused_with_an_error() {
    let d = Daemon::start_with(&["--max-connections", "2"]);
    // The harness's readiness probe holds a slot until the daemon notices it closed.
    let mut a = served(&d).await;
    let b = served(&d).await;
    let mut c = d.connect().await;
    c.recv_error("too-many-connections").await;
    c.expect_closed().await;
    a.ping().await;
    // A closed connection frees its slot (once the daemon has noticed the close).
    drop(b);
    served(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_users_are_forbidden() {
    if askbusd::paths::effective_uid() != 0 {
        eprintln!("skipped: needs root to run a client as another uid");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let d = Daemon::start();
    // Let the filesystem allow the connection, so the daemon's own check is what refuses.
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = d.cli().arg("stats").uid(65534).gid(65534).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("forbidden") && stderr.contains("65534"),
        "{stderr}"
    );
    let stats = stats(&d).await;
    assert_eq!(stats["errors"]["forbidden"], 1);
    assert!(d.log_text().contains("uid not allowed"));
}

/// A connection the daemon serves, retrying while connection slots are still being freed.
async fn served(d: &Daemon) -> common::Raw {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = d.connect().await;
        c.send(json!({"type": "ping"})).await;
        match c.recv_within(Duration::from_secs(5)).await {
            Some(f) if f["type"] == "pong" => return c,
            Some(f) => assert_eq!(f["code"], "too-many-connections", "{f}"),
            None => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no connection slot freed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn stats(d: &Daemon) -> Value {
    let mut c = d.connect().await;
    c.send(json!({"type": "stats"})).await;
    c.recv_type("stats").await
}
