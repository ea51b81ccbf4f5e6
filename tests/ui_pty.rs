//! `askbus ui` end to end: the real binary in a pseudo-terminal, a real askbusd, and a raw
//! producer that reads the exact ask-user-response the daemon forwards.

mod tui_support;

use std::time::Duration;

use serde_json::{json, Value};
use tui_support::*;

fn db_question(multi: bool) -> Value {
    json!({"question": "Which database should the service use?", "header": "Database",
        "type": "choice", "multiSelect": multi,
        "options": [
            {"label": "PostgreSQL", "description": "Relational; the team knows it"},
            {"label": "SQLite", "description": "Embedded, no server to run"},
            {"label": "DuckDB", "description": "Columnar, for analytics"}]})
}

struct Setup {
    dir: tempfile::TempDir,
    daemon: Daemon,
    ui: Pty,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("● connected");
    Setup { dir, daemon, ui }
}

/// The response frame a producer gets for an answered request.
fn answered(id: &str, answers: Value, types: &[&str], display: &str) -> Value {
    let n = answers.as_object().unwrap().len();
    json!({
        "type": "ask-user-response",
        "correlationId": id,
        "answers": answers,
        "cancelled": false,
        "reason": "answered",
        "result": {
            "llmContent": serde_json::to_string(&json!({"answers": answers})).unwrap(),
            "returnDisplay": display,
            "data": {"ask_user": {"question_types": types, "dismissed": false,
                "empty_submission": n == 0, "answer_count": n}}
        }
    })
}

#[test]
fn single_choice_sends_the_label() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "deploy-agent/2.1");
    p.ask("c1", json!([db_question(false)]));
    let screen = s.ui.wait_for("Which database should the service use?");
    for part in [
        "deploy-agent/2.1 (pid ",
        "10m 00s left",
        " Database ",
        "● 1. PostgreSQL",
        "Relational; the team knows it",
        "  3. DuckDB",
        "  4. Enter a custom value",
        "Enter to select · ↑/↓ to navigate · Esc to cancel",
        "1 question pending",
    ] {
        assert!(screen.contains(part), "{part:?} missing from\n{screen}");
    }
    s.ui.keys(DOWN);
    s.ui.wait_for("● 2. SQLite");
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response"),
        answered(
            "c1",
            json!({"0": "SQLite"}),
            &["choice"],
            "**User answered:**\n  Database → SQLite"
        )
    );
    s.ui.wait_for("✓ Answer delivered to deploy-agent/2.1");
    s.ui.wait_for("No questions pending.");
}

#[test]
fn single_choice_other_is_typed_and_trimmed() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("c1", json!([db_question(false)]));
    s.ui.wait_for("Enter a custom value");
    // Typing anywhere in the list starts the Other answer; j and digits are text there.
    s.ui.keys("MariaDB 11 j ");
    s.ui.wait_for("4. MariaDB 11 j");
    s.ui.keys(ENTER);
    let r = p.recv_type("ask-user-response");
    assert_eq!(r["answers"], json!({"0": "MariaDB 11 j"}));
    assert_eq!(r["reason"], "answered");
}

