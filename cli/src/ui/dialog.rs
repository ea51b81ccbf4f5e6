//! One request's dialog: its questions, the state of each question's widget, the tab in view,
//! and what each key does, following Gemini CLI's AskUserDialog. No drawing and no I/O here;
//! the answer strings come from [`super::encode`].

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;

use super::encode::{self, Pick};
use super::input::LineInput;
pub use super::question::{Kind, Question, Row};

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
mod tests;
