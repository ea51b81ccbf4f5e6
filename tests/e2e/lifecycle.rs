//! The daemon's life and load: startup and socket safety, slow UIs, shutdown with pending
//! requests, telemetry and stats, and many producers racing many UIs.

use crate::harness as common;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{answer, choice_request, daemon_bin, request_with, Daemon};
use serde_json::{json, Value};

#[test]
fn socket_is_private_and_its_directory_is_created_0700() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nested/run/askbus.sock");
    let mut child = Command::new(daemon_bin())
        .arg("--socket")
        .arg(&socket)
        .arg("--no-telemetry")
        .arg("--no-store")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(5));
    }
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let parent = std::fs::metadata(socket.parent().unwrap()).unwrap();
    assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists(), "socket removed at exit");
}

#[test]
fn refuses_to_replace_files_symlinks_or_a_live_daemon_but_clears_a_stale_socket() {
    let dir = tempfile::tempdir().unwrap();
    let run = |socket: &std::path::Path| {
        Command::new(daemon_bin())
            .arg("--socket")
            .arg(socket)
            .arg("--no-telemetry")
            .arg("--no-store")
            .output()
            .unwrap()
    };
    let file = dir.path().join("file.sock");
    std::fs::write(&file, "precious").unwrap();
    let out = run(&file);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");

    let target = dir.path().join("target");
    std::fs::write(&target, "t").unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = run(&link);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    let live = Daemon::start();
    let out = run(&live.socket);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already serving"));

    // A socket nobody listens on (a crashed daemon's) is replaced.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let mut d = Command::new(daemon_bin())
        .arg("--socket")
        .arg(&stale)
        .arg("--no-telemetry")
        .arg("--no-store")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&stale).is_err() {
        assert!(
            Instant::now() < deadline,
            "never took over the stale socket"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
    assert!(d.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_that_never_reads_delays_nobody() {
    let d = Daemon::start_with(&[
        "--max-queue-bytes",
        "1048576",
        "--max-pending-per-connection",
        "1000",
    ]);
    let (_stuck, _) = d.ui().await; // subscribed, never reads again
    let (mut fast, _) = d.ui().await;
    let mut producer = d.connect().await;
    let big = "x".repeat(20 * 1024);
    let started = Instant::now();
    for i in 0..300 {
        let mut req = choice_request(&format!("big{i}"));
        req["questions"][0]["question"] = json!(format!("{i} {big}"));
        producer.send(req).await;
        let got = fast.recv_type("ask-user-request").await;
        assert_eq!(got["correlationId"], format!("big{i}"));
        fast.send(answer(&format!("big{i}"), json!({"0": "SQLite"})))
            .await;
        fast.recv_type("ask-user-ack").await;
        assert_eq!(
            producer.recv_type("ask-user-response").await["reason"],
            "answered"
        );
    }
    let took = started.elapsed();
    let mut c = d.connect().await;
    c.send(json!({"type": "stats"})).await;
    let stats = c.recv_type("stats").await;
    assert_eq!(
        stats["queueOverflows"], 1,
        "the stuck UI was cut off: {stats}"
    );
    assert_eq!(stats["uis"], 1);
    assert_eq!(stats["outcomes"]["answered"], 300);
    assert!(d.log_text().contains("outbound queue overflowed"));
    eprintln!("300 × 20 KiB round trips beside a stuck UI: {took:?}");
}

#[test]
fn sigterm_with_200_pending_answers_every_one_and_exits_clean() {
    let rt = common::rt();
    let mut d = Daemon::start_with(&["--max-pending-per-connection", "500"]);
    let (mut producer, mut ui) = rt.block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut producer = d.connect().await;
        for i in 0..200 {
            producer.send(choice_request(&format!("s{i}"))).await;
        }
        producer.ping().await;
        for _ in 0..200 {
            ui.recv_type("ask-user-request").await;
        }
        (producer, ui)
    });
    let (status, took) = d.terminate(Duration::from_secs(60));
    assert!(status.success(), "{status}");
    assert!(!d.socket.exists(), "socket removed");
    rt.block_on(async {
        let mut ids = HashSet::new();
        for _ in 0..200 {
            let r = producer.recv_type("ask-user-response").await;
            assert_eq!(r["reason"], "shutdown");
            assert_eq!(r["cancelled"], true);
            ids.insert(r["correlationId"].as_str().unwrap().to_owned());
        }
        assert_eq!(ids.len(), 200);
        producer.expect_closed().await;
        for _ in 0..200 {
            assert_eq!(
                ui.recv_type("ask-user-withdrawn").await["reason"],
                "shutdown"
            );
        }
        ui.expect_closed().await;
    });
    let records = d.telemetry_records();
    assert_eq!(records.len(), 200);
    assert!(records.iter().all(|r| r["reason"] == "shutdown"));
    eprintln!("shutdown with 200 pending took {took:?}");
}

#[test]
#[allow(clippy::async_yields_async)] // the block hands back the reader task to await later
fn sigterm_with_10000_pending_exits_cleanly() {
    let rt = common::rt();
    let mut d = Daemon::start_with(&["--max-pending-per-connection", "20000", "--no-telemetry"]);
    let reader = rt.block_on(async {
        let mut producer = d.connect().await;
        for i in 0..10_000 {
            producer.send(choice_request(&format!("m{i}"))).await;
        }
        producer.ping().await;
        // Keep reading while the daemon shuts down, as a real producer would.
        tokio::spawn(async move {
            for _ in 0..10_000 {
                assert_eq!(
                    producer.recv_type("ask-user-response").await["reason"],
                    "shutdown"
                );
            }
        })
    });
    // How fast is a benchmark's business (BENCHMARKS.md); here only that it ends cleanly.
    let (status, took) = d.terminate(Duration::from_secs(60));
    assert!(status.success());
    rt.block_on(reader).unwrap();
    eprintln!("shutdown with 10,000 pending took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_records_every_end_with_the_reference_metrics() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p = d.connect().await;
    p.send(json!({"type": "hello", "protocol": 1, "client": "agent/1"}))
        .await;
    p.recv_type("welcome").await;
    let two = json!({"type": "ask-user-request", "correlationId": "t1", "questions": [
        {"question": "A?", "header": "A", "type": "text"},
        {"question": "B?", "header": "B", "type": "yesno"}
    ]});
    p.send(two).await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("t1", json!({"1": "Yes"}))).await;
    p.recv_type("ask-user-response").await;
    p.send(json!({"type": "ask-user-request", "correlationId": "t2", "questions": "no"}))
        .await;
    p.recv_error("invalid-request").await;
    let records = d.wait_telemetry(2);
    assert_eq!(records.len(), 2);
    let a = &records[0];
    assert_eq!(a["correlationId"], "t1");
    assert_eq!(a["reason"], "answered");
    assert_eq!(a["producer"]["client"], "agent/1");
    assert_eq!(a["producer"]["pid"], std::process::id());
    assert_eq!(a["ui"]["client"], "test-ui/1");
    assert!(a["ui"]["pid"].is_u64());
    assert!(a["latencyMs"].is_u64());
    assert_eq!(a["question_types"], json!(["text", "yesno"]));
    assert_eq!(a["dismissed"], false);
    assert_eq!(a["empty_submission"], false);
    assert_eq!(a["answer_count"], 1);
    assert!(a["node"].as_str().is_some_and(|n| !n.is_empty()));
    let ts = a["ts"].as_str().unwrap();
    assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
    let r = &records[1];
    assert_eq!(r["reason"], "rejected");
    assert_eq!(r["code"], "invalid-request");
    assert!(r.get("ui").is_none());
}

/// A daemon SIGKILLed while writing can leave a torn last line; the next daemon appending to
/// the same file starts its first record on a line of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_telemetry_line_left_by_a_crash_does_not_swallow_the_next_record() {
    let mut d = Daemon::start();
    d.kill();
    let torn = r#"{"ts":"2026-12-02T15:29:38.843Z","node":"vm","correlationId":"cut-he"#;
    std::fs::write(&d.telemetry, torn).unwrap();
    d.restart();
    let mut p = d.connect().await;
    p.send(request_with("after", json!({"noUi": "reject"})))
        .await;
    assert_eq!(p.recv_type("ask-user-response").await["reason"], "no-ui");
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&d.telemetry).unwrap();
        // The daemon ends the torn line as it opens the file, before any record: wait for
        // the record itself, not just for a final newline.
        if (text.ends_with('\n') && text.lines().count() >= 2) || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text:?}");
    assert_eq!(lines[0], torn);
    let record: Value = serde_json::from_str(lines[1]).expect("a whole record");
    assert_eq!(record["correlationId"], "after");
    assert_eq!(record["reason"], "no-ui");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_what_happened() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p = d.connect().await;
    p.send(choice_request("x1")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("x1", json!({"0": "SQLite"}))).await;
    p.recv_type("ask-user-response").await;
    p.send(choice_request("x2")).await;
    p.send_payload(b"nope").await;
    p.recv_error("invalid-json").await;
    p.send(json!({"type": "stats"})).await;
    let s = p.recv_type("stats").await;
    assert_eq!(s["connections"], 2);
    assert_eq!(s["uis"], 1);
    assert_eq!(s["producers"], 1);
    assert_eq!(s["pending"], 1);
    assert_eq!(
        s["requests"],
        json!({"accepted": 2, "rejected": 0, "resolved": 1})
    );
    assert_eq!(s["outcomes"]["answered"], 1);
    assert_eq!(s["errors"]["invalid-json"], 1);
    assert_eq!(s["latencyMs"]["count"], 1);
    assert!(s["latencyMs"]["p50"].as_f64().unwrap() > 0.0);
    assert!(s["framesIn"].as_u64().unwrap() >= 6);
    assert!(s["uptimeMs"].is_u64());
}

