//! One request as a chat message: what it shows (agent, project, title, node, a countdown in
//! words, the question or the approval's command/diff/MCP call), which buttons it offers for
//! its kind, and what a tap or a typed reply does to it (pick, toggle, step, submit, allow,
//! deny with or without a reason). Platform-neutral and free of I/O: a platform renders the
//! [`View`] with its own markup, the engine seals the [`Action`]s into callback data and sends
//! the answers a [`Step`] asks for through the bus.
//!
//! This module owns the card (its kinds, phases and what it offers); `view` renders it into a
//! [`View`], `step` applies a tap or a reply to it.

mod step;
#[cfg(test)]
mod tests;
mod view;

use std::collections::BTreeMap;
use std::time::Duration;

use askbus::protocol::{Decision, RequestContext, ToolOutcome, UiApproval, UiRequest};
use serde_json::Value;

use super::text::clean;
use crate::always::{self, Offer};
use crate::ui::encode;
use crate::ui::question::{Kind as QKind, Question};
use view::cut_code;

/// Longest title line (characters).
const MAX_TITLE: usize = 200;
/// Longest question text or prompt shown.
const MAX_TEXT: usize = 1500;
/// Longest button label.
const MAX_LABEL: usize = 48;
/// A code block (command, diff, MCP call) is cut at this many characters...
const MAX_CODE: usize = 1500;
/// ...or this many lines, whichever comes first.
const MAX_CODE_LINES: usize = 40;
/// Longest answer echoed in the outcome.
const MAX_ECHO: usize = 300;
/// Longest deny reason or text answer taken from a reply (the protocol's approval message
/// limit; a text answer has none of its own, and a chat message is at most 4096 anyway).
const MAX_REPLY: usize = askbus::protocol::MAX_APPROVAL_MESSAGE_CHARS;

/// What a button does. Encoded as an action byte and an argument byte in callback data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Pick option N of the current question (single choice, yesno).
    Pick(u8),
    /// Toggle option N of the current multiSelect.
    Toggle(u8),
    /// Check every option of the current multiSelect.
    All,
    /// Finish the current multiSelect.
    Done,
    /// Type the current question's answer (text, or a choice's Other).
    Write,
    /// Send the answers of a multi-question request.
    Submit,
    /// Start a multi-question request over.
    Restart,
    /// An approving outcome (its index in [`ToolOutcome::ALL`]).
    Allow(u8),
    /// An "always" outcome (its index) whose rule is widened to every project.
    AllowEverywhere(u8),
    /// Deny: ask for a reason.
    Deny,
    /// Deny without a reason.
    DenyNow,
    /// Back from the reason prompt to the approval's buttons.
    Back,
}

impl Action {
    pub fn encode(self) -> (u8, u8) {
        match self {
            Action::Pick(i) => (b'p', i),
            Action::Toggle(i) => (b't', i),
            Action::All => (b'a', 0),
            Action::Done => (b'd', 0),
            Action::Write => (b'w', 0),
            Action::Submit => (b's', 0),
            Action::Restart => (b'r', 0),
            Action::Allow(i) => (b'o', i),
            Action::AllowEverywhere(i) => (b'O', i),
            Action::Deny => (b'n', 0),
            Action::DenyNow => (b'N', 0),
            Action::Back => (b'b', 0),
        }
    }

    pub fn decode(action: u8, arg: u8) -> Option<Action> {
        Some(match action {
            b'p' => Action::Pick(arg),
            b't' => Action::Toggle(arg),
            b'a' => Action::All,
            b'd' => Action::Done,
            b'w' => Action::Write,
            b's' => Action::Submit,
            b'r' => Action::Restart,
            b'o' => Action::Allow(arg),
            b'O' => Action::AllowEverywhere(arg),
            b'n' => Action::Deny,
            b'N' => Action::DenyNow,
            b'b' => Action::Back,
            _ => return None,
        })
    }
}

/// A piece of a message. Every string is already neutralised ([`clean`]); the platform
/// escapes its markup and defuses mentions when it renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// Bold: what is asked.
    Title(String),
    /// Who asks, where, how long is left.
    Meta(String),
    Text(String),
    /// Preformatted: a command, a diff, an MCP call.
    Code(String),
    /// Small print: "… 12 more lines", the outcome.
    Note(String),
}

/// A button: a tap (sealed into callback data by the engine) or a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Button<A> {
    Tap { label: String, action: A },
    Link { label: String, url: String },
}

