//! The drawing tests: the state a key or a bus event leaves, drawn into a test backend and read
//! back as text.

use super::*;
use crate::ui::app::App;
use askbus::client::UiEvent;
use askbus::protocol::{ProducerInfo, UiRequest};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;
use std::time::Duration;

fn app_with(questions: serde_json::Value) -> App {
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    app.on_event(
        UiEvent::Request(UiRequest {
            correlation_id: "c".into(),
            questions,
            timeout_ms: 90_000,
            producer: ProducerInfo {
                client: Some("agent".into()),
                pid: Some(1),
                uid: 0,
            },
            context: None,
            node: None,
        }),
        now,
    );
    app
}

fn text(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, app, Instant::now(), "/s")).unwrap();
    let buf = t.backend().buffer();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_owned())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn long_multiselect() -> serde_json::Value {
    let desc = "A description long enough to wrap onto a second line at eighty columns, \
                which many real options have.";
    json!([{"question": "Line one of the question.\nLine two.\nLine three.",
        "header": "Big", "type": "choice", "multiSelect": true,
        "options": [
            {"label": "First", "description": desc},
            {"label": "Second", "description": desc},
            {"label": "Third", "description": desc},
            {"label": "Fourth", "description": desc}]}])
}

#[test]
fn tall_dialogs_scroll_to_the_focused_row_and_keep_the_hints() {
    let mut app = app_with(long_multiselect());
    let top = text(&app, 80, 24);
    assert!(top.contains("Line one of the question."), "{top}");
    assert!(top.contains("Enter to select"), "{top}");
    assert!(!top.contains("Finish selection"), "{top}");
    // Up from the first row wraps to Done, the last.
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    let bottom = text(&app, 80, 24);
    assert!(bottom.contains("●    Done"), "{bottom}");
    assert!(bottom.contains("Finish selection"), "{bottom}");
    assert!(bottom.contains("Enter to select"), "{bottom}");
    assert!(!bottom.contains("Line one of the question."), "{bottom}");
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

#[test]
fn every_part_of_a_tall_dialog_is_reachable_with_markers() {
    for (w, h) in [(80, 24), (60, 20)] {
        let mut app = app_with(long_multiselect());
        let top = text(&app, w, h);
        assert!(top.contains(" Big "), "{top}");
        assert!(
            top.contains("▼ ") && top.contains("more lines below"),
            "{w}×{h}\n{top}"
        );
        assert!(!top.contains("▲"), "{top}");
        // End shows the bottom: All of the above, Other, Done, with a marker above.
        key(&mut app, KeyCode::End);
        let bottom = text(&app, w, h);
        for part in [
            "All of the above",
            "Enter a custom value",
            "Done",
            "Finish selection",
        ] {
            assert!(bottom.contains(part), "{part} at {w}×{h}\n{bottom}");
        }
        assert!(bottom.contains("▲ ") && !bottom.contains("▼"), "{bottom}");
        // Home (and PgUp from there) brings the header back; PgDn pages down.
        key(&mut app, KeyCode::Home);
        assert!(text(&app, w, h).contains(" Big "));
        key(&mut app, KeyCode::PageDown);
        let mid = text(&app, w, h);
        assert!(mid.contains("▲ "), "{mid}");
        key(&mut app, KeyCode::PageUp);
        assert!(text(&app, w, h).contains("Line one of the question."));
        // Every line was on screen at some scroll position: page through and collect.
        let mut seen = String::new();
        key(&mut app, KeyCode::Home);
        for _ in 0..12 {
            seen.push_str(&text(&app, w, h));
            key(&mut app, KeyCode::PageDown);
        }
        for part in [
            "Line two.",
            "Line three.",
            "First",
            "Second",
            "Third",
            "Fourth",
        ] {
            assert!(seen.contains(part), "{part} never shown at {w}×{h}");
        }
    }
}

#[test]
fn up_on_the_first_row_scrolls_back_to_the_header_before_wrapping() {
    let mut app = app_with(long_multiselect());
    // Down to Done (the last row), then back to the first with Down (wrap).
    for _ in 0..6 {
        key(&mut app, KeyCode::Down);
    }
    assert!(text(&app, 60, 20).contains("●    Done"));
    key(&mut app, KeyCode::Down);
    let first = text(&app, 60, 20);
    assert!(first.contains("● 1. [ ] First"), "{first}");
    assert!(
        first.contains(" Big "),
        "the header comes back with the first row\n{first}"
    );
}

#[test]
fn the_title_cuts_the_name_not_the_countdown() {
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    app.on_event(
        UiEvent::Request(UiRequest {
            correlation_id: "c".into(),
            questions: json!([{"question": "Q?", "header": "H", "type": "yesno"}]),
            timeout_ms: 598_000,
            producer: ProducerInfo {
                client: Some("a-very-long-agent-name/with-a-version-1.2.3".into()),
                pid: Some(4242),
                uid: 0,
            },
            context: None,
            node: None,
        }),
        now,
    );
    for w in [60, 40, 30] {
        let screen = text(&app, w, 12);
        let title = screen.lines().nth(1).unwrap();
        assert!(
            title.contains("9m 5") && title.contains("s left"),
            "{w}: {title}"
        );
        if w >= 40 {
            assert!(
                title.contains("a-very") && title.contains("… asks"),
                "{w}: {title}"
            );
        }
    }
}

#[test]
fn notices_expire_and_reconnected_never_shows_under_disconnected() {
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    app.on_down("gone".into(), Duration::from_secs(5), now);
    app.on_connected(0);
    assert!(text(&app, 80, 24).contains("Reconnected"));
    app.on_down("gone again".into(), Duration::from_secs(5), now);
    let down = text(&app, 80, 24);
    assert!(down.contains("✗ disconnected"), "{down}");
    assert!(!down.contains("Reconnected"), "{down}");
    app.on_connected(0);
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| draw(f, &app, Instant::now() + Duration::from_secs(60), "/s"))
        .unwrap();
    let later: String = (0..80)
        .map(|x| t.backend().buffer()[(x, 23)].symbol().to_owned())
        .collect();
    assert!(
        !later.contains("Reconnected"),
        "a notice a minute old: {later}"
    );
}

