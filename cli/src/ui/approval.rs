//! One approval's decision (a `tool-confirmation-request`): the buttons it offers, the cursor,
//! the reason typed for the agent, and what each key does. The buttons are the request's own
//! `outcomes` (a UI never offers one the agent cannot act on), the approving ones first in the
//! protocol's order, then Deny; `modify_with_editor` needs an editor session this dialog does not
//! run, so it is not offered here. An "always" button carries the rule askbus writes for it
//! (`crate::always`), shown under the button before the tap (its number moves there first,
//! a second press writes it); Ctrl+W widens it from the request's project to every project.
//! No drawing and no I/O.

use askbus::protocol::{ToolOutcome, UiApproval};
use askbus_policy::tiers::AlwaysRule;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::always::Offer;

use super::input::LineInput;

/// What the caller should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// Send this decision; `message` is the reason typed for the agent (Deny only); `rule`
    /// is askbus's "always" rule, written before the decision is sent.
    Decide {
        outcome: ToolOutcome,
        message: Option<String>,
        rule: Option<AlwaysRule>,
    },
    /// Closed without deciding (`dismissed: true`): never an approval.
    Dismiss,
}

#[derive(Debug, Clone)]
pub struct Decision {
    /// The outcomes offered, in screen order; Deny (`cancel`) is always last.
    pub buttons: Vec<ToolOutcome>,
    pub cursor: usize,
    /// The reason for the agent, typed on the Deny row.
    pub reason: LineInput,
    /// The "always" buttons' offers (the outcome each chooses, what it sends, its rule).
    pub offers: Vec<Offer>,
    /// Whether the "always" rules are widened to every project (Ctrl+W).
    pub any_project: bool,
}

/// The hint on the Deny row while no reason is typed.
pub const REASON_HINT: &str = "type a reason for the agent (optional)";

impl Decision {
    /// The buttons for `a`, with askbus's "always" rules.
    pub fn for_approval(a: &UiApproval) -> Decision {
        Decision::new(&a.outcomes, crate::always::offers(a))
    }

    /// The buttons for `outcomes` and the "always" `offers` (askbus's own "always" among
    /// them where the agent offers none).
    pub fn new(outcomes: &[ToolOutcome], offers: Vec<Offer>) -> Decision {
        let mut buttons: Vec<ToolOutcome> = ToolOutcome::ALL
            .into_iter()
            .filter(|o| {
                o.confirms()
                    && *o != ToolOutcome::ModifyWithEditor
                    && (outcomes.contains(o) || offers.iter().any(|f| f.chosen == *o))
            })
            .collect();
        // Every approval offers these two, whatever the frame listed (the daemon adds them).
        if !buttons.contains(&ToolOutcome::ProceedOnce) {
            buttons.insert(0, ToolOutcome::ProceedOnce);
        }
        buttons.push(ToolOutcome::Cancel);
        Decision {
            buttons,
            cursor: 0,
            reason: LineInput::default(),
            offers,
            any_project: false,
        }
    }

    /// The "always" offer behind button `row`, if it is one.
    pub fn offer(&self, row: usize) -> Option<&Offer> {
        let o = self.buttons.get(row)?;
        self.offers.iter().find(|f| f.chosen == *o)
    }

    /// Whether Ctrl+W can widen a rule here (some "always" rule is scoped to a project).
    pub fn widens(&self) -> bool {
        self.offers.iter().any(Offer::widens)
    }

    fn deny_row(&self) -> usize {
        self.buttons.len() - 1
    }

    /// Whether keys go to the reason field (the cursor is on Deny).
    pub fn is_editing(&self) -> bool {
        self.cursor == self.deny_row()
    }

    /// The trimmed reason, `None` when blank.
    pub fn message(&self) -> Option<String> {
        let t = askbus::questions::js_trim(self.reason.text());
        (!t.is_empty()).then(|| t.to_owned())
    }

