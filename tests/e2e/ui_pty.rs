//! `askbus ui` end to end: the real binary in a pseudo-terminal, a real askbusd, and a raw
//! producer that reads the exact ask-user-response the daemon forwards.

use crate::harness as common;
use crate::pty;

use std::time::Duration;

use common::{Daemon, Raw};
use pty::*;
use serde_json::{json, Value};

fn db_question(multi: bool) -> Value {
    json!({"question": "Which database should the service use?", "header": "Database",
        "type": "choice", "multiSelect": multi,
        "options": [
            {"label": "PostgreSQL", "description": "Relational; the team knows it"},
            {"label": "SQLite", "description": "Embedded, no server to run"},
            {"label": "DuckDB", "description": "Columnar, for analytics"}]})
}

struct Setup {
    daemon: Daemon,
    ui: Pty,
}

/// A daemon and `askbus ui` connected to it.
async fn setup() -> Setup {
    let daemon = Daemon::start();
    let ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("● connected").await;
    Setup { daemon, ui }
}

/// A producer that announced itself as `client`.
async fn producer(socket: &std::path::Path, client: &str) -> Raw {
    let mut p = Raw::connect(socket).await;
    p.send(json!({"type": "hello", "protocol": 1, "client": client}))
        .await;
    p.recv_type("welcome").await;
    p
}