#[test]
fn small_terminals_degrade_without_panicking() {
    let app = app_with(long_multiselect());
    for (w, h) in [(40, 12), (20, 5), (20, 3), (10, 2), (1, 1)] {
        let _ = text(&app, w, h);
    }
    assert!(text(&app, 10, 2).contains("askbus ui"));
    assert!(text(&app_with(json!([])), 80, 24).contains("(no questions)"));
    let narrow = text(&app, 40, 12);
    assert!(narrow.contains("First"), "{narrow}");
}

#[test]
fn escapes_in_bus_text_never_reach_a_cell() {
    let evil = "\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x1b[2J\u{9b}2J\u{202E}rlo";
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    app.on_event(
        UiEvent::Request(UiRequest {
            correlation_id: format!("id{evil}"),
            questions: json!([
                {"question": format!("Q {evil}\nline2"), "header": format!("H{evil}"),
                 "type": "choice", "placeholder": format!("P{evil}"),
                 "options": [{"label": format!("L{evil}"), "description": format!("D{evil}")},
                             {"label": "ok", "description": ""}]},
                {"question": "t", "header": "T", "type": "text", "placeholder": format!("P{evil}")}
            ]),
            timeout_ms: 90_000,
            producer: ProducerInfo {
                client: Some(format!("agent{evil}")),
                pid: Some(1),
                uid: 0,
            },
            context: Some(Box::new(askbus::protocol::RequestContext {
                agent: Some(format!("ag{evil}")),
                project: Some(format!("pr{evil}")),
                title: Some(format!("ti{evil}")),
                ..Default::default()
            })),
            node: None,
        }),
        now,
    );
    // A lone request opens at once.
    let dialog = text(&app, 100, 30);
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    let second = text(&app, 100, 30);
    app.on_key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL));
    let list = text(&app, 100, 30);
    for screen in [&list, &dialog, &second] {
        // (`text` joins the rows with newlines; the rows themselves hold none.)
        for row in screen.split('\n') {
            assert!(!row.contains(crate::term::is_unsafe), "{row:?}");
        }
    }
    // Visibly replaced, not dropped.
    assert!(list.contains("agent␛]52;c;cHduZWQ=␇"), "{list}");
    assert!(
        dialog.contains("Q ␛]52;c;cHduZWQ=␇␛]0;title␇␛[2J\u{FFFD}2J\u{FFFD}rlo"),
        "{dialog}"
    );
    assert!(dialog.contains("L␛]52"), "{dialog}");
    assert!(dialog.contains("D␛]52"), "{dialog}");
    assert!(second.contains("P␛]52"), "{second}");
}