/// 20 producers × 50 requests, 3 UIs racing to answer each: exactly one terminal frame per
/// request, the answer is the one some UI sent for that id, telemetry holds 1,000 lines.
#[test]
fn load_20_producers_x_50_with_3_racing_uis() {
    let rt = common::rt();
    let d = Daemon::start();
    let started = Instant::now();
    let peak_rss = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (pid, peak, stop) = (d.pid(), peak_rss.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(kb) = vm_hwm_kib(pid) {
                    peak.fetch_max(kb, std::sync::atomic::Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    rt.block_on(async {
        let mut uis = Vec::new();
        for u in 0..3 {
            let (mut ui, _) = d.ui().await;
            uis.push(tokio::spawn(async move {
                // Each UI answers everything it sees with its own mark, until told to stop.
                let mut acks = 0;
                loop {
                    let Some(f) = ui.recv_within(Duration::from_secs(3)).await else {
                        return acks;
                    };
                    match f["type"].as_str().unwrap() {
                        "ask-user-request" => {
                            let id = f["correlationId"].as_str().unwrap();
                            ui.send(answer(id, json!({"0": format!("{id}@ui{u}")})))
                                .await;
                        }
                        "ask-user-ack" => acks += 1,
                        _ => {}
                    }
                }
            }));
        }
        let mut producers = Vec::new();
        for p in 0..20 {
            let mut conn = d.connect().await;
            producers.push(tokio::spawn(async move {
                for i in 0..50 {
                    conn.send(choice_request(&format!("p{p}-{i}"))).await;
                }
                let mut got: HashMap<String, Value> = HashMap::new();
                for _ in 0..50 {
                    let r = conn.recv_type("ask-user-response").await;
                    let id = r["correlationId"].as_str().unwrap().to_owned();
                    assert!(
                        got.insert(id, r).is_none(),
                        "two terminal frames for one id"
                    );
                }
                conn.expect_silence(Duration::from_millis(50)).await;
                got
            }));
        }
        let mut total = 0;
        for (p, h) in producers.into_iter().enumerate() {
            let got = h.await.unwrap();
            for (id, r) in &got {
                assert!(
                    id.starts_with(&format!("p{p}-")),
                    "another producer's answer: {id}"
                );
                assert_eq!(r["reason"], "answered");
                let a = r["answers"]["0"].as_str().unwrap();
                assert!(
                    a.starts_with(&format!("{id}@ui")),
                    "answer for {id} was {a}"
                );
            }
            total += got.len();
        }
        assert_eq!(total, 1000);
        let elapsed = started.elapsed();
        let mut acks = 0;
        for h in uis {
            acks += h.await.unwrap();
        }
        assert_eq!(acks, 1000, "exactly one winning UI per request");
        eprintln!("20×50 with 3 racing UIs: {elapsed:?} wall");
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let records = d.wait_telemetry(1000);
    assert_eq!(records.len(), 1000);
    let ids: HashSet<_> = records
        .iter()
        .map(|r| r["correlationId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1000);
    eprintln!(
        "askbusd peak RSS (VmHWM): {} KiB",
        peak_rss.load(std::sync::atomic::Ordering::Relaxed)
    );
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Telemetry never drops a record under load: 100,000 requests leave exactly 100,000 lines,
/// one per correlationId (each ends at once with `no-ui`, so the run is quick).
#[test]
fn telemetry_keeps_every_record_of_100000_requests() {
    let rt = common::rt();
    let mut d = Daemon::start_with(&["--no-ui", "reject"]);
    const CONNS: usize = 4;
    const ROUNDS: usize = 25;
    const PER_ROUND: usize = 1000;
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..CONNS {
            let mut conn = d.connect().await;
            tasks.push(tokio::spawn(async move {
                // Write a round, then read its answers, so no queue has to hold the whole run.
                for r in 0..ROUNDS {
                    for i in 0..PER_ROUND {
                        conn.send(choice_request(&format!("c{c}-{r}-{i}"))).await;
                    }
                    for _ in 0..PER_ROUND {
                        assert_eq!(conn.recv_type("ask-user-response").await["reason"], "no-ui");
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let elapsed = started.elapsed();
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success());
    let records = d.telemetry_records();
    assert_eq!(records.len(), CONNS * ROUNDS * PER_ROUND);
    let ids: HashSet<_> = records
        .iter()
        .map(|r| r["correlationId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), records.len());
    assert!(records.iter().all(|r| r["reason"] == "no-ui"));
    eprintln!("100,000 requests and their telemetry lines in {elapsed:?}");
}
