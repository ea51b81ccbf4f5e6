//! The dialog's keys and answers, against the reference's behaviour.

use super::*;
use crate::ui::question::{Kind, Question, OTHER_HINT, TEXT_HINT};
use serde_json::json;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(d: &mut Dialog, keys: &str) -> Outcome {
    let mut last = Outcome::Continue;
    for c in keys.chars() {
        last = d.handle_key(key(match c {
            '\n' => KeyCode::Enter,
            '↓' => KeyCode::Down,
            '↑' => KeyCode::Up,
            '→' => KeyCode::Right,
            '←' => KeyCode::Left,
            '\t' => KeyCode::Tab,
            c => KeyCode::Char(c),
        }));
    }
    last
}

fn submitted(pairs: &[(usize, &str)]) -> Outcome {
    Outcome::Submit(pairs.iter().map(|(i, s)| (*i, (*s).to_owned())).collect())
}

fn choice(multi: bool) -> Value {
    json!({"question": "Which?", "header": "DB", "type": "choice", "multiSelect": multi,
        "options": [
            {"label": "PostgreSQL", "description": "relational"},
            {"label": "SQLite", "description": ""},
            {"label": "DuckDB", "description": "columnar"}]})
}

fn dialog(qs: Value) -> Dialog {
    Dialog::from_json(&qs)
}

#[test]
fn rows_follow_the_reference() {
    let single = Question::from_json(&choice(false));
    assert_eq!(
        single.rows(),
        vec![Row::Option(0), Row::Option(1), Row::Option(2), Row::Other]
    );
    let multi = Question::from_json(&choice(true));
    assert_eq!(
        multi.rows(),
        vec![
            Row::Option(0),
            Row::Option(1),
            Row::Option(2),
            Row::All,
            Row::Other,
            Row::Done
        ]
    );
    let one = Question::from_json(&json!({"question": "q", "header": "h", "type": "choice",
        "multiSelect": true, "options": [{"label": "a", "description": ""}]}));
    assert_eq!(one.rows(), vec![Row::Option(0), Row::Other, Row::Done]);
    assert_eq!(one.placeholder, OTHER_HINT);
}

#[test]
fn yesno_ignores_model_options() {
    let q = Question::from_json(&json!({"question": "Ship?", "header": "Go",
        "type": "yesno", "options": [{"label": "Sure", "description": "x"}]}));
    let Kind::Choice { options, multi, .. } = &q.kind else {
        panic!()
    };
    let labels: Vec<_> = options.iter().map(|o| o.label.as_str()).collect();
    assert_eq!(labels, ["Yes", "No"]);
    assert!(!multi);
}

#[test]
fn single_choice_enter_and_numbers() {
    let mut d = dialog(json!([choice(false)]));
    assert_eq!(press(&mut d, "↓\n"), submitted(&[(0, "SQLite")]));
    let mut d = dialog(json!([choice(false)]));
    assert_eq!(press(&mut d, "3"), submitted(&[(0, "DuckDB")]));
    let mut d = dialog(json!([choice(false)]));
    assert_eq!(press(&mut d, "jjk "), submitted(&[(0, "SQLite")]));
    // Up from the top wraps to the Other row.
    let mut d = dialog(json!([choice(false)]));
    press(&mut d, "↑");
    assert_eq!(d.current_row(), Some(Row::Other));
}

#[test]
fn typing_starts_other_and_enter_sends_it_trimmed() {
    let mut d = dialog(json!([choice(false)]));
    assert_eq!(press(&mut d, "Maria"), Outcome::Continue);
    assert!(d.is_editing());
    // j, k, digits and space are text once in the field.
    assert_eq!(
        press(&mut d, "DB jk 10 \n"),
        submitted(&[(0, "MariaDB jk 10")])
    );
    // Its number answers with it once typed (Up leaves the field first).
    let mut d = dialog(json!([choice(false)]));
    press(&mut d, "Redis↑");
    assert_eq!(press(&mut d, "4"), submitted(&[(0, "Redis")]));
    // Enter on a blank Other does nothing.
    let mut d = dialog(json!([choice(false)]));
    assert_eq!(press(&mut d, "4  \n"), Outcome::Continue);
    assert_eq!(d.current_row(), Some(Row::Other));
}

#[test]
fn multiselect_with_all_and_other() {
    let mut d = dialog(json!([choice(true)]));
    // Toggle 3 then 1, then Done: labels in option order.
    press(&mut d, "31");
    assert_eq!(d.answer(0).as_deref(), Some("PostgreSQL, DuckDB"));
    // All of the above checks all; again clears all.
    press(&mut d, "4");
    assert_eq!(d.answer(0).as_deref(), Some("PostgreSQL, SQLite, DuckDB"));
    press(&mut d, "4");
    assert_eq!(d.answer(0), None);
    press(&mut d, "4");
    // Other text goes last; Enter in the field submits everything.
    assert_eq!(
        press(&mut d, "Redis \n"),
        submitted(&[(0, "PostgreSQL, SQLite, DuckDB, Redis")])
    );
}