/// A message as the platform is to show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View<A> {
    pub blocks: Vec<Block>,
    pub rows: Vec<Vec<Button<A>>>,
}

impl<A> View<A> {
    /// The same message with different buttons (sealed ones, for the platform).
    pub fn map<B>(self, mut f: impl FnMut(A) -> B) -> View<B> {
        View {
            blocks: self.blocks,
            rows: self
                .rows
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|b| match b {
                            Button::Tap { label, action } => Button::Tap {
                                label,
                                action: f(action),
                            },
                            Button::Link { label, url } => Button::Link { label, url },
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// What a tap or a reply asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The card changed: edit the message.
    Redraw,
    /// Ask for a typed reply (Telegram force-reply, a modal elsewhere) with this prompt; the
    /// card changed too.
    Prompt(String),
    /// Send these answers (the card now shows "sending").
    Answer(BTreeMap<usize, String>),
    /// Send this decision.
    Decide(Decision),
    /// "Allow always": write the offer's rule (the one the message showed: in the request's
    /// project, or in every project when the bool is true), then send `offer.sent`
    /// (`crate::always`, the path every UI's "always" takes).
    Always(Offer, bool),
    /// Nothing changes; tell the person this (an ephemeral notice).
    Refuse(&'static str),
}

/// A chat user as the platform names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub name: String,
}

impl User {
    /// "Alice (123456)": recorded with the decision and shown in the outcome.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            self.id.clone()
        } else {
            format!("{} ({})", self.name, self.id)
        }
    }
}

/// Who asks and where: the first lines of every message.
#[derive(Debug, Clone)]
pub struct Meta {
    pub agent: String,
    pub project: Option<String>,
    pub node: Option<String>,
    pub title: String,
    /// Milliseconds the request had left when it arrived, and when that was.
    pub timeout_ms: u64,
    pub arrived: tokio::time::Instant,
}

impl Meta {
    fn new(
        context: Option<&RequestContext>,
        client: Option<&str>,
        node: Option<&str>,
        title: String,
        timeout_ms: u64,
    ) -> Meta {
        Meta {
            agent: context
                .and_then(|c| c.agent.as_deref())
                .or(client)
                .unwrap_or("an agent")
                .to_owned(),
            project: context.and_then(|c| c.project.clone()),
            node: node.map(str::to_owned),
            title,
            timeout_ms,
            arrived: tokio::time::Instant::now(),
        }
    }

    /// "claude-code · project web · node laptop · 9 min left".
    fn line(&self) -> String {
        let mut parts = vec![clean(&self.agent, 80)];
        if let Some(p) = &self.project {
            parts.push(format!("project {}", clean(p, 80)));
        }
        if let Some(n) = &self.node {
            parts.push(format!("node {}", clean(n, 80)));
        }
        parts.push(left_in_words(self.shown_left()));
        parts.join(" · ")
    }

    fn deadline(&self) -> tokio::time::Instant {
        self.arrived + Duration::from_millis(self.timeout_ms)
    }

    /// The time left as the message words it now (see [`shown_left`]).
    pub fn shown_left(&self) -> Duration {
        let now = tokio::time::Instant::now();
        shown_left(self.deadline().saturating_duration_since(now))
    }

    /// When the words of the time left change next (then the message is edited); `None` once
    /// it says "less than a minute left" (the request's end edits it next).
    pub fn next_change(&self) -> Option<tokio::time::Instant> {
        let shown = self.shown_left();
        // The instant the time left drops below what is shown, by a millisecond.
        (!shown.is_zero()).then(|| self.deadline() - shown + Duration::from_millis(1))
    }
}

/// The time left rounded down to the countdown's step: a minute under 10 min, 5 min under an
/// hour, half an hour under a day, a day beyond. So a message is edited at most once a minute
/// near its end and rarely before (rate limits), and never says more time than is left.
pub fn shown_left(d: Duration) -> Duration {
    let s = d.as_secs();
    let step = match s {
        0..=599 => 60,
        600..=3599 => 300,
        3600..=86_399 => 1800,
        _ => 86_400,
    };
    Duration::from_secs(s / step * step)
}

/// "less than a minute left", "9 min left", "1 h 20 min left", "3 days left".
pub fn left_in_words(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => "less than a minute left".to_owned(),
        60..=3599 => format!("{} min left", s / 60),
        3600..=86_399 => match (s % 3600) / 60 {
            0 => format!("{} h left", s / 3600),
            m => format!("{} h {m} min left", s / 3600),
        },
        _ => format!("{} days left", s / 86_400),
    }
}

