//! `/metrics` after a known workload: every counter exact, the latency histogram in the right
//! buckets, and the output accepted by Prometheus's own parser and linter (`promtool check
//! metrics`), served on a Unix socket and on loopback TCP.

use crate::harness as common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{answer, choice_request, parse_metrics, request_with, rt, scrape_unix, Daemon};
use serde_json::json;

fn metrics_daemon() -> (Daemon, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let sock = dir.join("metrics.sock");
    let d = Daemon::start_with(&["--metrics-listen", sock.to_str().unwrap()]);
    (d, sock)
}

/// Scrapes until `name` reaches `want` (frames are counted once flushed, just after the peer
/// may already have read them), then returns that scrape.
fn scrape_when(sock: &std::path::Path, name: &str, want: f64) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = parse_metrics(&scrape_unix(sock));
        if m.get(name) == Some(&want) || Instant::now() > deadline {
            return m;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The golden approval (`client/tool-confirmation-request.json`) under id `id`, plus `extra`.
fn approval(id: &str, extra: serde_json::Value) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/client/tool-confirmation-request.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["correlationId"] = json!(id);
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn decide(id: &str, outcome: &str) -> serde_json::Value {
    json!({"type": "tool-confirmation-response", "correlationId": id,
           "confirmed": outcome != "cancel", "outcome": outcome})
}

#[test]
fn approvals_are_counted_apart_from_questions() {
    let (d, sock) = metrics_daemon();
    rt().block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(choice_request("q")).await;
        ui.recv_type("ask-user-request").await;
        ui.send(answer("q", json!({"0": "SQLite"}))).await;
        ui.recv_type("ask-user-ack").await;
        p.recv_type("ask-user-response").await;
        for (id, outcome) in [("allow", "proceed_always"), ("deny", "cancel")] {
            p.send(approval(id, json!({}))).await;
            ui.recv_type("tool-confirmation-request").await;
            ui.send(decide(id, outcome)).await;
            ui.recv_type("tool-confirmation-ack").await;
            p.recv_type("tool-confirmation-response").await;
        }
        p.send(approval("late", json!({"timeoutMs": 50}))).await;
        ui.recv_type("tool-confirmation-request").await;
        assert_eq!(
            p.recv_type("tool-confirmation-response").await["reason"],
            "timeout"
        );
        p.send(approval("bad", json!({"toolCall": "ls"}))).await;
        p.recv_error("invalid-request").await;
        d.wait_telemetry(5);
    });
    let m = scrape_when(&sock, "askbus_approvals_total{outcome=\"rejected\"}", 1.0);
    for (name, want) in [
        ("askbus_requests_accepted_total", 4.0),
        ("askbus_requests_total{outcome=\"answered\"}", 3.0),
        ("askbus_requests_total{outcome=\"timeout\"}", 1.0),
        ("askbus_requests_total{outcome=\"rejected\"}", 1.0),
        ("askbus_approvals_accepted_total", 3.0),
        ("askbus_approvals_total{outcome=\"answered\"}", 2.0),
        ("askbus_approvals_total{outcome=\"timeout\"}", 1.0),
        ("askbus_approvals_total{outcome=\"rejected\"}", 1.0),
        ("askbus_approvals_total{outcome=\"dismissed\"}", 0.0),
        (
            "askbus_approval_decisions_total{decision=\"proceed_always\"}",
            1.0,
        ),
        ("askbus_approval_decisions_total{decision=\"cancel\"}", 1.0),
        (
            "askbus_approval_decisions_total{decision=\"proceed_once\"}",
            0.0,
        ),
        ("askbus_approvals_confirmed_total", 1.0),
        ("askbus_answer_latency_seconds_count", 3.0),
        ("askbus_approval_latency_seconds_count", 2.0),
    ] {
        assert_eq!(m.get(name), Some(&want), "{name}");
    }
}

