//! What a tap or a typed reply does to a card: pick, toggle, step to the next question,
//! submit, allow, deny with or without a reason; anything the card does not offer now is
//! refused.

use super::*;

impl Card {
    /// A tap on this card by `user`. Only [`Action`]s the card offers now do anything.
    pub fn tap(&mut self, action: Action, user: &User) -> Step {
        if !self.is_open() {
            return Step::Refuse("This request is being answered.");
        }
        let step = match &mut self.body {
            Body::Questions(q) => question_tap(q, action),
            Body::Approval(a) => approval_tap(a, action),
        };
        self.after(step, user)
    }

    /// A typed reply (to this card's message or its prompt) by `user`.
    pub fn reply(&mut self, text: &str, user: &User) -> Step {
        if !self.wants_reply() {
            return Step::Refuse("This request does not take a typed answer now.");
        }
        let text: String = text.chars().take(MAX_REPLY).collect();
        let step = match &mut self.body {
            Body::Questions(q) => {
                let cur = &q.qs[q.step];
                let answer = match &cur.kind {
                    QKind::Text => encode::text(&text),
                    QKind::Choice { multi: true, .. } => {
                        let labels = cur.labels_owned();
                        let l: Vec<&str> = labels.iter().map(String::as_str).collect();
                        encode::multi(&l, &q.checked[q.step], &text)
                    }
                    QKind::Choice { .. } => encode::single(&[], Some(encode::Pick::Other), &text),
                };
                if answer.is_none() {
                    return Step::Refuse("An empty reply is no answer.");
                }
                q.writing = false;
                advance(q, answer)
            }
            Body::Approval(a) => {
                let reason = askbus::questions::js_trim(&text).to_owned();
                a.denying = false;
                Step::Decide(Decision::deny((!reason.is_empty()).then_some(reason)))
            }
        };
        self.after(step, user)
    }

    pub(super) fn after(&mut self, step: Step, user: &User) -> Step {
        match &step {
            Step::Redraw | Step::Prompt(_) => self.version = self.version.wrapping_add(1),
            Step::Answer(answers) => {
                self.version = self.version.wrapping_add(1);
                self.phase = Phase::Sending {
                    by: user.label(),
                    what: answers_text(answers),
                };
            }
            Step::Decide(d) => {
                self.version = self.version.wrapping_add(1);
                self.phase = Phase::Sending {
                    by: user.label(),
                    what: decision_text(d),
                };
            }
            Step::Always(o, any_project) => {
                self.version = self.version.wrapping_add(1);
                self.phase = Phase::Sending {
                    by: user.label(),
                    what: always_text(o, *any_project),
                };
            }
            Step::Refuse(_) => {}
        }
        step
    }
}

pub(super) fn question_tap(q: &mut Questions, action: Action) -> Step {
    let Some(cur) = q.qs.get(q.step) else {
        return match action {
            Action::Submit => Step::Answer(encode::answers(q.answers.iter().cloned())),
            Action::Restart => {
                q.step = 0;
                q.answers.iter_mut().for_each(|a| *a = None);
                q.checked.iter_mut().flatten().for_each(|c| *c = false);
                Step::Redraw
            }
            _ => Step::Refuse("That button is not on this message any more."),
        };
    };
    let labels = cur.labels_owned();
    let n = labels.len();
    match (&cur.kind, action) {
        (QKind::Choice { multi: false, .. }, Action::Pick(i)) if usize::from(i) < n => {
            let answer = Some(labels[usize::from(i)].clone());
            advance(q, answer)
        }
        (QKind::Choice { multi: true, .. }, Action::Toggle(i)) if usize::from(i) < n => {
            let c = &mut q.checked[q.step][usize::from(i)];
            *c = !*c;
            Step::Redraw
        }
        (QKind::Choice { multi: true, .. }, Action::All) => {
            q.checked[q.step].iter_mut().for_each(|c| *c = true);
            Step::Redraw
        }
        (QKind::Choice { multi: true, .. }, Action::Done) => {
            let l: Vec<&str> = labels.iter().map(String::as_str).collect();
            match encode::multi(&l, &q.checked[q.step], "") {
                Some(a) => advance(q, Some(a)),
                None => Step::Refuse("Check at least one option first."),
            }
        }
        (QKind::Text, Action::Write) | (QKind::Choice { yesno: false, .. }, Action::Write) => {
            q.writing = true;
            Step::Prompt(format!(
                "Reply with your answer to: {}",
                clean(&cur.text, MAX_TEXT)
            ))
        }
        _ => Step::Refuse("That button is not on this message any more."),
    }
}

/// The current question is answered: the next one, or (a single question) the answer itself.
pub(super) fn advance(q: &mut Questions, answer: Option<String>) -> Step {
    q.answers[q.step] = answer;
    q.step += 1;
    if q.qs.len() == 1 {
        return Step::Answer(encode::answers(q.answers.iter().cloned()));
    }
    Step::Redraw
}

pub(super) fn approval_tap(a: &mut Approval, action: Action) -> Step {
    match action {
        Action::Allow(i) if !a.denying => match ToolOutcome::ALL.get(usize::from(i)) {
            Some(o) if a.allow.contains(o) && always::is_always(*o) => {
                match a.always.iter().find(|x| x.chosen == *o) {
                    // The rule the message showed is the one written.
                    Some(offer) => Step::Always(offer.clone(), false),
                    // The agent's own "always" with no rule askbus can say: it alone.
                    None => Step::Decide(Decision::allow(*o)),
                }
            }
            Some(o) if a.allow.contains(o) => Step::Decide(Decision::allow(*o)),
            _ => Step::Refuse("That button is not on this message any more."),
        },
        // Only an offer the message showed widened (its rule names a project).
        Action::AllowEverywhere(i) if !a.denying => match ToolOutcome::ALL.get(usize::from(i)) {
            Some(o) if a.allow.contains(o) => match a.always.iter().find(|x| x.chosen == *o) {
                Some(offer) if offer.widens() => Step::Always(offer.clone(), true),
                _ => Step::Refuse("That button is not on this message any more."),
            },
            _ => Step::Refuse("That button is not on this message any more."),
        },
        Action::Deny if !a.denying => {
            a.denying = true;
            Step::Prompt(String::new())
        }
        Action::DenyNow if a.denying => Step::Decide(Decision::deny(None)),
        Action::Back if a.denying => {
            a.denying = false;
            Step::Redraw
        }
        _ => Step::Refuse("That button is not on this message any more."),
    }
}