#[test]
fn multiselect_space_toggles_and_done_submits_even_empty() {
    let mut d = dialog(json!([choice(true)]));
    assert_eq!(press(&mut d, " ↓ ↓"), Outcome::Continue);
    assert_eq!(d.answer(0).as_deref(), Some("PostgreSQL, SQLite"));
    let mut d = dialog(json!([choice(true)]));
    // Done is the last row; Enter there submits with nothing chosen, as the reference.
    assert_eq!(press(&mut d, "↑\n"), submitted(&[]));
}

#[test]
fn yesno_and_feedback() {
    let yn = json!([{"question": "Ship?", "header": "Go", "type": "yesno"}]);
    assert_eq!(
        press(&mut dialog(yn.clone()), "\n"),
        submitted(&[(0, "Yes")])
    );
    assert_eq!(press(&mut dialog(yn.clone()), "2"), submitted(&[(0, "No")]));
    assert_eq!(
        press(&mut dialog(yn), "not yet, tests first\n"),
        submitted(&[(0, "not yet, tests first")])
    );
}

#[test]
fn text_is_trimmed_and_empty_submits_nothing() {
    let t = json!([{"question": "Name?", "header": "N", "type": "text", "placeholder": ""}]);
    let mut d = dialog(t.clone());
    assert_eq!(d.questions[0].placeholder, TEXT_HINT);
    assert_eq!(press(&mut d, "  jk 1 \n"), submitted(&[(0, "jk 1")]));
    assert_eq!(press(&mut dialog(t), "\n"), submitted(&[]));
}

#[test]
fn several_questions_review_with_one_unanswered() {
    let qs = json!([
        choice(false),
        {"question": "Name?", "header": "N", "type": "text"},
        {"question": "Ship?", "header": "Go", "type": "yesno"}
    ]);
    let mut d = dialog(qs);
    assert_eq!(press(&mut d, "2"), Outcome::Continue);
    assert_eq!(d.tab, 1);
    // Skip the text question with Tab; ←/→ are the text field's there.
    press(&mut d, "ab←\t");
    assert_eq!(d.tab, 2);
    assert_eq!(press(&mut d, "\n"), Outcome::Continue);
    assert!(d.on_review());
    // The typed text counts though Enter was never pressed in it.
    assert_eq!(
        press(&mut d, "\n"),
        submitted(&[(0, "SQLite"), (1, "ab"), (2, "Yes")])
    );
    let mut d =
        dialog(json!([choice(false), {"question": "Name?", "header": "N", "type": "text"}]));
    press(&mut d, "1\t");
    assert!(d.on_review());
    assert_eq!(press(&mut d, "\n"), submitted(&[(0, "PostgreSQL")]));
}

#[test]
fn tabs_do_not_wrap_and_keep_state() {
    let qs = json!([choice(true), choice(false)]);
    let mut d = dialog(qs);
    press(&mut d, "←←");
    assert_eq!(d.tab, 0);
    press(&mut d, "1→→→→");
    assert!(d.on_review());
    press(&mut d, "1");
    assert_eq!(d.tab, 0);
    assert_eq!(d.answer(0).as_deref(), Some("PostgreSQL"));
}

#[test]
fn escape_dismisses_and_ctrl_c_clears_first() {
    let mut d = dialog(json!([choice(false)]));
    press(&mut d, "abc");
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(d.handle_key(ctrl_c), Outcome::Continue);
    assert_eq!(d.answer(0), None);
    assert_eq!(d.handle_key(ctrl_c), Outcome::Dismiss);
    let mut d = dialog(json!([choice(false)]));
    press(&mut d, "abc");
    assert_eq!(d.handle_key(key(KeyCode::Esc)), Outcome::Dismiss);
}

#[test]
fn an_empty_question_set_only_dismisses() {
    let mut d = dialog(json!([]));
    assert_eq!(press(&mut d, "1\n j"), Outcome::Continue);
    assert_eq!(d.handle_key(key(KeyCode::Esc)), Outcome::Dismiss);
}

#[test]
fn paste_goes_to_the_other_field() {
    let mut d = dialog(json!([choice(false)]));
    d.handle_paste("from the clipboard");
    assert!(d.is_editing());
    assert_eq!(d.answer(0).as_deref(), Some("from the clipboard"));
}
