//! `askbus pending` and `askbus answer` on approvals, against the real daemon: the listing
//! (kind, tool, the command or file, context, the choices), `--allow [--always]`,
//! `--deny [REASON]`, `--dismiss`, and the usage errors for a flag that does not fit the
//! request's kind.

use crate::harness as common;

use std::path::PathBuf;
use std::process::Output;

use common::{choice_request, Daemon, Raw};
use serde_json::{json, Value};

fn example(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

const ID: &str = "b1f4c2d8-6a3e-4f0b-9c27-5d8e1a7f3b64";

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A producer connection with `frame` pending; waits on a watcher until the daemon holds it.
async fn asked(d: &Daemon, frame: Value) -> Raw {
    let mut watcher = d.connect().await;
    watcher.send(json!({"type": "watch"})).await;
    watcher.recv_type("watching").await;
    let mut p = d.connect().await;
    p.send(example("client/hello.json")).await;
    p.recv_type("welcome").await;
    p.send(frame).await;
    loop {
        let e = watcher.recv_type("bus-event").await;
        if e["event"] == "request" {
            return p;
        }
    }
}

fn cli(d: &Daemon, args: &[&str]) -> Output {
    d.cli().args(args).output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_lists_approvals_beside_questions() {
    let d = Daemon::start();
    let mut golden = example("client/tool-confirmation-request.json");
    golden["context"] = json!({"project": "web", "cwd": "/src/web"});
    let _p1 = asked(&d, golden).await;
    let _p2 = asked(&d, choice_request("q-1")).await;
    let _p3 = asked(&d, example("client/tool-confirmation-request.edit.json")).await;

    let out = cli(&d, &["pending"]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let human = text(&out.stdout);
    let first = human.find(ID).expect("the approval is listed");
    let second = human.find("q-1").expect("the question is listed");
    assert!(first < second, "oldest first:\n{human}");
    for want in [
        &format!("{ID}  approval from my-agent/1.2.0"),
        "  project web · cwd /src/web",
        "  exec run_shell_command",
        "  title: Confirm Shell Command",
        "  $ rm -rf build && cargo build --release",
        "  choices: Allow once · Allow always · Deny   (askbus answer ID --allow [--always] | --deny [REASON])",
        "  [0] Database (choice): Which database?",
    ] {
        assert!(human.contains(want), "{want:?} missing from:\n{human}");
    }
    let edit = example("client/tool-confirmation-request.edit.json");
    let path = edit["details"]["filePath"].as_str().unwrap();
    assert!(human.contains(&format!("  file: {path}")), "{human}");
    let first_diff_line = edit["details"]["fileDiff"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.starts_with('+'))
        .unwrap();
    assert!(human.contains(&format!("    {first_diff_line}")), "{human}");

    let out = cli(&d, &["pending", "--json"]);
    let frames: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "tool-confirmation-request",
            "ask-user-request",
            "tool-confirmation-request"
        ]
    );
    assert_eq!(
        frames[0]["details"],
        example("client/tool-confirmation-request.json")["details"]
    );
    assert_eq!(frames[0]["context"]["project"], "web");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_allow_always_deny_and_dismiss_reach_the_producer() {
    let d = Daemon::start();
    let cases: [(&[&str], &str, &str); 4] = [
        (
            &["--allow"],
            "allowed once",
            "server/tool-confirmation-response.answered.json",
        ),
        (
            &["--allow", "--always"],
            "allowed: Allow always (proceed_always)",
            "server/tool-confirmation-response.always.json",
        ),
        (
            &[
                "--deny",
                "Not the build directory: run cargo clean instead.",
            ],
            "denied",
            "server/tool-confirmation-response.denied.json",
        ),
        (
            &["--dismiss"],
            "dismissed",
            "server/tool-confirmation-response.dismissed.json",
        ),
    ];
    for (flags, said, golden) in cases {
        let mut p = asked(&d, example("client/tool-confirmation-request.json")).await;
        let out = tokio::task::block_in_place(|| {
            d.cli().arg("answer").arg(ID).args(flags).output().unwrap()
        });
        assert_eq!(code(&out), 0, "{flags:?}: {}", text(&out.stderr));
        let rule = if flags.contains(&"--always") {
            // askbus's own "always": the reference's rule for the command's root commands.
            let file = d.dir.path().join("askbus/policies/askbus-rules.toml");
            let written = std::fs::read_to_string(&file).unwrap();
            assert!(
                written.contains(
                    "commandPrefix = [\"rm\", \"cargo\"]\ndecision = \"allow\"\npriority = 950"
                ),
                "{written}"
            );
            format!(
                "rule: allow run_shell_command commands starting \"rm\" or \"cargo\" in every \
                 project ({}, user tier, priority 4.95)\n",
                file.display()
            )
        } else {
            String::new()
        };
        assert_eq!(text(&out.stdout), format!("{rule}{ID}: {said}\n"));
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            example(golden),
            "{flags:?}"
        );
    }
    // A bare --deny: denied, with no reason for the agent.
    let mut p = asked(&d, example("client/tool-confirmation-request.json")).await;
    let out = tokio::task::block_in_place(|| cli(&d, &["answer", ID, "--deny"]));
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (r["confirmed"].clone(), r.get("message")),
        (json!(false), None)
    );
    // Nothing pending any more.
    let out = tokio::task::block_in_place(|| cli(&d, &["answer", ID, "--allow"]));
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("not-pending"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_that_does_not_fit_the_request_is_a_usage_error_and_nothing_is_sent() {
    let d = Daemon::start();
    let mut minimal = example("client/tool-confirmation-request.json");
    minimal["correlationId"] = json!("once-only");
    minimal.as_object_mut().unwrap().remove("outcomes");
    let mut p = asked(&d, minimal).await;
    let _q = asked(&d, choice_request("q-1")).await;

    let cases: [(&[&str], &str); 4] = [
        (
            &["once-only", "--answer", "0=Yes"],
            "once-only is an approval (tool run_shell_command), not a question: answer it with --allow [--always], --deny [REASON] or --dismiss",
        ),
        (
            &["q-1", "--allow"],
            "q-1 is a question, not an approval: answer it with --answer INDEX=TEXT or --dismiss",
        ),
        (
            &["q-1", "--deny", "no"],
            "q-1 is a question, not an approval",
        ),
        (&["q-1"], "say what to send"),
    ];
    for (args, want) in cases {
        let out =
            tokio::task::block_in_place(|| d.cli().arg("answer").args(args).output().unwrap());
        assert_eq!(code(&out), 64, "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // clap refuses flags that cannot go together.
    for args in [
        &["once-only", "--always"][..],
        &["once-only", "--allow", "--deny"],
        &["once-only", "--allow", "--dismiss"],
    ] {
        let out =
            tokio::task::block_in_place(|| d.cli().arg("answer").args(args).output().unwrap());
        assert_ne!(code(&out), 0, "{args:?}");
        assert!(
            text(&out.stderr).contains("--"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Both still pending, untouched.
    let out = tokio::task::block_in_place(|| cli(&d, &["pending", "--json"]));
    let frames: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(frames.len(), 2);
    let out = tokio::task::block_in_place(|| cli(&d, &["answer", "once-only", "--allow"]));
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(r["confirmed"], json!(true));
}