#[test]
fn multiselect_all_of_the_above_and_other() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("m1", json!([db_question(true)]));
    let screen = s.ui.wait_for("(Select all that apply)");
    assert!(screen.contains("4. [ ] All of the above"), "{screen}");
    assert!(screen.contains("Select all options"), "{screen}");
    assert!(screen.contains("5. [ ] Enter a custom value"), "{screen}");
    assert!(screen.contains("Done"), "{screen}");
    // All of the above checks every option; unchecking one unchecks it.
    s.ui.keys("4");
    s.ui.wait_for("4. [x] All of the above");
    let screen = s.ui.screen();
    assert!(screen.contains("1. [x] PostgreSQL"), "{screen}");
    assert!(screen.contains("3. [x] DuckDB"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("2. [ ] SQLite");
    assert!(s.ui.screen().contains("4. [ ] All of the above"));
    s.ui.keys("Redis");
    s.ui.wait_for("5. [x] Redis");
    s.ui.keys(ENTER);
    let r = p.recv_type("ask-user-response");
    assert_eq!(
        r,
        answered(
            "m1",
            json!({"0": "PostgreSQL, DuckDB, Redis"}),
            &["choice"],
            "**User answered:**\n  Database → PostgreSQL, DuckDB, Redis"
        )
    );

    // All of the above alone, finished with Space on Done: every label, never the phrase.
    s.ui.wait_for("No questions pending.");
    p.ask("m2", json!([db_question(true)]));
    s.ui.wait_for("4. [ ] All of the above");
    s.ui.keys(" ");
    s.ui.wait_for("1. [x] PostgreSQL");
    s.ui.keys("4");
    s.ui.wait_for("4. [x] All of the above");
    s.ui.keys(DOWN);
    s.ui.wait_for("● 5. [ ] Enter a custom value");
    s.ui.keys(DOWN);
    s.ui.wait_for("●    Done");
    s.ui.keys(" ");
    let r = p.recv_type("ask-user-response");
    assert_eq!(r["answers"], json!({"0": "PostgreSQL, SQLite, DuckDB"}));
}

#[test]
fn yesno_with_other_feedback() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    // Options a model attached to a yesno are not shown: it is always Yes / No.
    let q = json!({"question": "Deploy to production now?", "header": "Deploy", "type": "yesno",
        "options": [{"label": "Sure thing", "description": "x"}]});
    p.ask("y1", json!([q]));
    let screen = s.ui.wait_for("Deploy to production now?");
    assert!(screen.contains("● 1. Yes"), "{screen}");
    assert!(screen.contains("  2. No"), "{screen}");
    assert!(screen.contains("  3. Enter a custom value"), "{screen}");
    assert!(!screen.contains("Sure thing"), "{screen}");
    s.ui.keys("only after the migration runs");
    s.ui.wait_for("3. only after the migration runs");
    s.ui.wait_for("Enter to submit · Esc to cancel");
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response"),
        answered(
            "y1",
            json!({"0": "only after the migration runs"}),
            &["yesno"],
            "**User answered:**\n  Deploy → only after the migration runs"
        )
    );
    s.ui.wait_for("No questions pending.");
    p.ask("y2", json!([q]));
    s.ui.wait_for("● 1. Yes");
    s.ui.keys("2");
    let r = p.recv_type("ask-user-response");
    assert_eq!(r["answers"], json!({"0": "No"}));
}

#[test]
fn text_question_sends_trimmed_text() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask(
        "t1",
        json!([{"question": "What should the release be called?", "header": "Name",
            "type": "text", "placeholder": "e.g. Aurora"}]),
    );
    let screen = s.ui.wait_for("> e.g. Aurora");
    assert!(
        screen.contains("Enter to submit · Esc to cancel"),
        "{screen}"
    );
    s.ui.keys("  Blue Heron  ");
    s.ui.wait_for(">   Blue Heron");
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response"),
        answered(
            "t1",
            json!({"0": "Blue Heron"}),
            &["text"],
            "**User answered:**\n  Name → Blue Heron"
        )
    );
}

#[test]
fn several_questions_review_with_one_unanswered() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "planner");
    p.ask(
        "r1",
        json!([
            db_question(false),
            {"question": "Anything the reviewer should know?", "header": "Notes", "type": "text"},
            {"question": "Open the pull request when done?", "header": "PR", "type": "yesno"}
        ]),
    );
    let screen = s.ui.wait_for("← □ Database │ □ Notes │ □ PR │ ≡ Review →");
    assert!(screen.contains("←/→ to switch questions"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("Anything the reviewer should know?");
    assert!(s.ui.screen().contains("← ✓ Database │ □ Notes"));
    // Leave the text question unanswered.
    s.ui.keys(TAB);
    s.ui.wait_for("Open the pull request when done?");
    s.ui.keys(ENTER);
    let screen = s.ui.wait_for("Review your answers:");
    for part in [
        "⚠ You have 1 unanswered question",
        "Database → SQLite",
        "Notes → (not answered)",
        "PR → Yes",
        "Enter to submit · Tab/Shift+Tab to edit answers · Esc to cancel",
    ] {
        assert!(screen.contains(part), "{part:?} missing from\n{screen}");
    }
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response"),
        answered(
            "r1",
            json!({"0": "SQLite", "2": "Yes"}),
            &["choice", "text", "yesno"],
            "**User answered:**\n  Database → SQLite\n  PR → Yes"
        )
    );
}

