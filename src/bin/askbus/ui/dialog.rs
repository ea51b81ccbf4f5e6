//! One request's dialog: its questions, the state of each question's widget, the tab in view,
//! and what each key does, following Gemini CLI's AskUserDialog. No drawing and no I/O here;
//! the answer strings come from [`super::encode`].

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;

use super::encode::{self, Pick};
use super::input::LineInput;

/// A normalized question as the dialog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub header: String,
    pub text: String,
    pub placeholder: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A choice, or a yesno (whose options are always Yes and No).
    Choice {
        options: Vec<Opt>,
        multi: bool,
        yesno: bool,
    },
    Text,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    pub label: String,
    pub description: String,
}

/// The reference's hints when a question gives no (or an empty) placeholder.
pub const OTHER_HINT: &str = "Enter a custom value";
pub const TEXT_HINT: &str = "Enter your response";

impl Question {
    /// Reads a question the daemon normalized (so already valid). Unknown keys are ignored;
    /// a yesno's options, if the model sent any, are replaced as the reference replaces them.
    pub fn from_json(q: &Value) -> Question {
        let s = |k: &str| q.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let ty = s("type");
        let kind = match ty.as_str() {
            "text" => Kind::Text,
            "yesno" => Kind::Choice {
                options: ["Yes", "No"]
                    .map(|l| Opt {
                        label: l.into(),
                        description: String::new(),
                    })
                    .into(),
                multi: false,
                yesno: true,
            },
            _ => Kind::Choice {
                options: q
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|opts| {
                        opts.iter()
                            .map(|o| Opt {
                                label: o.get("label").and_then(Value::as_str).unwrap_or("").into(),
                                description: o
                                    .get("description")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                multi: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
                yesno: false,
            },
        };
        let placeholder = match (s("placeholder"), &kind) {
            (p, _) if !p.is_empty() => p,
            (_, Kind::Text) => TEXT_HINT.into(),
            _ => OTHER_HINT.into(),
        };
        Question {
            header: s("header"),
            text: s("question"),
            placeholder,
            kind,
        }
    }

    /// The rows of a choice, in screen order; empty for a text question.
    pub fn rows(&self) -> Vec<Row> {
        let Kind::Choice { options, multi, .. } = &self.kind else {
            return Vec::new();
        };
        let mut rows: Vec<Row> = (0..options.len()).map(Row::Option).collect();
        if *multi && options.len() > 1 {
            rows.push(Row::All);
        }
        rows.push(Row::Other);
        if *multi {
            rows.push(Row::Done);
        }
        rows
    }

    pub fn is_multi(&self) -> bool {
        matches!(self.kind, Kind::Choice { multi: true, .. })
    }

    fn labels(&self) -> Vec<&str> {
        match &self.kind {
            Kind::Choice { options, .. } => options.iter().map(|o| o.label.as_str()).collect(),
            Kind::Text => Vec::new(),
        }
    }
}

/// A row of a choice question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Option(usize),
    /// "All of the above" (multiSelect with more than one option).
    All,
    /// Free text.
    Other,
    /// Finish a multiSelect (the reference's "Done"); it has no number.
    Done,
}

/// The state of one question's widget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Widget {
    Choice {
        cursor: usize,
        /// A single choice's pick (set by Enter or a number, as the reference records it).
        picked: Option<Pick>,
        /// A multiSelect's checked options.
        checked: Vec<bool>,
        other: LineInput,
    },
    Text(LineInput),
}

/// What the caller should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// Send these answers (`cancelled: false`).
    Submit(BTreeMap<usize, String>),
    /// Send `cancelled: true`.
    Dismiss,
}

#[derive(Debug, Clone)]
pub struct Dialog {
    pub questions: Vec<Question>,
    pub widgets: Vec<Widget>,
    /// The tab in view: a question's index, or `questions.len()` for the review tab.
    pub tab: usize,
}

impl Dialog {
    pub fn new(questions: Vec<Question>) -> Dialog {
        let widgets = questions
            .iter()
            .map(|q| match &q.kind {
                Kind::Text => Widget::Text(LineInput::default()),
                Kind::Choice { options, .. } => Widget::Choice {
                    cursor: 0,
                    picked: None,
                    checked: vec![false; options.len()],
                    other: LineInput::default(),
                },
            })
            .collect();
        Dialog {
            questions,
            widgets,
            tab: 0,
        }
    }

    pub fn from_json(questions: &Value) -> Dialog {
        let qs = questions
            .as_array()
            .map(|a| a.iter().map(Question::from_json).collect())
            .unwrap_or_default();
        Dialog::new(qs)
    }