async fn ask(p: &mut Raw, id: &str, questions: Value) {
    p.send(json!({"type": "ask-user-request", "correlationId": id, "questions": questions}))
        .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_choice_sends_the_label() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "deploy-agent/2.1").await;
    ask(&mut p, "c1", json!([db_question(false)])).await;
    let screen =
        s.ui.wait_for("Which database should the service use?")
            .await;
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
    s.ui.wait_for("● 2. SQLite").await;
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response").await,
        answered(
            "c1",
            json!({"0": "SQLite"}),
            &["choice"],
            "**User answered:**\n  Database → SQLite"
        )
    );
    s.ui.wait_for("✓ Answer delivered to deploy-agent/2.1")
        .await;
    s.ui.wait_for("No questions pending.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_choice_other_is_typed_and_trimmed() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "c1", json!([db_question(false)])).await;
    s.ui.wait_for("Enter a custom value").await;
    // Typing anywhere in the list starts the Other answer; j and digits are text there.
    s.ui.keys("MariaDB 11 j ");
    s.ui.wait_for("4. MariaDB 11 j").await;
    s.ui.keys(ENTER);
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(r["answers"], json!({"0": "MariaDB 11 j"}));
    assert_eq!(r["reason"], "answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiselect_all_of_the_above_and_other() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "m1", json!([db_question(true)])).await;
    let screen = s.ui.wait_for("(Select all that apply)").await;
    assert!(screen.contains("4. [ ] All of the above"), "{screen}");
    assert!(screen.contains("Select all options"), "{screen}");
    assert!(screen.contains("5. [ ] Enter a custom value"), "{screen}");
    assert!(screen.contains("Done"), "{screen}");
    // All of the above checks every option; unchecking one unchecks it.
    s.ui.keys("4");
    let screen = s.ui.wait_for("4. [x] All of the above").await;
    assert!(screen.contains("1. [x] PostgreSQL"), "{screen}");
    assert!(screen.contains("3. [x] DuckDB"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("2. [ ] SQLite").await;
    s.ui.wait_for("4. [ ] All of the above").await;
    s.ui.keys("Redis");
    s.ui.wait_for("5. [x] Redis").await;
    s.ui.keys(ENTER);
    let r = p.recv_type("ask-user-response").await;
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
    s.ui.wait_for("No questions pending.").await;
    ask(&mut p, "m2", json!([db_question(true)])).await;
    s.ui.wait_for("4. [ ] All of the above").await;
    s.ui.keys(" ");
    s.ui.wait_for("1. [x] PostgreSQL").await;
    s.ui.keys("4");
    s.ui.wait_for("4. [x] All of the above").await;
    s.ui.keys(DOWN);
    s.ui.wait_for("● 5. [ ] Enter a custom value").await;
    s.ui.keys(DOWN);
    s.ui.wait_for("●    Done").await;
    s.ui.keys(" ");
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(r["answers"], json!({"0": "PostgreSQL, SQLite, DuckDB"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yesno_with_other_feedback() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    // Options a model attached to a yesno are not shown: it is always Yes / No.
    let q = json!({"question": "Deploy to production now?", "header": "Deploy", "type": "yesno",
        "options": [{"label": "Sure thing", "description": "x"}]});
    ask(&mut p, "y1", json!([q])).await;
    let screen = s.ui.wait_for("Deploy to production now?").await;
    assert!(screen.contains("● 1. Yes"), "{screen}");
    assert!(screen.contains("  2. No"), "{screen}");
    assert!(screen.contains("  3. Enter a custom value"), "{screen}");
    assert!(!screen.contains("Sure thing"), "{screen}");
    s.ui.keys("only after the migration runs");
    s.ui.wait_for("3. only after the migration runs").await;
    s.ui.wait_for("Enter to submit · Esc to cancel").await;
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response").await,
        answered(
            "y1",
            json!({"0": "only after the migration runs"}),
            &["yesno"],
            "**User answered:**\n  Deploy → only after the migration runs"
        )
    );
    s.ui.wait_for("No questions pending.").await;
    ask(&mut p, "y2", json!([q])).await;
    s.ui.wait_for("● 1. Yes").await;
    s.ui.keys("2");
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(r["answers"], json!({"0": "No"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_question_sends_trimmed_text() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(
        &mut p,
        "t1",
        json!([{"question": "What should the release be called?", "header": "Name",
            "type": "text", "placeholder": "e.g. Aurora"}]),
    )
    .await;
    let screen = s.ui.wait_for("> e.g. Aurora").await;
    assert!(
        screen.contains("Enter to submit · Esc to cancel"),
        "{screen}"
    );
    s.ui.keys("  Blue Heron  ");
    s.ui.wait_for(">   Blue Heron").await;
    s.ui.keys(ENTER);
    assert_eq!(
        p.recv_type("ask-user-response").await,
        answered(
            "t1",
            json!({"0": "Blue Heron"}),
            &["text"],
            "**User answered:**\n  Name → Blue Heron"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_questions_review_with_one_unanswered() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "planner").await;
    ask(
        &mut p,
        "r1",
        json!([
            db_question(false),
            {"question": "Anything the reviewer should know?", "header": "Notes", "type": "text"},
            {"question": "Open the pull request when done?", "header": "PR", "type": "yesno"}
        ]),
    )
    .await;
    let screen =
        s.ui.wait_for("← □ Database │ □ Notes │ □ PR │ ≡ Review →")
            .await;
    assert!(screen.contains("←/→ to switch questions"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("Anything the reviewer should know?").await;
    s.ui.wait_for("← ✓ Database │ □ Notes").await;
    // Leave the text question unanswered.
    s.ui.keys(TAB);
    s.ui.wait_for("Open the pull request when done?").await;
    s.ui.keys(ENTER);
    let screen = s.ui.wait_for("Review your answers:").await;
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
        p.recv_type("ask-user-response").await,
        answered(
            "r1",
            json!({"0": "SQLite", "2": "Yes"}),
            &["choice", "text", "yesno"],
            "**User answered:**\n  Database → SQLite\n  PR → Yes"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_dismisses() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "d1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    s.ui.keys("half typed");
    s.ui.wait_for("half typed").await;
    s.ui.keys(ESC);
    assert_eq!(
        p.recv_type("ask-user-response").await,
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
    s.ui.wait_for("Dismissed; a (pid ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawals_close_the_dialog_saying_why() {
    let s = setup().await;
    let mut p = producer(&s.daemon.socket, "deploy-agent").await;
    ask(&mut p, "w1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    p.send(json!({"type": "ask-user-cancel", "correlationId": "w1"}))
        .await;
    assert_eq!(
        p.recv_type("ask-user-response").await["reason"],
        "withdrawn"
    );
    s.ui.wait_for("Closed: question from deploy-agent (pid ")
        .await;
    s.ui.wait_for("— the agent withdrew it").await;
    s.ui.wait_for("No questions pending.").await;

    p.send(
        json!({"type": "ask-user-request", "correlationId": "w2", "timeoutMs": 300,
        "questions": [db_question(false)]}),
    )
    .await;
    s.ui.wait_for("Which database").await;
    assert_eq!(p.recv_type("ask-user-response").await["reason"], "timeout");
    s.ui.wait_for("— it timed out").await;

    ask(&mut p, "w3", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    drop(p);
    s.ui.wait_for("— the agent went away").await;
    s.ui.wait_for("No questions pending.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_in_another_ui() {
    let s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "o1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    let mut other = Raw::connect(&s.daemon.socket).await;
    other
        .send(json!({"type": "subscribe", "client": "other-ui"}))
        .await;
    other.recv_type("subscribed").await;
    other.recv_type("ask-user-request").await;
    other
        .send(json!({"type": "ask-user-response", "correlationId": "o1",
        "answers": {"0": "DuckDB"}}))
        .await;
    assert_eq!(
        p.recv_type("ask-user-response").await["answers"],
        json!({"0": "DuckDB"})
    );
    s.ui.wait_for("— answered in another UI").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_arrivals_wait_in_a_list_without_stealing_focus() {
    let mut s = setup().await;
    let mut first = producer(&s.daemon.socket, "deploy-agent").await;
    ask(&mut first, "f1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    s.ui.keys("half an ans");
    s.ui.wait_for("4. half an ans").await;
    let mut second = producer(&s.daemon.socket, "review-bot").await;
    ask(
        &mut second,
        "f2",
        json!([{"question": "Merge now?", "header": "Merge", "type": "yesno"}]),
    )
    .await;
    let screen = s.ui.wait_for("1 more waiting · Ctrl+L list").await;
    assert!(screen.contains("4. half an ans"), "{screen}");
    assert!(screen.contains("2 questions pending"), "{screen}");
    s.ui.keys(CTRL_L);
    let screen = s.ui.wait_for("Pending questions").await;
    assert!(screen.contains("● 1. deploy-agent (pid "), "{screen}");
    assert!(screen.contains("  2. review-bot (pid "), "{screen}");
    assert!(screen.contains("[Merge] Merge now?"), "{screen}");
    s.ui.keys("2");
    s.ui.wait_for("Merge now?").await;
    s.ui.keys("1");
    assert_eq!(
        second.recv_type("ask-user-response").await["answers"],
        json!({"0": "Yes"})
    );
    // Back to the first one, its typing intact.
    s.ui.wait_for("4. half an ans").await;
    s.ui.keys("wer");
    s.ui.keys(ENTER);
    assert_eq!(
        first.recv_type("ask-user-response").await["answers"],
        json!({"0": "half an answer"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_restart_reconnects_and_gets_the_replay() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "x1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    s.daemon.terminate(Duration::from_secs(5));
    assert_eq!(p.recv_type("ask-user-response").await["reason"], "shutdown");
    s.ui.wait_for("— askbusd shut down").await;
    s.ui.wait_for("✗ disconnected").await;
    s.ui.wait_for("askbusd is not reachable:").await;
    // A new daemon with a question already pending, put in place at once (a rename) so the
    // UI's reconnect is certain to find it in the replay rather than live.
    let next = Daemon::start();
    let mut p2 = producer(&next.socket, "after-restart").await;
    p2.send(
        json!({"type": "ask-user-request", "correlationId": "x2", "timeoutMs": 120000,
        "questions": [{"question": "Still there?", "header": "Ping", "type": "yesno"}]}),
    )
    .await;
    p2.send(json!({"type": "ping"})).await;
    p2.recv_type("pong").await;
    std::fs::rename(&next.socket, &s.daemon.socket).unwrap();
    let screen = s.ui.wait_for("Still there?").await;
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
        p2.recv_type("ask-user-response").await["answers"],
        json!({"0": "Yes"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_crash_keeps_the_dialog_until_the_new_daemon_says_it_is_gone() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "a").await;
    ask(&mut p, "k1", json!([db_question(false)])).await;
    s.ui.wait_for("Which database").await;
    s.ui.keys("draft");
    s.ui.wait_for("4. draft").await;
    s.daemon.kill();
    let screen =
        s.ui.wait_for("offline: answers wait for the reconnect")
            .await;
    assert!(screen.contains("4. draft"), "{screen}");
    // Enter sends nothing while offline, and says so.
    s.ui.keys(ENTER);
    s.ui.wait_for("Not connected to askbusd: nothing was sent")
        .await;
    // The socket file goes too (as when its directory is cleaned), then the daemon is back.
    std::fs::remove_file(&s.daemon.socket).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.ui.wait_for("✗ disconnected").await;
    s.daemon.restart();
    s.ui.wait_for("askbusd no longer has it").await;
    s.ui.wait_for("No questions pending.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_piped_into_ui() {
    let daemon = Daemon::start();
    let dir = &daemon.dir;
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
    ui.wait_for("Proceed with the refactor?").await;
    ui.keys("yes, but keep the old API");
    ui.wait_for("3. yes, but keep the old API").await;
    ui.keys(ENTER);
    ui.wait_for("✓ Answer delivered to askbus-cli/").await;
    let start = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.contains("exit=") || start.elapsed() > WAIT {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
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
    // The UI stays up for the next question, and says the piped output is kept.
    ui.wait_for("No questions pending.").await;
    ui.wait_for("printed when you quit").await;
    // Quitting prints what came on the pipe, on the normal screen.
    ui.keys("q");
    let screen = ui.wait_for("exit=0").await;
    assert!(
        screen.contains("\"type\":\"ask-user-response\""),
        "{screen}"
    );
    assert!(ui.wait_exit().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quits_with_q_and_restores_the_terminal() {
    let mut s = setup().await;
    s.ui.keys("q");
    let status = s.ui.wait_exit().await;
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_without_a_terminal() {
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

/// Bus text full of escape sequences (a prompt-injected agent's question): OSC 52 would write
/// the clipboard, OSC 0 the window title, CSI 2J clear the screen, BEL ring, the 8-bit CSI
/// (U+009B) act without an ESC and U+202E reverse the line. None may reach the terminal; each
/// shows as a visible stand-in, and the answer still carries the label as the agent wrote it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_bus_text_never_reach_the_terminal() {
    let mut s = setup().await;
    let evil = "\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned-title\x07ZZ\x1b[2J\u{9b}2J\u{202e}gpj.exe";
    let mut p = producer(&s.daemon.socket, &format!("agent{evil}")).await;
    let label = format!("L{evil}");
    ask(
        &mut p,
        &format!("id{evil}"),
        json!([{"question": format!("Q{evil}"), "header": format!("H{evil}"),
            "type": "choice", "placeholder": format!("P{evil}"),
            "options": [{"label": label, "description": format!("D{evil}")},
                        {"label": "Other", "description": ""}]}]),
    )
    .await;
    let screen = s.ui.wait_for("Q␛]52;c;cHduZWQ=").await;
    for part in [
        "agent␛]52;c;cHduZWQ=␇",
        "L␛]52",
        "D␛]52",
        "P␛]52",
        "ZZ␛[2J\u{FFFD}2J\u{FFFD}gpj",
    ] {
        assert!(screen.contains(part), "{part:?} missing from\n{screen}");
    }
    s.ui.keys(ENTER);
    let response = p.recv_type("ask-user-response").await;
    assert_eq!(response["answers"], json!({"0": label}));
    s.ui.wait_for("No questions pending.").await;
    let raw = s.ui.raw();
    let has = |needle: &[u8]| raw.windows(needle.len()).any(|w| w == needle);
    for needle in [
        &b"\x1b]52"[..],
        b"\x1b]0;",
        b"ZZ\x1b[2J",
        b"\x07",
        "\u{9b}".as_bytes(),
        "\u{202e}".as_bytes(),
    ] {
        assert!(!has(needle), "{needle:?} reached the terminal");
    }
    let (title, bells) = s.ui.title_and_bells();
    assert!(!title.contains("pwned"), "the title became {title:?}");
    assert_eq!(bells, 0);
}

fn with_context(id: &str, question: &str, context: Value) -> Value {
    json!({"type": "ask-user-request", "correlationId": id, "context": context,
        "questions": [{"question": question, "header": "Q", "type": "yesno"}]})
}

/// The waiting list groups questions by project and shows agent and title; the dialog says
/// who asks about what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_groups_by_project_and_shows_agent_and_title() {
    let mut s = setup().await;
    let mut p = producer(&s.daemon.socket, "askbus-mcp/0.1.0").await;
    p.send(with_context(
        "w1",
        "Deploy web?",
        json!({"project": "web", "agent": "claude-code/1.0.3", "title": "Ship the landing page"}),
    ))
    .await;
    let screen = s.ui.wait_for("Deploy web?").await;
    assert!(
        screen.contains("web · claude-code/1.0.3 · Ship the landing page"),
        "{screen}"
    );
    p.send(with_context(
        "a1",
        "Migrate api?",
        json!({"project": "api", "agent": "gemini-cli/0.61.0"}),
    ))
    .await;
    p.send(with_context(
        "w2",
        "Purge web cache?",
        json!({"project": "web"}),
    ))
    .await;
    s.ui.wait_for("2 more waiting").await;
    s.ui.keys(CTRL_L);
    let screen = s.ui.wait_for("▸ api (1)").await;
    // web's two questions together, though api's came between them.
    let web = screen.find("▸ web (2)").expect("web group");
    let api = screen.find("▸ api (1)").unwrap();
    let w2 = screen.find("Purge web cache?").expect("w2");
    assert!(web < w2 && w2 < api, "{screen}");
    assert!(
        screen.contains("claude-code/1.0.3 · Ship the landing page"),
        "{screen}"
    );
    assert!(screen.contains("gemini-cli/0.61.0"), "{screen}");
}

/// `askbus ui --project` shows only that project's questions, replayed and live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_filter_shows_only_that_project() {
    let daemon = Daemon::start();
    let mut p = producer(&daemon.socket, "agent").await;
    p.send(with_context(
        "api-1",
        "Migrate api?",
        json!({"project": "api"}),
    ))
    .await;
    p.send(with_context(
        "web-1",
        "Deploy web?",
        json!({"project": "web"}),
    ))
    .await;
    p.ping().await;
    let mut ui = Pty::askbus(&[
        "ui",
        "--socket",
        daemon.socket.to_str().unwrap(),
        "--project",
        "web",
    ]);
    let screen = ui.wait_for("Deploy web?").await;
    assert!(screen.contains("1 question pending"), "{screen}");
    p.send(with_context(
        "api-2",
        "Rotate api keys?",
        json!({"project": "api"}),
    ))
    .await;
    p.send(with_context(
        "web-2",
        "Purge web cache?",
        json!({"project": "web"}),
    ))
    .await;
    let screen = ui.wait_for("1 more waiting").await;
    ui.keys(CTRL_L);
    let screen2 = ui.wait_for("Pending questions · project web").await;
    for s in [&screen, &screen2] {
        assert!(!s.contains("api"), "{s}");
    }
    ui.keys("1");
    ui.wait_for("Deploy web?").await;
    ui.keys("1");
    let resp = p.recv_type("ask-user-response").await;
    assert_eq!(resp["correlationId"], "web-1");
    assert_eq!(resp["answers"], json!({"0": "Yes"}));
}

/// A 4-option multiSelect with descriptions, as agents really send.
fn platforms() -> Value {
    json!({"question": "Which platforms should the release build for? Pick every one you need; each adds about ten minutes to the release pipeline.",
        "header": "Platforms", "type": "choice", "multiSelect": true,
        "options": [
            {"label": "Linux x86-64", "description": "The servers and most CI runners, which is where nearly all of the traffic lands today"},
            {"label": "Linux arm64", "description": "Graviton instances and the Raspberry Pi fleet in the lab, which has grown lately"},
            {"label": "macOS", "description": "Universal binary for Intel and Apple silicon laptops used by the whole team"},
            {"label": "Windows", "description": "MSVC toolchain; needs the signing certificate from the release manager"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_part_is_reachable_by_keyboard_at_80x24_and_60x20() {
    for (rows, cols) in [(24, 80), (20, 60)] {
        let daemon = Daemon::start();
        let mut ui = Pty::askbus_sized(
            &["ui", "--socket", daemon.socket.to_str().unwrap()],
            rows,
            cols,
        );
        ui.wait_for("● connected").await;
        let mut p = producer(&daemon.socket, "release-agent/1.0").await;
        ask(&mut p, "m", json!([platforms()])).await;
        let screen = ui.wait_for(" Platforms ").await;
        // Something is hidden below, and the screen says so.
        assert!(
            screen.contains("more lines below"),
            "{rows}×{cols}\n{screen}"
        );
        ui.keys(END);
        let screen = ui.wait_for("Done").await;
        for part in [
            "All of the above",
            "Enter a custom value",
            "more lines above",
        ] {
            assert!(screen.contains(part), "{part} at {rows}×{cols}\n{screen}");
        }
        ui.keys(HOME);
        ui.wait_for(" Platforms ").await;
        ui.keys(PGDN);
        ui.wait_for("more lines above").await;
        ui.keys(PGUP);
        ui.wait_for("Which platforms should").await;
        // Check two, then finish with Done reached by ↑ (wrapping from the first row).
        ui.keys("1");
        ui.wait_for("[x] Linux x86-64").await;
        ui.keys("3");
        ui.wait_for("[x] macOS").await;
        // From row 3 up to the first, then ↑ wraps to Done (nothing hidden above by then).
        ui.keys(UP);
        ui.keys(UP);
        ui.wait_for("● 1. [x] Linux x86-64").await;
        ui.keys(UP);
        ui.wait_for("●    Done").await;
        ui.keys(ENTER);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(
            r["answers"],
            json!({"0": "Linux x86-64, macOS"}),
            "{rows}×{cols}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_100x30_and_40_columns_the_countdown_and_the_keys_stay_readable() {
    for (rows, cols) in [(30, 100), (20, 40)] {
        let daemon = Daemon::start();
        let mut ui = Pty::askbus_sized(
            &["ui", "--socket", daemon.socket.to_str().unwrap()],
            rows,
            cols,
        );
        ui.wait_for("● connected").await;
        // A 36-character client name: at 40 columns the name gives way, never the countdown.
        let mut p = producer(&daemon.socket, "a-very-long-agent-name/with-ver-1.2.3").await;
        ask(&mut p, "m", json!([platforms()])).await;
        ask(&mut p, "n", json!([db_question(false)])).await;
        let screen = ui.wait_for(" Platforms ").await;
        let title = screen.lines().nth(1).unwrap();
        assert!(
            title.contains("m 00s left") || title.contains("m 59s left"),
            "{title}"
        );
        assert!(title.contains("a-very-long"), "{title}");
        // The hint line keeps Esc; the reminder of the other question stays.
        assert!(screen.contains("Esc"), "{cols}\n{screen}");
        assert!(screen.contains("Ctrl+L"), "{cols}\n{screen}");
        ui.keys(END);
        let end = ui.wait_for("Done").await;
        assert!(end.contains("All of the above"), "{cols}\n{end}");
        ui.keys(CTRL_L);
        let list = ui.wait_for("2. a-very").await;
        for row in list.lines().filter(|l| l.contains(". a-very")) {
            assert!(
                row.contains(" left"),
                "the countdown is cut at {cols}: {row}"
            );
        }
        // Number keys open a question, and in it a number answers and advances.
        ui.keys("2");
        ui.wait_for("Which database should the service").await;
        ui.keys("2");
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "SQLite"}), "{cols}");
    }
}

/// With a store, a daemon restart keeps the pending question, and `askbus ui` keeps the text
/// a person was typing into it (keyed by correlationId across the reconnect), showing the
/// request once: after SIGTERM and after SIGKILL. The producer re-attaches by resending and
/// gets the text typed before the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restart_with_a_store_keeps_what_was_typed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("askbus.db");
    let mut daemon = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let mut ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("● connected").await;
    let request = json!({"type": "ask-user-request", "correlationId": "d1", "timeoutMs": 120000,
        "questions": [db_question(false), {"question": "Why?", "header": "Why", "type": "text"}]});
    let mut p = producer(&daemon.socket, "a").await;
    p.send(request.clone()).await;
    ui.wait_for("Which database").await;
    // An answer picked on the first tab, a text typed into the second.
    ui.keys("2");
    ui.wait_for("Why?").await;
    ui.keys("because it is embedded");
    ui.wait_for("because it is embedded").await;
    for crash in [false, true] {
        if crash {
            daemon.kill();
        } else {
            daemon.terminate(Duration::from_secs(10));
        }
        ui.wait_for("✗ disconnected").await;
        daemon.restart();
        let screen = ui.wait_for("Reconnected to askbusd").await;
        let screen = if screen.contains("because it is embedded") {
            screen
        } else {
            ui.wait_for("because it is embedded").await
        };
        assert!(screen.contains("Why?"), "{screen}");
        assert!(screen.contains("1 question pending"), "{screen}");
        // The producer re-attaches (the same request again).
        p = producer(&daemon.socket, "a").await;
        p.send(request.clone()).await;
        p.ping().await;
    }
    // Shown once: the list has the one request.
    ui.keys(CTRL_L);
    let list = ui.wait_for("Pending questions").await;
    assert_eq!(list.matches("Which database").count(), 1, "{list}");
    ui.keys(ENTER);
    ui.wait_for("because it is embedded").await;
    ui.keys(ENTER);
    ui.wait_for("Review your answers").await;
    // An answer in flight when the daemon dies: sent into a daemon that never reads it
    // (stopped, then killed). The restored request comes back with what was typed, once.
    daemon.signal(libc::SIGSTOP);
    ui.keys(ENTER);
    ui.wait_for("Sending to a").await;
    daemon.kill();
    ui.wait_for("✗ disconnected").await;
    daemon.restart();
    let screen = ui.wait_for("Review your answers").await;
    assert!(screen.contains("1 question pending"), "{screen}");
    let mut p = producer(&daemon.socket, "a").await;
    p.send(request.clone()).await;
    p.ping().await;
    ui.keys(CTRL_L);
    let list = ui.wait_for("Pending questions").await;
    assert_eq!(list.matches("Which database").count(), 1, "{list}");
    ui.keys(ENTER);
    ui.wait_for("Review your answers").await;
    ui.keys(ENTER);
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(
        r["answers"],
        json!({"0": "SQLite", "1": "because it is embedded"}),
        "{r}"
    );
}

/// `h` in the list opens the recent history (the daemon's records, newest first), Enter a
/// record's timeline, Esc back to the records, `h` back to what is pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h_opens_the_recent_history_and_a_records_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("askbus.db");
    let daemon = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let mut ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("● connected").await;
    let mut p = producer(&daemon.socket, "deploy-agent/2").await;
    ask(&mut p, "first", json!([db_question(false)])).await;
    ui.wait_for("Which database").await;
    ui.keys("2");
    p.recv_type("ask-user-response").await;
    p.send(
        json!({"type": "ask-user-request", "correlationId": "second",
        "questions": [{"question": "Ship it now?", "header": "Ship", "type": "yesno"}],
        "context": {"project": "shop"}}),
    )
    .await;
    ui.wait_for("Ship it now?").await;
    ui.keys(ESC);
    p.recv_type("ask-user-response").await;
    ui.wait_for("h history").await;
    ui.keys("h");
    let screen = ui.wait_for("History · the latest 2").await;
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("Ship it now?") || l.contains("Which database"))
        .collect();
    assert_eq!(rows.len(), 2, "{screen}");
    assert!(
        rows[0].contains("● ") && rows[0].contains("dismissed · human/tui"),
        "{screen}"
    );
    assert!(rows[1].contains("answered · human/tui"), "{screen}");
    ui.keys(DOWN);
    ui.keys(ENTER);
    let detail = ui.wait_for("History · first").await;
    for part in [
        "id         first",
        "asked",
        "by deploy-agent/2 (uid",
        "what       Which database should the service use?",
        "answered by human/tui",
        "answer     0: SQLite",
        "delivered  yes",
    ] {
        assert!(detail.contains(part), "{part:?}\n{detail}");
    }
    ui.keys(ESC);
    ui.wait_for("History · the latest 2").await;
    ui.keys("h");
    ui.wait_for("No questions pending.").await;
}