#[test]
fn escape_dismisses() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("d1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    s.ui.keys("half typed");
    s.ui.wait_for("half typed");
    s.ui.keys(ESC);
    assert_eq!(
        p.recv_type("ask-user-response"),
        json!({
            "type": "ask-user-response", "correlationId": "d1", "answers": {},
            "cancelled": true, "reason": "dismissed",
            "result": {
                "llmContent": "User dismissed ask_user dialog without answering.",
                "returnDisplay": "User dismissed dialog",
                "data": {"ask_user": {"question_types": ["choice"], "dismissed": true}}
            }
        })
    );
    s.ui.wait_for("Dismissed; a (pid ");
}

#[test]
fn withdrawals_close_the_dialog_saying_why() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "deploy-agent");
    p.ask("w1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    p.send(&json!({"type": "ask-user-cancel", "correlationId": "w1"}));
    assert_eq!(p.recv_type("ask-user-response")["reason"], "withdrawn");
    s.ui.wait_for("Closed: question from deploy-agent (pid ");
    s.ui.wait_for("— the agent withdrew it");
    s.ui.wait_for("No questions pending.");

    p.send(
        &json!({"type": "ask-user-request", "correlationId": "w2", "timeoutMs": 300,
        "questions": [db_question(false)]}),
    );
    s.ui.wait_for("Which database");
    assert_eq!(p.recv_type("ask-user-response")["reason"], "timeout");
    s.ui.wait_for("— it timed out");

    p.ask("w3", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    drop(p);
    s.ui.wait_for("— the agent went away");
    s.ui.wait_for("No questions pending.");
}

#[test]
fn answered_in_another_ui() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("o1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    let mut other = Raw::connect(&s.daemon.socket);
    other.send(&json!({"type": "subscribe", "client": "other-ui"}));
    other.recv_type("ask-user-request");
    other.send(&json!({"type": "ask-user-response", "correlationId": "o1",
        "answers": {"0": "DuckDB"}}));
    assert_eq!(
        p.recv_type("ask-user-response")["answers"],
        json!({"0": "DuckDB"})
    );
    s.ui.wait_for("— answered in another UI");
}

#[test]
fn new_arrivals_wait_in_a_list_without_stealing_focus() {
    let mut s = setup();
    let mut first = Raw::producer(&s.daemon.socket, "deploy-agent");
    first.ask("f1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    s.ui.keys("half an ans");
    s.ui.wait_for("4. half an ans");
    let mut second = Raw::producer(&s.daemon.socket, "review-bot");
    second.ask(
        "f2",
        json!([{"question": "Merge now?", "header": "Merge", "type": "yesno"}]),
    );
    let screen = s.ui.wait_for("1 more waiting · Ctrl+L list");
    assert!(screen.contains("4. half an ans"), "{screen}");
    assert!(screen.contains("2 questions pending"), "{screen}");
    s.ui.keys(CTRL_L);
    let screen = s.ui.wait_for("Pending questions");
    assert!(screen.contains("● 1. deploy-agent (pid "), "{screen}");
    assert!(screen.contains("  2. review-bot (pid "), "{screen}");
    assert!(screen.contains("[Merge] Merge now?"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("Merge now?");
    s.ui.keys("1");
    assert_eq!(
        second.recv_type("ask-user-response")["answers"],
        json!({"0": "Yes"})
    );
    // Back to the first one, its typing intact.
    s.ui.wait_for("4. half an ans");
    s.ui.keys("wer");
    s.ui.keys(ENTER);
    assert_eq!(
        first.recv_type("ask-user-response")["answers"],
        json!({"0": "half an answer"})
    );
}

#[test]
fn daemon_restart_reconnects_and_gets_the_replay() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("x1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    s.daemon.stop();
    assert_eq!(p.recv_type("ask-user-response")["reason"], "shutdown");
    s.ui.wait_for("— askbusd shut down");
    s.ui.wait_for("✗ disconnected");
    s.ui.wait_for("askbusd is not reachable:");
    // A new daemon with a question already pending, put in place at once (a rename) so the
    // UI's reconnect is certain to find it in the replay rather than live.
    let staging = s.dir.path().join("staging.sock");
    let _next = Daemon::start_on(&staging);
    let mut p2 = Raw::producer(&staging, "after-restart");
    p2.send(
        &json!({"type": "ask-user-request", "correlationId": "x2", "timeoutMs": 120000,
        "questions": [{"question": "Still there?", "header": "Ping", "type": "yesno"}]}),
    );
    std::fs::rename(&staging, &s.daemon.socket).unwrap();
    let screen = s.ui.wait_for("Still there?");
    assert!(screen.contains("after-restart (pid "), "{screen}");
    assert!(screen.contains("● connected"), "{screen}");
    assert!(screen.contains("Reconnected to askbusd"), "{screen}");
    // The replay carries the remaining time, not the original.
    assert!(
        screen.contains("1m 5") || screen.contains("2m 00s"),
        "{screen}"
    );
    s.ui.keys("1");
    assert_eq!(
        p2.recv_type("ask-user-response")["answers"],
        json!({"0": "Yes"})
    );
}

#[test]
fn daemon_crash_keeps_the_dialog_until_the_new_daemon_says_it_is_gone() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "a");
    p.ask("k1", json!([db_question(false)]));
    s.ui.wait_for("Which database");
    s.ui.keys("draft");
    s.daemon.kill();
    let screen = s.ui.wait_for("offline: answers wait for the reconnect");
    assert!(screen.contains("4. draft"), "{screen}");
    // Enter sends nothing while offline, and says so.
    s.ui.keys(ENTER);
    s.ui.wait_for("Not connected to askbusd: nothing was sent");
    std::fs::remove_file(&s.daemon.socket).unwrap();
    let _next = Daemon::start(s.dir.path());
    s.ui.wait_for("askbusd no longer has it");
    s.ui.wait_for("No questions pending.");
}

#[test]
fn ask_piped_into_ui() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let questions = dir.path().join("q.json");
    std::fs::write(
        &questions,
        json!({"questions": [{"question": "Proceed with the refactor?", "header": "Go",
            "type": "yesno"}]})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("ask.out");
    let bin = env!("CARGO_BIN_EXE_askbus");
    let sock = daemon.socket.display();
    // The UI's stdin is the pipe, so it must read keys from the terminal itself.
    let line = format!(
        "{{ {bin} --socket {sock} ask --json {q}; echo \"exit=$?\"; }} | tee {out} | {bin} --socket {sock} ui",
        q = questions.display(),
        out = out.display()
    );
    let mut ui = Pty::shell(&line);
    ui.wait_for("Proceed with the refactor?");
    ui.keys("yes, but keep the old API");
    ui.wait_for("3. yes, but keep the old API");
    ui.keys(ENTER);
    ui.wait_for("✓ Answer delivered to askbus-cli/");
    let start = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.contains("exit=") || start.elapsed() > WAIT {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut lines = text.lines();
    let frame: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(frame["type"], "ask-user-response");
    assert_eq!(frame["answers"], json!({"0": "yes, but keep the old API"}));
    assert_eq!(
        frame["result"]["returnDisplay"],
        "**User answered:**\n  Go → yes, but keep the old API"
    );
    assert_eq!(lines.next(), Some("exit=0"));
    // The UI stays up for the next question.
    assert!(ui.screen().contains("No questions pending."));
}

#[test]
fn quits_with_q_and_restores_the_terminal() {
    let mut s = setup();
    s.ui.keys("q");
    let status = s.ui.wait_exit();
    assert!(status.success());
}

#[test]
fn refuses_without_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_askbus"))
        .args(["ui", "--socket"])
        .arg(dir.path().join("none.sock"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard output is not a terminal"), "{err}");
    assert!(out.stdout.is_empty());
}