    /// Whether there is a review tab (more than one question).
    pub fn has_review(&self) -> bool {
        self.questions.len() > 1
    }

    pub fn on_review(&self) -> bool {
        self.has_review() && self.tab == self.questions.len()
    }

    /// The answer question `i` has now, as it would be sent.
    pub fn answer(&self, i: usize) -> Option<String> {
        let q = &self.questions[i];
        match &self.widgets[i] {
            Widget::Text(input) => encode::text(input.text()),
            Widget::Choice {
                picked,
                checked,
                other,
                ..
            } => {
                if q.is_multi() {
                    encode::multi(&q.labels(), checked, other.text())
                } else {
                    encode::single(&q.labels(), *picked, other.text())
                }
            }
        }
    }

    /// The `answers` object as it would be sent now.
    pub fn answers(&self) -> BTreeMap<usize, String> {
        encode::answers((0..self.questions.len()).map(|i| self.answer(i)))
    }

    /// The row under the cursor of the question in view, if it is a choice.
    pub fn current_row(&self) -> Option<Row> {
        let q = self.questions.get(self.tab)?;
        match &self.widgets[self.tab] {
            Widget::Choice { cursor, .. } => q.rows().get(*cursor).copied(),
            Widget::Text(_) => None,
        }
    }

    /// For a choice in view: whether the cursor is on its first row, and on its last. `None`
    /// for a text question, the review, or nothing to answer.
    pub fn cursor_edges(&self) -> Option<(bool, bool)> {
        let q = self.questions.get(self.tab)?;
        match &self.widgets[self.tab] {
            Widget::Choice { cursor, .. } => {
                let n = q.rows().len();
                Some((*cursor == 0, *cursor + 1 >= n))
            }
            Widget::Text(_) => None,
        }
    }

    /// Whether keys go to a text field (a text question, or the Other row).
    pub fn is_editing(&self) -> bool {
        match self.widgets.get(self.tab) {
            Some(Widget::Text(_)) => true,
            Some(Widget::Choice { .. }) => self.current_row() == Some(Row::Other),
            None => false,
        }
    }