fn app_with_approval(frame: serde_json::Value) -> App {
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    let a: askbus::protocol::UiApproval = serde_json::from_value(frame).unwrap();
    app.on_event(UiEvent::Approval(Box::new(a)), now);
    app
}

fn approval_frame(details: serde_json::Value, outcomes: serde_json::Value) -> serde_json::Value {
    json!({"correlationId": "a1", "toolCall": {"name": "run_shell_command",
        "args": {"command": "rm -rf build && cargo build"}},
        "details": details, "outcomes": outcomes, "timeoutMs": 120_000,
        "producer": {"client": "gemini-cli/0.61.0", "pid": 42, "uid": 0},
        "context": {"project": "shop", "agent": "gemini", "cwd": "/home/me/shop", "title": "fixing the build"}})
}

#[test]
fn narrow_screens_keep_the_countdown_and_the_escape_hint() {
    let mut app = App::new();
    let now = Instant::now();
    app.on_connected(0);
    for id in ["a", "b"] {
        app.on_event(
            UiEvent::Request(UiRequest {
                correlation_id: id.into(),
                questions: json!([{"question": "Q?", "header": "H", "type": "yesno"}]),
                timeout_ms: 598_000,
                producer: ProducerInfo {
                    client: Some("a-very-long-agent-name/with-a-version-1.2.3".into()),
                    pid: Some(4242),
                    uid: 0,
                },
                context: None,
                node: None,
            }),
            now,
        );
    }
    let dialog = text(&app, 40, 16);
    assert!(dialog.contains("Esc cancel"), "{dialog}");
    app.on_key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL));
    for w in [40, 60] {
        let list = text(&app, w, 16);
        let row = list.lines().find(|l| l.contains("1. a-very")).unwrap();
        assert!(row.contains("… · 9m 5"), "{w}: {row}");
        assert!(
            list.contains("q quit") || list.contains("q to quit"),
            "{list}"
        );
    }
    app.on_down("gone".into(), Duration::from_secs(5), now);
    let down = text(&app, 40, 16);
    let status = down.lines().next().unwrap();
    assert!(status.contains("✗ offline · retry in "), "{status}");
    assert!(
        status.trim_end().ends_with('s'),
        "the countdown is whole: {status}"
    );
    assert!(text(&app, 80, 24).contains("✗ disconnected · retrying in "));
}

#[test]
fn hints_say_less_before_they_are_cut() {
    let h = "Enter to select · ↑/↓ to navigate · Esc to cancel";
    assert_eq!(fit_hints(h, 80), h);
    assert_eq!(fit_hints(h, 36), "Enter select · ↑/↓ move · Esc cancel");
    assert!(fit_hints(h, 20).ends_with('…'));
}

#[test]
fn an_approval_at_40_columns_keeps_the_command_and_every_button() {
    let exec = json!({"type": "exec", "title": "Confirm Shell Command",
        "command": "rm -rf build && cargo build", "rootCommand": "rm, cargo",
        "rootCommands": ["rm", "cargo"]});
    let app = app_with_approval(approval_frame(
        exec,
        json!(["proceed_once", "proceed_always", "cancel"]),
    ));
    for (w, h) in [(40, 16), (100, 30)] {
        let screen = text(&app, w, h);
        for part in [
            "$ rm -rf build && cargo build",
            "1. Allow once",
            "2. Allow always",
            "3. Deny",
            "Esc",
            "1 ",
        ] {
            assert!(screen.contains(part), "{part:?} at {w}×{h}\n{screen}");
        }
    }
    // So tiny that the buttons take every row: they still show, the details give way.
    let tiny = text(&app, 40, 8);
    assert!(tiny.contains("1. Allow once"), "{tiny}");
}

