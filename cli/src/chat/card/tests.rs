//! The card's tests: each kind's view, taps and replies, redaction and the limits.

use super::*;
use serde_json::json;

fn user() -> User {
    User {
        id: "1".into(),
        name: "Al".into(),
    }
}

fn question(v: Value) -> Card {
    let r: UiRequest = serde_json::from_value(json!({"correlationId": "c1", "questions": v,
        "timeoutMs": 600_000, "producer": {"client": "a/1", "pid": 1, "uid": 0},
        "context": {"agent": "gemini-cli", "project": "web"}}))
    .unwrap();
    Card::from_question(&r)
}

#[test]
fn words_for_time_left() {
    assert_eq!(
        left_in_words(Duration::from_secs(30)),
        "less than a minute left"
    );
    assert_eq!(left_in_words(Duration::from_secs(599)), "9 min left");
    assert_eq!(left_in_words(Duration::from_secs(4800)), "1 h 20 min left");
    assert_eq!(left_in_words(Duration::from_secs(7200)), "2 h left");
}

#[test]
fn the_countdown_steps_coarsely_and_never_overstates() {
    let s = |secs| shown_left(Duration::from_millis(secs)).as_secs();
    assert_eq!(s(59_999), 0);
    assert_eq!(s(61_500), 60);
    assert_eq!(s(599_999), 540);
    assert_eq!(s(600_000), 600);
    assert_eq!(s(3_599_000), 3300);
    assert_eq!(s(4_800_000), 3600);
    assert_eq!(s(200_000_000), 172_800);
    // The next change is the instant the time left drops below what is shown.
    let mut c = question(json!([{"question": "A?", "header": "A", "type": "yesno"}]));
    c.meta.timeout_ms = 61_500;
    let at = c.countdown_at().unwrap();
    let left = (c.meta.arrived + Duration::from_millis(61_500)) - at;
    assert_eq!(left, Duration::from_millis(59_999));
    c.end("over".into());
    assert_eq!(c.countdown_at(), None);
}

#[test]
fn multiselect_toggles_then_done() {
    let mut c = question(
        json!([{"question": "Which?", "header": "DB", "type": "choice",
        "multiSelect": true, "options": [{"label": "a", "description": ""},
        {"label": "b", "description": ""}, {"label": "c", "description": ""}]}]),
    );
    assert_eq!(
        c.tap(Action::Done, &user()),
        Step::Refuse("Check at least one option first.")
    );
    assert_eq!(c.tap(Action::Toggle(2), &user()), Step::Redraw);
    assert_eq!(c.tap(Action::Toggle(0), &user()), Step::Redraw);
    let v = c.view();
    assert!(v
        .rows
        .iter()
        .flatten()
        .any(|b| matches!(b, Button::Tap { label, .. } if label == "☑ c")));
    assert_eq!(
        c.tap(Action::Done, &user()),
        Step::Answer(BTreeMap::from([(0, "a, c".to_owned())]))
    );
    assert!(c.view().rows.is_empty());
}

#[test]
fn several_questions_step_then_submit() {
    let mut c = question(json!([
        {"question": "A?", "header": "A", "type": "yesno"},
        {"question": "Name?", "header": "N", "type": "text"}]));
    assert_eq!(c.tap(Action::Pick(1), &user()), Step::Redraw);
    assert!(c.wants_reply());
    assert_eq!(c.reply("  Bob ", &user()), Step::Redraw);
    assert_eq!(
        c.tap(Action::Submit, &user()),
        Step::Answer(BTreeMap::from([
            (0, "No".to_owned()),
            (1, "Bob".to_owned())
        ]))
    );
}

