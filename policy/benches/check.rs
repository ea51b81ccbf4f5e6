//! Criterion benches of one policy decision, `Engine::check`, against the shipped defaults
//! plus 1,000 user rules (issue 29's setting): a plain tool call (`read_file`, target ≤ 5 µs
//! median) and a compound shell command of 5 parts (≤ 50 µs). After criterion, the same run
//! measures the reference's `PolicyEngine.check` in Node on the same rules and calls
//! (`policy/tests/node/bench_check.mjs`, with `@google/gemini-cli-core` 0.61.0 from
//! `tests/node_modules`) and prints the ratios (goal ≥ 20×).
//!
//! A second group, `policy_decide`, times what askbusd does per approval on the same rules
//! (`PolicySet::decide`: the tool call read from its JSON text, the agent's tool mapped, the
//! reference's check and askbus's stricter compound check) for the approval `askbus bench`
//! sends: the row "approval a rule allows" there is this plus a socket round trip.
//!
//! `cargo bench -p askbus-policy --bench check` (`-- --quick` for a short run; set
//! `ASKBUS_BENCH_NO_NODE=1` to leave the reference out).

use std::path::{Path, PathBuf};
use std::process::Command;

use askbus_policy::daemon::{Approval, PolicySet, Sources};
use askbus_policy::engine::{Call, Engine, Options};
use askbus_policy::json;
use askbus_policy::loader::{load_shipped, load_text, Tier};
use askbus_policy::safety::Place;
use criterion::Criterion;
use std::hint::black_box;

/// (criterion id, the reference script's label, tool, args): the calls both sides check.
const CASES: [(&str, &str, &str, &str); 2] = [
    (
        "tool_call_read_file",
        "tool call (read_file)",
        "read_file",
        r#"{"file_path":"src/lib.rs"}"#,
    ),
    (
        "shell_5_parts",
        "5-part shell command",
        "run_shell_command",
        r#"{"command":"git status && ls -la src | grep rs; cargo build --release && echo done"}"#,
    ),
];

/// 1,000 user rules of four kinds, as bench_check.mjs writes them.
fn user_rules() -> String {
    let mut s = String::new();
    for i in 0..1000 {
        let p = i % 900;
        s.push_str(&match i % 4 {
            0 => format!("[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"tool{i} run\"\ndecision = \"allow\"\npriority = {p}\n"),
            1 => format!("[[rule]]\ntoolName = \"mcp_srv{i}_op\"\ndecision = \"deny\"\npriority = {p}\n"),
            2 => format!("[[rule]]\ntoolName = \"write_file\"\nargsPattern = \"\\\"file_path\\\":\\\"gen{i}/\"\ndecision = \"allow\"\npriority = {p}\n"),
            _ => format!("[[rule]]\ntoolName = \"custom_{i}\"\ndecision = \"ask_user\"\npriority = {p}\n"),
        });
    }
    s
}

fn engine() -> Engine {
    let mut loaded = load_text(&user_rules(), "user.toml", "user.toml", Tier::User);
    loaded.extend(load_shipped());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
    // The workspace the reference script runs in (its cwd), so the heuristics see the same.
    let ws = std::env::temp_dir().join("askbus-bench-ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    let place = Place {
        workspace: ws.to_string_lossy().into_owned(),
        home: "/nonexistent".into(),
        hermetic: false,
    };
    Engine::new(loaded.rules, loaded.checkers, Options::default(), place).expect("engine")
}

/// The rule that allows `askbus bench`'s approval, each part named (askbus's compound check).
const ALLOW_BENCH_APPROVAL: &str = "[[rule]]\ntoolName = \"run_shell_command\"\n\
    commandPrefix = [\"rm -rf build\", \"cargo build\"]\ndecision = \"allow\"\npriority = 950\n";

