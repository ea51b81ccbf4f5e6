//! One `Engine::check` against the shipped defaults plus 1,000 user rules: a plain tool call
//! and a 5-part compound shell command. Prints the median of many runs, in µs. The figures of
//! record come from the criterion bench (`cargo bench -p askbus-policy --bench check`, which
//! also runs the reference); this is the driver to profile under callgrind:
//! `cargo build --profile profiling -p askbus-policy --example bench_check`, then
//! `valgrind --tool=callgrind target/profiling/examples/bench_check shell 200`
//! (`[tool|shell] [N]`: only that case, N checks).

use std::time::Instant;

use askbus_policy::engine::{Call, Engine, Options};
use askbus_policy::json;
use askbus_policy::loader::{load_shipped, load_text, Tier};
use askbus_policy::safety::Place;

fn user_rules() -> String {
    let mut s = String::new();
    for i in 0..1000 {
        match i % 4 {
            0 => s.push_str(&format!("[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"tool{i} run\"\ndecision = \"allow\"\npriority = {}\n", i % 900)),
            1 => s.push_str(&format!("[[rule]]\ntoolName = \"mcp_srv{i}_op\"\ndecision = \"deny\"\npriority = {}\n", i % 900)),
            2 => s.push_str(&format!("[[rule]]\ntoolName = \"write_file\"\nargsPattern = \"\\\"file_path\\\":\\\"gen{i}/\"\ndecision = \"allow\"\npriority = {}\n", i % 900)),
            _ => s.push_str(&format!("[[rule]]\ntoolName = \"custom_{i}\"\ndecision = \"ask_user\"\npriority = {}\n", i % 900)),
        }
    }
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mut loaded = load_text(&user_rules(), "user.toml", "user.toml", Tier::User);
    loaded.extend(load_shipped());
    assert_eq!(loaded.errors.len(), 0, "{:?}", loaded.errors.first());
    let ws = std::env::temp_dir().join("askbus-bench-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let place = Place {
        workspace: ws.to_string_lossy().into_owned(),
        home: "/nonexistent".into(),
        hermetic: false,
    };
    let engine = Engine::new(loaded.rules, loaded.checkers, Options::default(), place).unwrap();
    let cases = [
        (
            "tool call (read_file)",
            "read_file",
            r#"{"file_path":"src/lib.rs"}"#,
        ),
        (
            "5-part shell command",
            "run_shell_command",
            r#"{"command":"git status && ls -la src | grep rs; cargo build --release && echo done"}"#,
        ),
    ];
    let mut argv = std::env::args().skip(1);
    let only = argv.next();
    let n: usize = argv.next().and_then(|n| n.parse().ok()).unwrap_or(2000);
    for (label, tool, args) in cases {
        let key = if tool == "read_file" { "tool" } else { "shell" };
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        let args = json::parse(args).unwrap();
        let call = Call {
            name: tool,
            args: Some(&args),
            server: None,
            annotations: None,
            subagent: None,
        };
        let out = engine.check(&call);
        let mut times = vec![];
        for _ in 0..n {
            let t = Instant::now();
            std::hint::black_box(engine.check(std::hint::black_box(&call)));
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        println!(
            "{label}: {} -> median {:.2} µs",
            out.decision.as_str(),
            median(times)
        );
    }
}