#[test]
fn deny_asks_a_reason() {
    let a: UiApproval = serde_json::from_value(json!({"correlationId": "a1",
        "toolCall": {"name": "run_shell_command", "args": {"command": "ls"}},
        "details": {"type": "exec", "title": "Shell", "command": "ls", "rootCommand": "ls"},
        "outcomes": ["proceed_once", "proceed_always", "cancel"], "timeoutMs": 5000,
        "producer": {"client": "h/1", "pid": 3, "uid": 0}}))
    .unwrap();
    let mut c = Card::from_approval(&a);
    let labels: Vec<String> = c
        .view()
        .rows
        .iter()
        .flatten()
        .filter_map(|b| match b {
            Button::Tap { label, .. } => Some(label.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["Allow once", "Allow always", "Deny"]);
    assert_eq!(c.tap(Action::Deny, &user()), Step::Prompt(String::new()));
    assert_eq!(
        c.reply("too risky", &user()),
        Step::Decide(Decision::deny(Some("too risky".into())))
    );
}

#[test]
fn code_is_cut_on_lines() {
    let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
    let (c, cut) = cut_code(&long);
    assert_eq!(c.lines().count(), MAX_CODE_LINES);
    assert_eq!(cut, 100 - MAX_CODE_LINES);
    let (c, cut) = cut_code(&"x".repeat(5000));
    assert_eq!(c.chars().count(), MAX_CODE);
    assert_eq!(cut, 0);
}

#[test]
fn allow_always_shows_the_rule_it_writes() {
    // Hooks offer no "always" of their own: askbus's rule is the "always", sending once.
    let a: UiApproval = serde_json::from_value(json!({"correlationId": "a1",
        "toolCall": {"name": "run_shell_command", "args": {"command": "npm test"}},
        "details": {"type": "exec", "title": "Shell", "command": "npm test", "rootCommand": "npm"},
        "outcomes": ["proceed_once", "cancel"], "timeoutMs": 5000,
        "context": {"agent": "claude-code", "project": "shop"},
        "producer": {"client": "h/1", "pid": 3, "uid": askbus::trust::effective_uid()}}))
    .unwrap();
    let mut c = Card::from_approval(&a);
    let v = c.view();
    let labels: Vec<String> = v
        .rows
        .iter()
        .flatten()
        .filter_map(|b| match b {
            Button::Tap { label, .. } => Some(label.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        [
            "Allow once",
            "Allow always",
            "Allow always, every project",
            "Deny"
        ]
    );
    let offer = crate::always::offer(&a, ToolOutcome::ProceedAlways).unwrap();
    let rule = crate::always::describe(offer.rule(false).unwrap());
    assert!(rule.contains("starting \"npm\" in project shop"), "{rule}");
    let wide = crate::always::describe(offer.rule(true).unwrap());
    assert!(wide.contains("starting \"npm\" in every project"), "{wide}");
    for note in [
        format!("Allow always: writes the rule: {rule}"),
        format!("Allow always, every project: writes the rule: {wide}"),
    ] {
        assert!(v.blocks.contains(&Block::Note(note)), "{:?}", v.blocks);
    }
    let i = ToolOutcome::ALL
        .iter()
        .position(|o| *o == ToolOutcome::ProceedAlways)
        .unwrap() as u8;
    // The widened twin of a tap that is not "always" is refused.
    let once = ToolOutcome::ALL
        .iter()
        .position(|o| *o == ToolOutcome::ProceedOnce)
        .unwrap() as u8;
    assert!(matches!(
        c.clone().tap(Action::AllowEverywhere(once), &user()),
        Step::Refuse(_)
    ));
    let mut widened = c.clone();
    match widened.tap(Action::AllowEverywhere(i), &user()) {
        Step::Always(o, true) => assert_eq!(o, offer),
        s => panic!("{s:?}"),
    }
    assert!(widened.sent().unwrap().1.contains(&wide));
    match c.tap(Action::Allow(i), &user()) {
        Step::Always(o, false) => {
            assert_eq!(o, offer);
            assert_eq!(o.sent, ToolOutcome::ProceedOnce);
        }
        s => panic!("{s:?}"),
    }
    assert!(c.sent().unwrap().1.contains(&rule));
}

#[test]
fn every_always_and_its_widened_twin_fit_five_rows() {
    // Gemini CLI's MCP call offers four "always" outcomes: with their widened twins, nine
    // allow buttons, three to a row, and Deny.
    let a: UiApproval = serde_json::from_value(json!({"correlationId": "a2",
        "toolCall": {"name": "search", "args": {"q": "x"}}, "serverName": "docs",
        "details": {"type": "mcp", "title": "MCP", "serverName": "docs", "toolName": "search",
            "toolDisplayName": "search"},
        "outcomes": ["proceed_once", "proceed_always", "proceed_always_server",
            "proceed_always_tool", "proceed_always_and_save", "cancel"], "timeoutMs": 5000,
        "context": {"agent": "gemini-cli", "project": "shop"},
        "producer": {"client": "g/1", "pid": 3, "uid": askbus::trust::effective_uid()}}))
    .unwrap();
    let v = Card::from_approval(&a).view();
    let rows: Vec<usize> = v.rows.iter().map(Vec::len).filter(|n| *n > 0).collect();
    assert!(rows.len() <= 5 && rows.iter().all(|n| *n <= 5), "{rows:?}");
    let wide = v
        .rows
        .iter()
        .flatten()
        .filter(|b| matches!(b, Button::Tap { label, .. } if label.ends_with("every project")))
        .count();
    assert_eq!(
        wide,
        crate::always::offers(&a)
            .iter()
            .filter(|o| o.widens())
            .count()
    );
    assert!(wide >= 1, "{:?}", v.rows);
}