#[test]
fn a_long_notice_wraps_whole_beside_the_reminder_and_only_an_enormous_one_is_cut() {
    let mut app = app_with(long_multiselect());
    let now = Instant::now();
    app.on_event(
        UiEvent::Request(UiRequest {
            correlation_id: "d".into(),
            questions: json!([{"question": "Q?", "header": "H", "type": "yesno"}]),
            timeout_ms: 90_000,
            producer: ProducerInfo {
                client: Some("x".into()),
                pid: None,
                uid: 0,
            },
            context: None,
            node: None,
        }),
        now,
    );
    app.on_event(
        UiEvent::Error(askbus::protocol::ErrorFrame {
            code: "internal".into(),
            message: "a long explanation of what went wrong, longer than any narrow line".into(),
            correlation_id: None,
        }),
        now,
    );
    for w in [40u16, 80] {
        let screen = text(&app, w, 20);
        let rows: Vec<&str> = screen.lines().collect();
        // The notice's rows are the last ones, the reminder beside the first of them.
        let first = rows
            .iter()
            .position(|r| r.contains("askbusd: internal"))
            .unwrap_or_else(|| panic!("{w}: {screen}"));
        assert!(rows[first].contains("Ctrl+L"), "{w}: {screen}");
        let notice: Vec<&str> = rows[first..]
            .iter()
            .map(|r| r.split("  ").next().unwrap().trim())
            .collect();
        assert_eq!(
            notice.join(" "),
            "askbusd: internal: a long explanation of what went wrong, longer than any narrow line",
            "{w}: {screen}"
        );
        assert!(!notice.concat().contains('…'), "{w}: {screen}");
        // The dialog is still drawn above it.
        assert!(screen.contains("Line three."), "{w}: {screen}");
    }
    app.on_event(
        UiEvent::Error(askbus::protocol::ErrorFrame {
            code: "internal".into(),
            message: "word ".repeat(400),
            correlation_id: None,
        }),
        now,
    );
    let screen = text(&app, 80, 24);
    let rows: Vec<&str> = screen.lines().collect();
    let first = rows
        .iter()
        .position(|r| r.contains("askbusd: internal"))
        .unwrap();
    assert_eq!(
        rows.len() - first,
        23 / 3,
        "a third of the screen at most:\n{screen}"
    );
    assert!(rows.last().unwrap().contains('…'), "{screen}");
}

#[test]
fn a_big_diff_is_laid_out_once_per_width_and_read_to_its_end() {
    let mut diff = String::from("@@ -1,5000 +1,5000 @@\n");
    for i in 0..5000 {
        diff.push_str(&format!("-old {i}\n+new {i}\n"));
    }
    let edit = json!({"type": "edit", "title": "Confirm Edit", "fileName": "main.rs",
        "filePath": "/p/main.rs", "fileDiff": diff, "originalContent": "x", "newContent": "y"});
    let mut app = app_with_approval(approval_frame(edit, json!(["proceed_once", "cancel"])));
    let top = text(&app, 80, 24);
    assert!(
        top.contains("+5000 −5000") && top.contains("-old 0"),
        "{top}"
    );
    let laid_out = |app: &App| {
        let e = app.open_entry().unwrap();
        let l = e.layout.borrow();
        l.as_ref().map(|(w, lines)| (*w, lines.len()))
    };
    let first = laid_out(&app).unwrap();
    assert_eq!(first.0, 76);
    // Keys and ticks redraw from the same layout; another width lays it out again.
    app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    let end = text(&app, 80, 24);
    assert!(
        end.contains("+new 4999") && end.contains("● 1. Allow once"),
        "{end}"
    );
    assert_eq!(laid_out(&app).unwrap(), first);
    let _ = text(&app, 60, 20);
    assert_eq!(laid_out(&app).unwrap().0, 56);
}
