//! `askbus bench` (which runs the `askbus-bench` binary beside it), the baseline relay and
//! `askbus bench targets`, in short runs: they work, their JSON parses, the counts add up and
//! every figure is sane (positive, finite). No timing is asserted: these machines are too
//! noisy for that.

use crate::harness as common;

use std::path::Path;
use std::process::Command;

use common::Daemon;
use serde_json::Value;

/// Runs `askbus ARGS` (with `--daemon` pointing at the askbusd under test when the bench
/// starts one) and parses its one JSON object.
fn bench_json(args: &[&str]) -> Value {
    common::bench_bin();
    bench_json_of(Path::new(common::cli_bin()), args)
}

/// `askbus`, with `askbus-bench` beside it (or a clear failure saying how to build it).
fn askbus() -> Command {
    common::bench_bin();
    Command::new(common::cli_bin())
}

/// Puts a link to (or a copy of) `bin` in `dir` under its own name.
fn place(bin: &Path, dir: &Path) -> std::path::PathBuf {
    let to = dir.join(bin.file_name().expect("a file name"));
    if std::fs::hard_link(bin, &to).is_err() {
        common::copy_executable(bin, &to);
    }
    to
}

/// [`bench_json`] with the `askbus` at `exe`.
fn bench_json_of(exe: &Path, args: &[&str]) -> Value {
    let out = Command::new(exe).args(args).output().expect("run askbus");
    assert!(
        out.status.success(),
        "askbus {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("askbus {args:?} printed no JSON object ({e}): {text}"))
}

fn positive(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
    x
}

/// Checks one run's report: `requests` measured, sane rates and latencies in order.
fn check_run(r: &Value, target: &str, requests: u64) {
    assert_eq!(r["target"], target, "{r}");
    assert_eq!(r["requests"].as_u64(), Some(requests), "{r}");
    positive(&r["elapsed_s"], "elapsed_s");
    positive(&r["requests_per_s"], "requests_per_s");
    let l = &r["latency_us"];
    let p50 = positive(&l["p50"], "p50");
    let p90 = positive(&l["p90"], "p90");
    let p99 = positive(&l["p99"], "p99");
    let p999 = positive(&l["p99.9"], "p99.9");
    let max = positive(&l["max"], "max");
    positive(&l["mean"], "mean");
    assert!(
        p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
        "{l}"
    );
    assert!(r["frame_bytes"].as_u64().is_some_and(|b| b > 0), "{r}");
}

/// The figures of a target the bench started itself.
fn check_server(r: &Value) {
    let s = &r["server"];
    let cpu = s["cpu_ms"].as_f64().expect("cpu_ms");
    assert!(cpu.is_finite() && cpu >= 0.0, "{s}");
    let per = s["cpu_us_per_request"]
        .as_f64()
        .expect("cpu_us_per_request");
    assert!(per.is_finite() && per >= 0.0, "{s}");
    assert!(s["peak_rss_kib"].as_u64().is_some_and(|k| k > 0), "{s}");
}

#[test]
fn sequential_run_against_a_daemon_it_starts() {
    let r = bench_json(&[
        "bench",
        "--daemon",
        common::daemon_bin(),
        "--requests",
        "300",
        "--warmup",
        "30",
        "--json",
    ]);
    check_run(&r, "askbusd", 300);
    check_server(&r);
    assert_eq!(r["mode"], "sequential");
    assert_eq!(r["in_flight"], 1);
    assert_eq!(r["frame_bytes"], 300, "the default question is 300 bytes");
    assert_eq!(r["telemetry"], true);
}

#[test]
fn approval_run_allows_each_once() {
    let r = bench_json(&[
        "bench",
        "--daemon",
        common::daemon_bin(),
        "--kind",
        "approval",
        "--requests",
        "300",
        "--warmup",
        "30",
        "--json",
    ]);
    check_run(&r, "askbusd", 300);
    check_server(&r);
    assert_eq!(r["kind"], "approval");
    assert_eq!(r["frame_bytes"], 512, "the default approval is 512 bytes");
}

#[test]
fn concurrent_run_with_its_own_shape_and_size() {
    let r = bench_json(&[
        "bench",
        "--daemon",
        common::daemon_bin(),
        "--mode",
        "concurrent",
        "--producers",
        "4",
        "--uis",
        "3",
        "--in-flight",
        "16",
        "--size",
        "1000",
        "--requests",
        "2001",
        "--warmup",
        "100",
        "--no-telemetry",
        "--json",
    ]);
    check_run(&r, "askbusd", 2001);
    check_server(&r);
    assert_eq!(r["mode"], "concurrent");
    assert_eq!(
        (r["producers"].as_u64(), r["uis"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(r["in_flight"], 16);
    assert_eq!(r["frame_bytes"], 1000);
    assert_eq!(r["telemetry"], false);
}

#[test]
fn duration_run_counts_what_it_measured() {
    let r = bench_json(&[
        "bench",
        "--daemon",
        common::daemon_bin(),
        "--mode",
        "concurrent",
        "--duration",
        "300ms",
        "--warmup",
        "50",
        "--json",
    ]);
    let n = r["requests"].as_u64().expect("requests");
    assert!(n > 0, "{r}");
    check_run(&r, "askbusd", n);
}

#[test]
fn relay_alone() {
    let r = bench_json(&[
        "bench",
        "--target",
        "relay",
        "--mode",
        "concurrent",
        "--requests",
        "3000",
        "--warmup",
        "100",
        "--json",
    ]);
    check_run(&r, "relay", 3000);
    check_server(&r);
    assert!(r.get("telemetry").is_none(), "{r}");
}

#[test]
fn baseline_alternates_and_gives_ratios() {
    let b = bench_json(&[
        "bench",
        "--daemon",
        common::daemon_bin(),
        "--baseline",
        "--rounds",
        "2",
        "--requests",
        "200",
        "--warmup",
        "20",
        "--json",
    ]);
    let runs = b["runs"].as_array().expect("runs");
    let order: Vec<_> = runs.iter().map(|r| r["target"].as_str().unwrap()).collect();
    assert_eq!(order, ["askbusd", "relay", "askbusd", "relay"]);
    for r in runs {
        check_run(r, r["target"].as_str().unwrap(), 200);
        check_server(r);
    }
    for side in ["askbusd", "relay"] {
        assert_eq!(b[side]["rounds"], 2, "{b}");
        positive(&b[side]["requests_per_s"], "median requests_per_s");
        positive(&b[side]["latency_us"]["p50"], "median p50");
    }
    for ratio in ["throughput", "p50", "p90", "p99", "p99.9"] {
        positive(&b["ratios"][ratio], ratio);
    }
    let want = b["askbusd"]["requests_per_s"].as_f64().unwrap()
        / b["relay"]["requests_per_s"].as_f64().unwrap();
    let got = b["ratios"]["throughput"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
}

#[test]
fn against_a_running_daemon() {
    let d = Daemon::start();
    let socket = d.socket.display().to_string();
    let r = bench_json(&[
        "--socket",
        &socket,
        "bench",
        "--requests",
        "250",
        "--warmup",
        "25",
        "--json",
    ]);
    check_run(&r, "askbusd", 250);
    assert!(
        r.get("server").is_none(),
        "no CPU figures for a daemon it did not start"
    );
    // Every request the bench sent was accepted and answered, warm-up included.
    let out = d.cli().args(["stats", "--json"]).output().expect("stats");
    assert!(out.status.success());
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    assert_eq!(stats["requests"]["accepted"], 275, "{stats}");
    assert_eq!(stats["outcomes"]["answered"], 275, "{stats}");
    assert_eq!(stats["pending"], 0, "{stats}");

    // With --baseline, askbusd's rounds use the running daemon and the relay is started.
    let b = bench_json(&[
        "--socket",
        &socket,
        "bench",
        "--baseline",
        "--rounds",
        "1",
        "--requests",
        "100",
        "--warmup",
        "10",
        "--json",
    ]);
    assert!(b["runs"][0].get("server").is_none(), "{b}");
    check_server(&b["runs"][1]);
    positive(&b["ratios"]["p50"], "p50 ratio");
}

/// An installed `askbus` with no askbusd beside it (e.g. the client on another package) can
/// still measure the daemon that is running.
#[test]
fn a_running_daemon_is_measured_without_an_askbusd_binary() {
    let d = Daemon::start();
    let alone = tempfile::tempdir().expect("temp dir");
    let exe = place(Path::new(common::cli_bin()), alone.path());
    place(&common::bench_bin(), alone.path());
    let socket = d.socket.display().to_string();
    let args = [
        "--socket",
        &socket,
        "bench",
        "--requests",
        "50",
        "--warmup",
        "5",
        "--json",
    ];
    check_run(&bench_json_of(&exe, &args), "askbusd", 50);
    // Starting one still needs it, and says where it looked.
    let out = Command::new(&exe)
        .args(["bench", "--requests", "50", "--warmup", "5"])
        .output()
        .expect("run askbus");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("askbusd"), "{err}");
}

/// An `askbus` with no `askbus-bench` beside it or on PATH says how to build it; found on
/// PATH, it is run with the arguments as given (`--socket` before `bench` included).
#[test]
fn the_bench_binary_is_found_beside_askbus_or_on_path() {
    let alone = tempfile::tempdir().expect("temp dir");
    let exe = place(Path::new(common::cli_bin()), alone.path());
    let out = Command::new(&exe)
        .args(["bench", "--requests", "5"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run askbus");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("askbus-bench") && err.contains("cargo build -p askbus-bench"),
        "{err}"
    );

    let on_path = tempfile::tempdir().expect("temp dir");
    place(&common::bench_bin(), on_path.path());
    let d = Daemon::start();
    let socket = d.socket.display().to_string();
    let out = Command::new(&exe)
        .args(["--socket", &socket, "bench", "--requests", "20"])
        .args(["--warmup", "2", "--json"])
        .env("PATH", on_path.path())
        .output()
        .expect("run askbus");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    check_run(&r, "askbusd", 20);
}

#[test]
fn human_output() {
    let out = askbus()
        .args(["bench", "--daemon", common::daemon_bin()])
        .args(["--requests", "100", "--warmup", "10"])
        .output()
        .expect("run askbus");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("requests/s") && text.contains("p99.9"),
        "{text}"
    );
    assert!(text.contains("askbusd CPU"), "{text}");
}

#[test]
fn bad_shapes_are_refused() {
    for args in [
        &["bench", "--in-flight", "4"][..],
        &[
            "bench",
            "--mode",
            "concurrent",
            "--producers",
            "8",
            "--in-flight",
            "4",
        ],
        &["bench", "--size", "20"],
    ] {
        let out = askbus()
            .args(args)
            .args(["--daemon", common::daemon_bin()])
            .output()
            .expect("run askbus");
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!out.stderr.is_empty(), "{args:?} said nothing");
    }
}

#[test]
fn targets_quick() {
    let t = bench_json(&[
        "bench",
        "targets",
        "--quick",
        "--daemon",
        common::daemon_bin(),
        "--json",
    ]);
    assert_eq!(t["quick"], true);
    let rows = t["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 21, "one row per target: {t}");
    let mut met = 0;
    for r in rows {
        assert!(r["what"].as_str().is_some_and(|w| !w.is_empty()), "{r}");
        assert!(r["target"].as_str().is_some_and(|w| !w.is_empty()), "{r}");
        let m = r["measured"].as_f64().unwrap_or_else(|| panic!("{r}"));
        // Only the RSS beyond the frames may be below 0 (a daemon storing less than the
        // frame it was sent).
        assert!(m.is_finite(), "{r}");
        met += usize::from(r["met"].as_bool().expect("met"));
    }
    assert_eq!(t["met"].as_u64(), Some(met as u64));
    assert_eq!(t["missed"].as_u64(), Some((rows.len() - met) as u64));
    // The ratios are made of positive figures from both sides.
    let seq = &rows[0]["detail"];
    positive(&seq["askbusd_us"], "askbusd p50");
    positive(&seq["relay_us"], "relay p50");
    let approval = &rows[10];
    assert!(
        approval["what"].as_str().unwrap().starts_with("approval"),
        "{approval}"
    );
    positive(&approval["detail"]["approval_us"], "approval p50");
    positive(&approval["detail"]["question_us"], "question p50");
    let thr = &rows[2]["detail"];
    positive(&thr["askbusd_per_s"], "askbusd throughput");
    positive(&thr["relay_per_s"], "relay throughput");
    let fan = &rows[8]["detail"];
    for k in [
        "one_ui_us",
        "all_uis_us",
        "relay_one_ui_us",
        "relay_all_uis_us",
    ] {
        positive(&fan[k], k);
    }
    // Ratios, memory per connection and start-up time are positive; CPU and ticks are not
    // negative.
    for i in [0, 1, 2, 3, 4, 8, 9] {
        positive(&rows[i]["measured"], rows[i]["what"].as_str().unwrap());
    }
    for i in [6, 7] {
        assert!(rows[i]["measured"].as_f64().unwrap() >= 0.0, "{}", rows[i]);
    }
    positive(
        &rows[5]["detail"]["rss_each_kib"],
        "RSS per pending question",
    );
    // The policy rows: an approval a rule decided with no UI (the probe says so) and questions
    // with the rules loaded, both ratios of positive figures.
    let by_rule = &rows[11];
    assert!(
        by_rule["what"]
            .as_str()
            .unwrap()
            .starts_with("approval a rule allows"),
        "{by_rule}"
    );
    positive(
        &by_rule["detail"]["approval_by_rule_us"],
        "approval by rule p50",
    );
    positive(&by_rule["detail"]["question_us"], "question p50 with rules");
    positive(&rows[12]["detail"]["rules_us"], "question p50 with rules");
    positive(
        &rows[12]["detail"]["off_us"],
        "question p50 with policies off",
    );
    // The store's rows, each mode's throughput and p50 against --no-store's: ratios of positive
    // figures, a restart, a history query that found records, the daemon's memory, JetStream's
    // side.
    for i in [11, 12, 13, 14, 15, 16, 17, 18, 20] {
        positive(&rows[i]["measured"], rows[i]["what"].as_str().unwrap());
    }
    assert!(
        rows[14]["what"]
            .as_str()
            .unwrap()
            .contains("--store-sync normal"),
        "{}",
        rows[14]
    );
    for i in [13, 14] {
        positive(&rows[i]["detail"]["store_per_s"], "store throughput");
        positive(&rows[i]["detail"]["no_store_per_s"], "no-store throughput");
    }
    for i in [15, 16] {
        positive(&rows[i]["detail"]["store_us"], "store p50");
        positive(&rows[i]["detail"]["no_store_us"], "no-store p50");
    }
    positive(&rows[17]["detail"]["rss_after_kib"], "RSS after a restart");
    assert!(
        rows[18]["detail"]["records_answered"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{}",
        rows[18]
    );
    positive(&rows[18]["detail"]["direct_ms"], "history on the file");
    assert!(rows[19]["measured"].as_f64().is_some_and(f64::is_finite));
    positive(&rows[19]["detail"]["rss_kib"], "RSS with history");
    positive(&rows[20]["detail"]["jetstream_us"], "JetStream p50");
}

/// `askbus bench federation` on a real nats-server (`$NATS_SERVER` or `nats-server` on the
/// PATH, as tests/e2e/federation.rs uses): its four rows, each made of positive figures from both
/// sides, and the showing node held every question.
#[test]
fn federation_quick() {
    let nats = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let t = bench_json(&[
        "bench",
        "federation",
        "--quick",
        "--rounds",
        "1",
        "--pending",
        "300",
        "--nats-server",
        &nats,
        "--daemon",
        common::daemon_bin(),
        "--json",
    ]);
    let rows = t["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{t}");
    positive(&rows[0]["detail"]["askbus_us"], "cross-node p50");
    positive(&rows[0]["detail"]["nats_us"], "raw NATS p50");
    positive(&rows[1]["detail"]["askbus_per_s"], "cross-node throughput");
    positive(&rows[1]["detail"]["nats_per_s"], "raw NATS throughput");
    let memory = &rows[2];
    assert!(
        memory["what"]
            .as_str()
            .unwrap()
            .starts_with("300 federated"),
        "{memory}"
    );
    positive(&memory["detail"]["after_kib"], "the showing node's RSS");
    assert!(
        rows[3]["measured"].as_f64().is_some_and(|x| x >= 0.0),
        "{t}"
    );
    let met = rows.iter().filter(|r| r["met"] == true).count() as u64;
    assert_eq!(t["met"].as_u64(), Some(met), "{t}");
}

/// `askbus bench chat` on a daemon of its own, `askbus chat telegram` and the bench's loopback
/// Bot API stand-in: its five rows, made of positive figures from both sides (the producer's
/// writes and the stand-in's reads, the chat process's /proc), every pending request shown
/// (ten messages of their own and the digest), and nothing but the long poll in the window.
#[test]
fn chat_quick() {
    let t = bench_json(&[
        "bench",
        "chat",
        "--quick",
        "--requests",
        "60",
        "--pending",
        "60",
        "--daemon",
        common::daemon_bin(),
        "--json",
    ]);
    let rows = t["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5, "{t}");
    let posted = &rows[0];
    assert!(
        posted["what"].as_str().unwrap().ends_with("p50 of 60"),
        "{posted}"
    );
    let p50 = positive(&posted["measured"], "write to sendMessage p50");
    let p95 = positive(&rows[1]["measured"], "write to sendMessage p95");
    assert!(p50 <= p95, "{t}");
    assert!(p95 <= positive(&posted["detail"]["max_ms"], "max"), "{t}");
    assert_eq!(posted["detail"]["requests"], 60, "{t}");
    positive(
        &posted["detail"]["chat_cpu_us_per_request"],
        "the chat's CPU per request",
    );
    positive(&rows[2]["measured"], "cancel to editMessageText p50");
    let idle = &rows[3];
    assert!(
        idle["what"].as_str().unwrap().contains("60 pending"),
        "{idle}"
    );
    assert!(
        idle["measured"].as_f64().is_some_and(|x| x >= 0.0),
        "{idle}"
    );
    assert_eq!(
        idle["detail"]["posted"], 11,
        "ten messages and the digest: {idle}"
    );
    assert_eq!(idle["detail"]["calls_in_window"], 0, "{idle}");
    positive(
        &idle["detail"]["intake_cpu_ms"],
        "the chat's CPU taking them in",
    );
    positive(&rows[4]["measured"], "the chat's RSS");
    let met = rows.iter().filter(|r| r["met"] == true).count() as u64;
    assert_eq!(t["met"].as_u64(), Some(met), "{t}");
}