/// The state of a multi-step question request.
#[derive(Debug, Clone)]
struct Questions {
    qs: Vec<Question>,
    step: usize,
    answers: Vec<Option<String>>,
    checked: Vec<Vec<bool>>,
    /// Waiting for a typed reply to the current question.
    writing: bool,
}

#[derive(Debug, Clone)]
struct Approval {
    /// What the code block shows, and the lines cut from it.
    code: Option<String>,
    cut: usize,
    text: Option<String>,
    /// The approving outcomes offered (never `modify_with_editor`: it needs an editor).
    allow: Vec<ToolOutcome>,
    /// The "always" buttons among them and the rule each writes (scoped to the request's
    /// project), shown before the tap.
    always: Vec<Offer>,
    denying: bool,
}

#[derive(Debug, Clone)]
enum Body {
    Questions(Questions),
    Approval(Approval),
}

/// Where the card is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Open,
    /// An answer was sent on behalf of this user; waiting for the daemon's verdict.
    Sending {
        by: String,
        what: String,
    },
    /// Over: the outcome line.
    Over(String),
}

/// One request's card.
#[derive(Debug, Clone)]
pub struct Card {
    pub meta: Meta,
    body: Body,
    phase: Phase,
    /// Bumped on every change of the buttons: a tap must name the version it was shown, so an
    /// old or replayed tap is refused.
    pub version: u16,
    /// A link to the request in `askbus web`, when it is reachable.
    pub open_url: Option<String>,
}

impl Card {
    pub fn from_question(r: &UiRequest) -> Card {
        let qs: Vec<Question> = r
            .questions
            .as_array()
            .map(|a| a.iter().map(Question::from_json).collect())
            .unwrap_or_default();
        let title = qs.first().map(|q| q.header.clone()).unwrap_or_default();
        let n = qs.len();
        let checked = qs
            .iter()
            .map(|q| match &q.kind {
                QKind::Choice { options, .. } => vec![false; options.len()],
                QKind::Text => Vec::new(),
            })
            .collect();
        Card {
            meta: Meta::new(
                r.context.as_deref(),
                r.producer.client.as_deref(),
                r.node.as_deref(),
                title,
                r.timeout_ms,
            ),
            body: Body::Questions(Questions {
                qs,
                step: 0,
                answers: vec![None; n],
                checked,
                writing: false,
            }),
            phase: Phase::Open,
            version: 0,
            open_url: None,
        }
    }

    pub fn from_approval(a: &UiApproval) -> Card {
        let details = a.details.as_ref();
        let field = |k: &str| details.and_then(|d| d.get(k)).and_then(Value::as_str);
        let tool = a
            .tool_call
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("a tool");
        let title = field("title").map_or_else(|| format!("Allow {tool}?"), str::to_owned);
        let args = a.tool_call.get("args");
        let pretty = |v: Option<&Value>| {
            v.map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
                .unwrap_or_default()
        };
        let (text, code) = match field("type") {
            Some("exec") | Some("sandbox_expansion") => (None, field("command").map(str::to_owned)),
            Some("edit") => (
                field("filePath")
                    .or(field("fileName"))
                    .map(|f| format!("Edit {f}")),
                field("fileDiff").map(str::to_owned),
            ),
            Some("mcp") => (
                Some(format!(
                    "MCP {}: {}",
                    field("serverName")
                        .or(a.server_name.as_deref())
                        .unwrap_or("?"),
                    field("toolDisplayName")
                        .or(field("toolName"))
                        .unwrap_or(tool)
                )),
                Some(pretty(args)),
            ),
            Some("info") => (field("prompt").map(str::to_owned), None),
            Some("exit_plan_mode") => (field("planPath").map(|p| format!("Plan: {p}")), None),
            _ => (Some(tool.to_owned()), Some(pretty(args))),
        };
        let (code, cut) = match code.filter(|c| !c.trim().is_empty()) {
            Some(c) => {
                let (c, cut) = cut_code(&c);
                (Some(c), cut)
            }
            None => (None, 0),
        };
        let allow = ToolOutcome::ALL
            .into_iter()
            .filter(|o| {
                o.confirms() && *o != ToolOutcome::ModifyWithEditor && a.outcomes.contains(o)
            })
            .collect::<Vec<_>>();
        let mut allow = allow;
        if !allow.contains(&ToolOutcome::ProceedOnce) {
            allow.insert(0, ToolOutcome::ProceedOnce);
        }
        let always = always::offers(a);
        // askbus's own "Allow always" where the agent offers none (it sends proceed_once).
        for o in &always {
            if !allow.contains(&o.chosen) {
                allow.push(o.chosen);
            }
        }
        Card {
            meta: Meta::new(
                a.context.as_ref(),
                a.producer.client.as_deref(),
                a.node.as_deref(),
                title,
                a.timeout_ms,
            ),
            body: Body::Approval(Approval {
                code,
                cut,
                text,
                allow,
                always,
                denying: false,
            }),
            phase: Phase::Open,
            version: 0,
            open_url: None,
        }
    }