#[test]
fn every_counter_is_exact_after_a_known_workload() {
    let (d, sock) = metrics_daemon();
    rt().block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        // Answered after a second.
        p.send(choice_request("slow")).await;
        ui.recv_type("ask-user-request").await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        ui.send(answer("slow", json!({"0": "SQLite"}))).await;
        ui.recv_type("ask-user-ack").await;
        assert_eq!(p.recv_type("ask-user-response").await["reason"], "answered");
        // Dismissed at once.
        p.send(choice_request("quick")).await;
        ui.recv_type("ask-user-request").await;
        ui.send(json!({"type": "ask-user-response", "correlationId": "quick", "answers": {}, "cancelled": true}))
            .await;
        ui.recv_type("ask-user-ack").await;
        assert_eq!(p.recv_type("ask-user-response").await["reason"], "dismissed");
        // Withdrawn by the producer.
        p.send(choice_request("gone")).await;
        ui.recv_type("ask-user-request").await;
        p.send(json!({"type": "ask-user-cancel", "correlationId": "gone"}))
            .await;
        assert_eq!(p.recv_type("ask-user-response").await["reason"], "withdrawn");
        ui.recv_type("ask-user-withdrawn").await;
        // Timed out.
        p.send(request_with("late", json!({"timeoutMs": 100}))).await;
        ui.recv_type("ask-user-request").await;
        assert_eq!(p.recv_type("ask-user-response").await["reason"], "timeout");
        ui.recv_type("ask-user-withdrawn").await;
        // Rejected, and a stray answer.
        p.send(json!({"type": "ask-user-request", "correlationId": "bad", "questions": []}))
            .await;
        p.recv_error("invalid-request").await;
        ui.send(answer("nope", json!({"0": "x"}))).await;
        ui.recv_error("not-pending").await;
        d.wait_telemetry(5);

        // Frames: the UI sent 4 and got 10, the producer sent 6 and got 5.
        let m = scrape_when(&sock, "askbus_frames_sent_total", 15.0);
        let mut want: BTreeMap<String, f64> = [
            ("askbus_frames_received_total", 10.0),
            ("askbus_frames_sent_total", 15.0),
            ("askbus_requests_accepted_total", 4.0),
            ("askbus_requests_total{outcome=\"answered\"}", 1.0),
            ("askbus_requests_total{outcome=\"dismissed\"}", 1.0),
            ("askbus_requests_total{outcome=\"withdrawn\"}", 1.0),
            ("askbus_requests_total{outcome=\"timeout\"}", 1.0),
            ("askbus_requests_total{outcome=\"rejected\"}", 1.0),
            ("askbus_requests_total{outcome=\"no-ui\"}", 0.0),
            ("askbus_requests_total{outcome=\"shutdown\"}", 0.0),
            ("askbus_requests_total{outcome=\"producer-gone\"}", 0.0),
            ("askbus_pending", 0.0),
            ("askbus_connections{role=\"ui\"}", 1.0),
            ("askbus_connections{role=\"producer\"}", 1.0),
            ("askbus_connections{role=\"watcher\"}", 0.0),
            ("askbus_connections{role=\"idle\"}", 0.0),
            ("askbus_connections_accepted_total", 2.0),
            ("askbus_connections_refused_total", 0.0),
            ("askbus_queue_overflows_total", 0.0),
            ("askbus_telemetry_lines_total", 5.0),
            ("askbus_telemetry_errors_total", 0.0),
            ("askbus_answer_latency_seconds_count", 2.0),
            ("askbus_answer_latency_seconds_bucket{le=\"0.5\"}", 1.0),
            ("askbus_answer_latency_seconds_bucket{le=\"1\"}", 1.0),
            ("askbus_answer_latency_seconds_bucket{le=\"2.5\"}", 2.0),
            ("askbus_answer_latency_seconds_bucket{le=\"+Inf\"}", 2.0),
            (
                &format!(
                    "askbus_build_info{{version=\"{}\"}}",
                    env!("CARGO_PKG_VERSION")
                ),
                1.0,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for code in askbusd::protocol::ErrorCode::ALL {
            let n = match code.as_str() {
                "invalid-request" | "not-pending" => 1.0,
                _ => 0.0,
            };
            want.insert(format!("askbus_errors_total{{code=\"{code}\"}}"), n);
        }
        let got: BTreeMap<String, f64> = want
            .keys()
            .map(|k| (k.clone(), m.get(k).copied().unwrap_or(f64::NAN)))
            .collect();
        assert_eq!(got, want);
        let sum = m["askbus_answer_latency_seconds_sum"];
        assert!((1.1..2.5).contains(&sum), "latency sum {sum}");
        // The same counts as the stats frame.
        let mut c = d.connect().await;
        c.send(json!({"type": "stats"})).await;
        let stats = c.recv_type("stats").await;
        assert_eq!(stats["outcomes"]["answered"], 1);
        assert_eq!(stats["requests"]["rejected"], 1);
        assert_eq!(stats["framesIn"], 10 + 1);
    });
}

#[test]
fn promtool_accepts_the_exposition() {
    let (d, sock) = metrics_daemon();
    rt().block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(choice_request("q")).await;
        ui.recv_type("ask-user-request").await;
        ui.send(answer("q", json!({"0": "SQLite"}))).await;
        ui.recv_type("ask-user-ack").await;
        p.recv_type("ask-user-response").await;
        p.send(approval("a", json!({}))).await;
        ui.recv_type("tool-confirmation-request").await;
        ui.send(decide("a", "proceed_once")).await;
        ui.recv_type("tool-confirmation-ack").await;
        p.recv_type("tool-confirmation-response").await;
    });
    let text = scrape_unix(&sock);
    for family in [
        "# TYPE askbus_approvals_total counter",
        "# TYPE askbus_approval_decisions_total counter",
        "# TYPE askbus_approval_latency_seconds histogram",
        "# TYPE askbus_requests_total counter",
        "# TYPE askbus_pending gauge",
        "# TYPE askbus_connections gauge",
        "# TYPE askbus_answer_latency_seconds histogram",
        "# HELP askbus_errors_total ",
    ] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (apt-get install -y prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {said}\n{text}");
    assert!(said.trim().is_empty(), "promtool lint: {said}");
}

#[test]
fn metrics_on_loopback_tcp_serve_only_get_metrics() {
    let mut d = Daemon::start_with(&["--metrics-listen", "127.0.0.1:0"]);
    let log = d.log_text();
    let addr = log
        .split("metrics=http://")
        .nth(1)
        .and_then(|s| s.split("/metrics").next())
        .unwrap_or_else(|| panic!("no metrics address in {log}"))
        .to_owned();
    let get = |target: &str| common::http_get(std::net::TcpStream::connect(&addr).unwrap(), target);
    let (status, body) = get("/metrics");
    assert_eq!(status, 200);
    assert_eq!(parse_metrics(&body)["askbus_pending"], 0.0);
    assert_eq!(get("/").0, 404);
    let mut post = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        post,
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut post, &mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("allow: get, head"),
        "{reply}"
    );
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success());
}

#[test]
fn the_metrics_socket_is_group_readable_and_removed_at_exit() {
    let (mut d, sock) = metrics_daemon();
    assert_eq!(std::fs::metadata(&sock).unwrap().mode() & 0o777, 0o660);
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success());
    assert!(!sock.exists());
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
}

#[test]
fn a_non_loopback_metrics_address_is_refused() {
    let out = Command::new(common::daemon_bin())
        .args(["--metrics-listen", "0.0.0.0:9464", "--check-config"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}