    fn decide(&self, row: usize) -> Outcome {
        let outcome = self.buttons[row];
        let offer = self.offer(row);
        Outcome::Decide {
            outcome: offer.map_or(outcome, |f| f.sent),
            message: if outcome == ToolOutcome::Cancel {
                self.message()
            } else {
                None
            },
            rule: offer.and_then(|f| f.rule(self.any_project)).cloned(),
        }
    }

    pub fn handle_paste(&mut self, text: &str) {
        self.cursor = self.deny_row();
        self.reason.insert_str(text);
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Outcome {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let editing = self.is_editing();
        let n = self.buttons.len();
        match key.code {
            KeyCode::Esc => return Outcome::Dismiss,
            KeyCode::Char('c') if ctrl => {
                // As in a question's dialog: Ctrl+C first clears what is typed, then dismisses.
                if editing && !self.reason.is_empty() {
                    self.reason.clear();
                    return Outcome::Continue;
                }
                return Outcome::Dismiss;
            }
            KeyCode::Up | KeyCode::BackTab => {
                self.cursor = (self.cursor + n - 1) % n;
                return Outcome::Continue;
            }
            KeyCode::Down | KeyCode::Tab => {
                self.cursor = (self.cursor + 1) % n;
                return Outcome::Continue;
            }
            KeyCode::Char('p') if ctrl => {
                self.cursor = (self.cursor + n - 1) % n;
                return Outcome::Continue;
            }
            KeyCode::Char('n') if ctrl => {
                self.cursor = (self.cursor + 1) % n;
                return Outcome::Continue;
            }
            KeyCode::Enter => return self.decide(self.cursor),
            // Widen (or narrow again) what "always" allows: every project, or the request's.
            KeyCode::Char('w') if ctrl && !editing && self.widens() => {
                self.any_project = !self.any_project;
                return Outcome::Continue;
            }
            _ => {}
        }
        if editing {
            self.reason.handle_key(&key);
            return Outcome::Continue;
        }
        match key.code {
            KeyCode::Char('k') if !ctrl && !alt => {
                self.cursor = (self.cursor + n - 1) % n;
                Outcome::Continue
            }
            KeyCode::Char('j') if !ctrl && !alt => {
                self.cursor = (self.cursor + 1) % n;
                Outcome::Continue
            }
            KeyCode::Char(' ') => self.decide(self.cursor),
            KeyCode::Char(d @ '1'..='9') if !ctrl && !alt => {
                let i = d as usize - '1' as usize;
                if i < n {
                    // An "always" that writes a rule: the first press moves to it, where its
                    // rule is shown whole; the same number (or Enter) then writes it.
                    let writes = self
                        .offer(i)
                        .is_some_and(|o| o.rule(self.any_project).is_some());
                    if writes && self.cursor != i {
                        self.cursor = i;
                        return Outcome::Continue;
                    }
                    self.cursor = i;
                    return self.decide(i);
                }
                Outcome::Continue
            }
            KeyCode::Char(c) if !ctrl && !alt && !c.is_control() => {
                // Typing anywhere starts a reason: the person is explaining a refusal.
                self.cursor = self.deny_row();
                self.reason.handle_key(&key);
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ToolOutcome::*;

    fn press(d: &mut Decision, keys: &str) -> Outcome {
        let mut last = Outcome::Continue;
        for c in keys.chars() {
            let code = match c {
                '\n' => KeyCode::Enter,
                '↓' => KeyCode::Down,
                '↑' => KeyCode::Up,
                '⎋' => KeyCode::Esc,
                c => KeyCode::Char(c),
            };
            last = d.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
        }
        last
    }

    fn decide(outcome: ToolOutcome, message: Option<&str>) -> Outcome {
        Outcome::Decide {
            outcome,
            message: message.map(str::to_owned),
            rule: None,
        }
    }

    #[test]
    fn buttons_are_the_requests_outcomes_allow_first_deny_last() {
        assert_eq!(
            Decision::new(&[ProceedOnce, Cancel], vec![]).buttons,
            [ProceedOnce, Cancel]
        );
        assert_eq!(
            Decision::new(
                &[ProceedOnce, ProceedAlways, ProceedAlwaysTool, Cancel],
                vec![]
            )
            .buttons,
            [ProceedOnce, ProceedAlways, ProceedAlwaysTool, Cancel]
        );
        // Whatever order they came in; the editor outcome is not offered here.
        assert_eq!(
            Decision::new(&[Cancel, ModifyWithEditor, ProceedAlways], vec![]).buttons,
            [ProceedOnce, ProceedAlways, Cancel]
        );
    }

    #[test]
    fn enter_numbers_and_space_decide() {
        let o = [ProceedOnce, ProceedAlways, Cancel];
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "\n"),
            decide(ProceedOnce, None)
        );
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "2"),
            decide(ProceedAlways, None)
        );
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "j "),
            decide(ProceedAlways, None)
        );
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "3"),
            decide(Cancel, None)
        );
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "↑\n"),
            decide(Cancel, None)
        );
        assert_eq!(
            press(&mut Decision::new(&o, vec![]), "4"),
            Outcome::Continue
        );
        assert_eq!(press(&mut Decision::new(&o, vec![]), "⎋"), Outcome::Dismiss);
    }

    #[test]
    fn an_always_that_writes_a_rule_takes_its_number_twice() {
        let a: askbus::protocol::UiApproval = serde_json::from_value(serde_json::json!({
            "correlationId": "a1", "timeoutMs": 1000, "outcomes": ["proceed_once", "cancel"],
            "toolCall": {"name": "run_shell_command", "args": {"command": "npm test"}},
            "producer": {"uid": askbus::trust::effective_uid(), "pid": 1}}))
        .unwrap();
        let mut d = Decision::for_approval(&a);
        assert_eq!(d.buttons, [ProceedOnce, ProceedAlways, Cancel]);
        // The first press moves there (the rule is then shown whole), the second writes it.
        assert_eq!(press(&mut d, "2"), Outcome::Continue);
        assert_eq!(d.cursor, 1);
        match press(&mut d, "2") {
            Outcome::Decide { outcome, rule, .. } => {
                assert_eq!(outcome, ProceedOnce, "askbus's own always sends Allow once");
                assert!(rule.unwrap().toml.contains("commandPrefix = \"npm\""));
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn typing_is_a_reason_sent_with_deny_only() {
        let o = [ProceedOnce, Cancel];
        let mut d = Decision::new(&o, vec![]);
        assert_eq!(press(&mut d, "not the build dir"), Outcome::Continue);
        assert!(d.is_editing());
        // j, k, digits and space are text in the field.
        assert_eq!(
            press(&mut d, " 1 jk \n"),
            decide(Cancel, Some("not the build dir 1 jk"))
        );
        // Moving to Allow and pressing Enter allows, without the reason.
        let mut d = Decision::new(&o, vec![]);
        press(&mut d, "why↑");
        assert_eq!(press(&mut d, "\n"), decide(ProceedOnce, None));
        // A blank reason is no message.
        let mut d = Decision::new(&o, vec![]);
        assert_eq!(press(&mut d, "↓   \n"), decide(Cancel, None));
    }

    #[test]
    fn ctrl_c_clears_the_reason_then_dismisses() {
        let mut d = Decision::new(&[ProceedOnce, Cancel], vec![]);
        press(&mut d, "abc");
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(d.handle_key(ctrl_c), Outcome::Continue);
        assert_eq!(d.message(), None);
        assert_eq!(d.handle_key(ctrl_c), Outcome::Dismiss);
    }

    #[test]
    fn paste_goes_to_the_reason() {
        let mut d = Decision::new(&[ProceedOnce, Cancel], vec![]);
        d.handle_paste("use cargo clean");
        assert!(d.is_editing());
        assert_eq!(press(&mut d, "\n"), decide(Cancel, Some("use cargo clean")));
    }
}