/// The daemon's policies with the shipped defaults and the user rules plus
/// [`ALLOW_BENCH_APPROVAL`] in a user directory of the bench's own (no admin files).
fn policy_set() -> (PolicySet, u32) {
    let dir = std::env::temp_dir().join(format!("askbus-bench-decide-{}", std::process::id()));
    let user = dir.join("user");
    std::fs::create_dir_all(&user).expect("user dir");
    std::fs::write(user.join("rules.toml"), user_rules() + ALLOW_BENCH_APPROVAL).expect("rules");
    let set = PolicySet::new(
        Sources {
            defaults: true,
            admin_dir: dir.join("admin"),
            admin_owner: 0,
        },
        move |_| Some(user.clone()),
    );
    assert!(set.errors().is_empty(), "{:?}", set.errors());
    // A user tier applies to its owner's requests: the uid the files were written as.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).expect("dir"));
    (set, uid)
}

fn criterion_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("../criterion")
}

/// Criterion's median for `id` in µs, if it ran.
fn median_us(id: &str) -> Option<f64> {
    let path = criterion_dir().join(format!("policy_check/{id}/new/estimates.json"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    Some(v["median"]["point_estimate"].as_f64()? / 1000.0)
}

/// The reference's medians (µs) by label and its decisions, from bench_check.mjs.
fn reference() -> Result<Vec<(String, String, f64)>, String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("node")
        .arg(repo.join("policy/tests/node/bench_check.mjs"))
        .env("NODE_PATH", repo.join("tests/node_modules"))
        .output()
        .map_err(|e| format!("node: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    // `LABEL: DECISION -> median X µs`
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (label, rest) = l.split_once(": ")?;
            let (decision, rest) = rest.split_once(" -> median ")?;
            let us = rest.strip_suffix(" µs")?.parse().ok()?;
            Some((label.to_owned(), decision.to_owned(), us))
        })
        .collect())
}

fn main() {
    let engine = engine();
    let calls: Vec<_> = CASES
        .iter()
        .map(|(id, label, tool, args)| (*id, *label, *tool, json::parse(args).expect("args")))
        .collect();
    let mut c = Criterion::default()
        .output_directory(&criterion_dir())
        .configure_from_args();
    {
        let mut g = c.benchmark_group("policy_check");
        for (id, _, tool, args) in &calls {
            let call = Call {
                name: tool,
                args: Some(args),
                server: None,
                annotations: None,
                subagent: None,
            };
            g.bench_function(*id, |b| b.iter(|| engine.check(black_box(&call))));
        }
        g.finish();
    }
    {
        let (set, uid) = policy_set();
        let description = format!("Clean rebuild of the release binaries {}", "x".repeat(600));
        let tool_call = serde_json::json!({
            "name": "run_shell_command",
            "args": {"command": "rm -rf build && cargo build --release", "description": description},
        })
        .to_string();
        let approval = Approval {
            uid,
            tool_call: &tool_call,
            server: None,
            annotations: None,
            subagent: None,
            cwd: None,
            project: None,
            mode: None,
            interactive: None,
            agent: None,
        };
        let verdict = set
            .decide(&approval)
            .expect("the rule decides the bench's approval");
        assert_eq!(verdict.decision, askbus_policy::Decision::Allow);
        let mut g = c.benchmark_group("policy_decide");
        g.bench_function("bench_approval_2_parts", |b| {
            b.iter(|| set.decide(black_box(&approval)))
        });
        g.finish();
    }
    c.final_summary();

    if std::env::var_os("ASKBUS_BENCH_NO_NODE").is_some() {
        return;
    }
    let theirs = match reference() {
        Ok(r) => r,
        Err(e) => {
            println!("the reference was not measured: {e}");
            return;
        }
    };
    println!(
        "\n| call | askbus-policy (median) | the reference, Node (median) | ratio | decision |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (id, label, tool, args) in &calls {
        let call = Call {
            name: tool,
            args: Some(args),
            server: None,
            annotations: None,
            subagent: None,
        };
        let ours = engine.check(&call).decision.as_str();
        let Some((_, decision, node)) = theirs.iter().find(|(l, _, _)| l == label) else {
            println!("| {label} | - | not measured | - | {ours} |");
            continue;
        };
        // The same decision, or the comparison means nothing.
        assert_eq!(
            ours, decision,
            "{label}: askbus {ours}, the reference {decision}"
        );
        match median_us(id) {
            Some(us) => println!(
                "| {label} | {us:.2} µs | {node:.2} µs | {:.1} × | {ours} |",
                node / us
            ),
            None => println!("| {label} | not run | {node:.2} µs | - | {ours} |"),
        }
    }
}