    pub fn is_approval(&self) -> bool {
        matches!(self.body, Body::Approval(_))
    }

    pub fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// When the message's countdown changes next, while the card is open.
    pub fn countdown_at(&self) -> Option<tokio::time::Instant> {
        self.is_open().then(|| self.meta.next_change()).flatten()
    }

    /// Whether the card waits for a typed reply (text answer or deny reason).
    pub fn wants_reply(&self) -> bool {
        self.is_open()
            && match &self.body {
                Body::Questions(q) => {
                    q.writing
                        || q.qs
                            .get(q.step)
                            .is_some_and(|qq| matches!(qq.kind, QKind::Text))
                }
                Body::Approval(a) => a.denying,
            }
    }

    /// "agent (project) · title": a digest's line.
    pub fn summary(&self) -> String {
        let mut t = clean(&self.meta.agent, 60);
        if let Some(p) = &self.meta.project {
            t = format!("{t} ({})", clean(p, 60));
        }
        if !self.meta.title.is_empty() {
            t = format!("{t} · {}", clean(&self.meta.title, 100));
        }
        t
    }

    /// The daemon refused what was sent (other than "already answered"): open again.
    pub fn reopen(&mut self) {
        if let Phase::Sending { .. } = self.phase {
            self.phase = Phase::Open;
            if let Body::Questions(q) = &mut self.body {
                q.step = 0;
                q.answers.iter_mut().for_each(|a| *a = None);
            }
            self.version = self.version.wrapping_add(1);
        }
    }

    /// Over: the message shows `outcome` and no buttons.
    pub fn end(&mut self, outcome: String) {
        self.phase = Phase::Over(outcome);
        self.version = self.version.wrapping_add(1);
    }

    /// What this card sent and who sent it, once the daemon confirmed it.
    pub fn sent(&self) -> Option<(&str, &str)> {
        match &self.phase {
            Phase::Sending { by, what } => Some((by, what)),
            _ => None,
        }
    }

    /// The prompt for a reply to the current state (text question, Other, deny reason).
    pub fn prompt_text(&self) -> String {
        match &self.body {
            Body::Questions(q) => match q.qs.get(q.step) {
                Some(cur) => format!("Reply with your answer to: {}", clean(&cur.text, MAX_TEXT)),
                None => "Reply with your answer.".into(),
            },
            Body::Approval(_) => format!(
                "Why deny \"{}\"? Reply with a reason for the agent.",
                clean(&self.meta.title, MAX_TITLE)
            ),
        }
    }
}

/// "Yes", "1. PostgreSQL; 2. fast" (what the outcome names).
pub fn answers_text(answers: &BTreeMap<usize, String>) -> String {
    match answers.len() {
        0 => "no answer".into(),
        1 if answers.contains_key(&0) => answers[&0].clone(),
        _ => answers
            .iter()
            .map(|(i, a)| format!("{}. {a}", i + 1))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// "Allow always, writing the rule: allow … (FILE, user tier, priority 4.95)" (its rule in
/// every project when `any_project`).
pub fn always_text(o: &Offer, any_project: bool) -> String {
    match o.rule(any_project) {
        Some(r) => clean(
            &format!(
                "{}, writing the rule: {}",
                o.chosen.label(),
                always::describe(r)
            ),
            MAX_TEXT,
        ),
        None => o.chosen.label().to_owned(),
    }
}

/// The label of the button that widens `o`'s rule to every project.
pub fn everywhere_label(o: &Offer) -> String {
    format!("{}, every project", o.chosen.label())
}

pub fn decision_text(d: &Decision) -> String {
    match d {
        Decision::Decided {
            outcome: ToolOutcome::Cancel,
            message: Some(m),
            ..
        } => format!("Deny ({m})"),
        Decision::Decided { outcome, .. } => outcome.label().to_owned(),
        Decision::Dismissed => "Dismiss".to_owned(),
    }
}