    pub fn handle_paste(&mut self, text: &str) {
        let Some(q) = self.questions.get(self.tab) else {
            return;
        };
        let multi = q.is_multi();
        let other_row = q.rows().iter().position(|r| *r == Row::Other);
        match &mut self.widgets[self.tab] {
            Widget::Text(input) => input.insert_str(text),
            Widget::Choice {
                cursor,
                picked,
                other,
                ..
            } => {
                if let Some(row) = other_row {
                    *cursor = row;
                }
                other.insert_str(text);
                sync_other_pick(multi, picked, other);
            }
        }
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Outcome {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if key.code == KeyCode::Esc {
            return Outcome::Dismiss;
        }
        if ctrl && key.code == KeyCode::Char('c') {
            // As the reference: Ctrl+C first clears a field being typed in, then dismisses.
            if let Some(input) = self.editing_input() {
                if !input.is_empty() {
                    input.clear();
                    return Outcome::Continue;
                }
            }
            return Outcome::Dismiss;
        }
        match key.code {
            KeyCode::Tab => return self.switch_tab(1),
            KeyCode::BackTab => return self.switch_tab(-1),
            _ => {}
        }
        if self.on_review() {
            return self.review_key(key);
        }
        if self.tab >= self.questions.len() {
            // Nothing to answer (the daemon never sends an empty set; Esc still dismisses).
            return Outcome::Continue;
        }
        let editing = self.is_editing();
        if !editing {
            match key.code {
                KeyCode::Right => return self.switch_tab(1),
                KeyCode::Left => return self.switch_tab(-1),
                _ => {}
            }
        }
        let i = self.tab;
        let q = &self.questions[i];
        if let Kind::Text = q.kind {
            return match key.code {
                KeyCode::Enter => self.answered(),
                _ => {
                    if let Widget::Text(input) = &mut self.widgets[i] {
                        input.handle_key(&key);
                    }
                    Outcome::Continue
                }
            };
        }
        let rows = q.rows();
        let multi = q.is_multi();
        let numbered = rows.iter().filter(|r| **r != Row::Done).count();
        let Widget::Choice {
            cursor,
            picked,
            other,
            ..
        } = &mut self.widgets[i]
        else {
            unreachable!("choice questions have choice widgets")
        };
        let up = matches!(key.code, KeyCode::Up) || (ctrl && key.code == KeyCode::Char('p'));
        let down = matches!(key.code, KeyCode::Down) || (ctrl && key.code == KeyCode::Char('n'));
        if up || (!editing && key.code == KeyCode::Char('k') && !ctrl) {
            *cursor = (*cursor + rows.len() - 1) % rows.len();
            return Outcome::Continue;
        }
        if down || (!editing && key.code == KeyCode::Char('j') && !ctrl) {
            *cursor = (*cursor + 1) % rows.len();
            return Outcome::Continue;
        }
        if editing {
            if key.code == KeyCode::Enter {
                return self.activate(Row::Other);
            }
            other.handle_key(&key);
            sync_other_pick(multi, picked, other);
            return Outcome::Continue;
        }
        match key.code {
            KeyCode::Enter | KeyCode::Char(' ') => {
                let row = rows[*cursor];
                self.activate(row)
            }
            KeyCode::Char(d @ '1'..='9') if !ctrl => {
                let n = d as usize - '0' as usize;
                if n > numbered {
                    return Outcome::Continue;
                }
                *cursor = n - 1;
                let row = rows[n - 1];
                if row == Row::Other && (multi || encode::text(other.text()).is_none()) {
                    // A number moves to the free-text row; it answers with it only in a
                    // single choice whose Other text is already typed, as the reference does.
                    return Outcome::Continue;
                }
                self.activate(row)
            }
            KeyCode::Char(c)
                if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) && !c.is_control() =>
            {
                // Typing anywhere in the list starts an Other answer, as in the reference.
                if let Some(row) = rows.iter().position(|r| *r == Row::Other) {
                    *cursor = row;
                }
                other.handle_key(&key);
                sync_other_pick(multi, picked, other);
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    fn review_key(&mut self, key: KeyEvent) -> Outcome {
        match key.code {
            KeyCode::Enter => Outcome::Submit(self.answers()),
            KeyCode::Left => self.switch_tab(-1),
            KeyCode::Right => self.switch_tab(1),
            KeyCode::Char(d @ '1'..='9') => {
                let n = d as usize - '0' as usize;
                if n <= self.questions.len() {
                    self.tab = n - 1;
                }
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    /// Enter (or a number) on a row.
    fn activate(&mut self, row: Row) -> Outcome {
        let i = self.tab;
        let multi = self.questions[i].is_multi();
        let Widget::Choice {
            picked,
            checked,
            other,
            ..
        } = &mut self.widgets[i]
        else {
            return Outcome::Continue;
        };
        match (multi, row) {
            (false, Row::Option(o)) => {
                *picked = Some(Pick::Option(o));
                self.answered()
            }
            (false, Row::Other) => {
                if encode::text(other.text()).is_some() {
                    *picked = Some(Pick::Other);
                    self.answered()
                } else {
                    Outcome::Continue
                }
            }
            (true, Row::Option(o)) => {
                checked[o] = !checked[o];
                Outcome::Continue
            }
            (true, Row::All) => {
                let all = checked.iter().all(|c| *c);
                checked.iter_mut().for_each(|c| *c = !all);
                Outcome::Continue
            }
            // Enter in the Other field finishes the selection, if it selects anything.
            (true, Row::Other) => {
                if self.answer(i).is_some() {
                    self.answered()
                } else {
                    Outcome::Continue
                }
            }
            (true, Row::Done) => self.answered(),
            (false, Row::All | Row::Done) => Outcome::Continue,
        }
    }

    /// The question in view has its answer: submit a lone question, else go to the next tab.
    fn answered(&mut self) -> Outcome {
        if self.has_review() {
            self.tab += 1;
            Outcome::Continue
        } else {
            Outcome::Submit(self.answers())
        }
    }

    fn switch_tab(&mut self, step: isize) -> Outcome {
        if self.has_review() {
            let last = self.questions.len() as isize;
            self.tab = (self.tab as isize + step).clamp(0, last) as usize;
        }
        Outcome::Continue
    }

    fn editing_input(&mut self) -> Option<&mut LineInput> {
        if !self.is_editing() {
            return None;
        }
        match self.widgets.get_mut(self.tab)? {
            Widget::Text(input) => Some(input),
            Widget::Choice { other, .. } => Some(other),
        }
    }
}

/// In a single choice, typed Other text becomes the pick (the reference's
/// SET_CUSTOM_SELECTED); a multiSelect includes non-blank Other text on its own.
fn sync_other_pick(multi: bool, picked: &mut Option<Pick>, other: &LineInput) {
    if !multi && encode::text(other.text()).is_some() {
        *picked = Some(Pick::Other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
