//! One request as a chat message: what it shows (agent, project, title, node, a countdown in
//! words, the question or the approval's command/diff/MCP call), which buttons it offers for
//! its kind, and what a tap or a typed reply does to it (pick, toggle, step, submit, allow,
//! deny with or without a reason). Platform-neutral and free of I/O: a platform renders the
//! [`View`] with its own markup, the engine seals the [`Action`]s into callback data and sends
//! the answers a [`Step`] asks for through the bus.

use std::collections::BTreeMap;
use std::time::Duration;

use askbus::protocol::{Decision, RequestContext, ToolOutcome, UiApproval, UiRequest};
use serde_json::Value;

use super::text::clean;
use crate::ui::encode;
use crate::ui::question::{Kind as QKind, Question};

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
        let left = Duration::from_millis(self.timeout_ms).saturating_sub(self.arrived.elapsed());
        parts.push(left_in_words(left));
        parts.join(" · ")
    }
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

    /// What `--redact` shows: who, nothing of what.
    pub fn redacted(&self) -> View<Action> {
        let who = match &self.meta.project {
            Some(p) => format!("An agent in project {} needs you", clean(p, 80)),
            None => "An agent needs you".to_owned(),
        };
        let mut blocks = vec![Block::Title(who)];
        match &self.phase {
            Phase::Open => blocks.push(Block::Meta(left_in_words(
                Duration::from_millis(self.meta.timeout_ms)
                    .saturating_sub(self.meta.arrived.elapsed()),
            ))),
            Phase::Sending { .. } => {}
            Phase::Over(o) => blocks.push(Block::Note(redact_outcome(o))),
        }
        let rows = match (&self.open_url, self.is_open()) {
            (Some(url), true) => vec![vec![Button::Link {
                label: "Open in askbus web".into(),
                url: url.clone(),
            }]],
            _ => Vec::new(),
        };
        View { blocks, rows }
    }

    /// The message as it stands.
    pub fn view(&self) -> View<Action> {
        let mut blocks = vec![
            Block::Title(clean(&self.meta.title, MAX_TITLE)),
            Block::Meta(self.meta.line()),
        ];
        if self.meta.title.is_empty() {
            blocks.remove(0);
        }
        let mut rows = Vec::new();
        match &self.body {
            Body::Questions(q) => self.question_view(q, &mut blocks, &mut rows),
            Body::Approval(a) => self.approval_view(a, &mut blocks, &mut rows),
        }
        match &self.phase {
            Phase::Open => {}
            Phase::Sending { by, what } => {
                rows.clear();
                blocks.push(Block::Note(format!(
                    "Sending {} from {}…",
                    clean(what, MAX_ECHO),
                    clean(by, 120)
                )));
            }
            Phase::Over(outcome) => {
                rows.clear();
                blocks.push(Block::Note(outcome.clone()));
            }
        }
        if let (Some(url), true) = (&self.open_url, self.is_open()) {
            rows.push(vec![Button::Link {
                label: "Open in askbus web".into(),
                url: url.clone(),
            }]);
        }
        View { blocks, rows }
    }

    fn question_view(
        &self,
        q: &Questions,
        blocks: &mut Vec<Block>,
        rows: &mut Vec<Vec<Button<Action>>>,
    ) {
        let n = q.qs.len();
        if n > 1 {
            for (i, a) in q.answers.iter().enumerate().take(q.step) {
                let header = &q.qs[i].header;
                blocks.push(Block::Note(format!(
                    "{}. {}: {}",
                    i + 1,
                    clean(header, 60),
                    a.as_deref().map_or("(no answer)".into(), |a| clean(a, 120))
                )));
            }
        }
        let Some(cur) = q.qs.get(q.step) else {
            // Every question answered: submit or start over.
            if self.is_open() {
                rows.push(vec![
                    tap("Submit", Action::Submit),
                    tap("Start over", Action::Restart),
                ]);
            }
            return;
        };
        if n > 1 {
            blocks.push(Block::Note(format!("Question {} of {n}", q.step + 1)));
            if q.step > 0 && !cur.header.is_empty() {
                blocks.push(Block::Title(clean(&cur.header, MAX_TITLE)));
            }
        }
        blocks.push(Block::Text(clean(&cur.text, MAX_TEXT)));
        if !self.is_open() {
            return;
        }
        match &cur.kind {
            QKind::Text => {
                blocks.push(Block::Note("Tap ✏️ Answer to type your answer.".to_owned()));
                rows.push(vec![tap("✏️ Answer", Action::Write)]);
            }
            QKind::Choice {
                options,
                multi: false,
                yesno,
            } => {
                for (i, o) in options.iter().enumerate() {
                    if !o.description.is_empty() {
                        blocks.push(Block::Note(format!(
                            "{}: {}",
                            clean(&o.label, 60),
                            clean(&o.description, 200)
                        )));
                    }
                    rows.push(vec![tap(&o.label, Action::Pick(i as u8))]);
                }
                if *yesno {
                    // Yes and No side by side.
                    let both: Vec<_> = rows.drain(..).flatten().collect();
                    rows.push(both);
                } else {
                    rows.push(vec![tap("✏️ Other…", Action::Write)]);
                }
            }
            QKind::Choice {
                options,
                multi: true,
                ..
            } => {
                let checked = &q.checked[q.step];
                for (i, o) in options.iter().enumerate() {
                    if !o.description.is_empty() {
                        blocks.push(Block::Note(format!(
                            "{}: {}",
                            clean(&o.label, 60),
                            clean(&o.description, 200)
                        )));
                    }
                    let mark = if checked.get(i) == Some(&true) {
                        "☑"
                    } else {
                        "☐"
                    };
                    rows.push(vec![tap(
                        &format!("{mark} {}", o.label),
                        Action::Toggle(i as u8),
                    )]);
                }
                let mut last = Vec::new();
                if options.len() > 1 {
                    last.push(tap("All of the above", Action::All));
                }
                last.push(tap("✏️ Other…", Action::Write));
                last.push(tap("Done", Action::Done));
                rows.push(last);
            }
        }
    }

    fn approval_view(
        &self,
        a: &Approval,
        blocks: &mut Vec<Block>,
        rows: &mut Vec<Vec<Button<Action>>>,
    ) {
        if let Some(t) = &a.text {
            blocks.push(Block::Text(clean(t, MAX_TEXT)));
        }
        if let Some(c) = &a.code {
            blocks.push(Block::Code(clean_code(c)));
            if a.cut > 0 {
                let more = match &self.open_url {
                    Some(_) => " (the whole of it in askbus web)",
                    None => "",
                };
                blocks.push(Block::Note(format!("… {} more lines{more}", a.cut)));
            }
        }
        if !self.is_open() {
            return;
        }
        if a.denying {
            blocks.push(Block::Note(
                "Give the agent a reason in the prompt, or deny without one.".into(),
            ));
            rows.push(vec![
                tap("Deny without a reason", Action::DenyNow),
                tap("Back", Action::Back),
            ]);
            return;
        }
        let mut allow_row = Vec::new();
        for o in &a.allow {
            let i = ToolOutcome::ALL.iter().position(|x| x == o).unwrap_or(0) as u8;
            allow_row.push(tap(o.label(), Action::Allow(i)));
        }
        // Two per row: "Allow this tool always" and its like are long.
        for pair in allow_row.chunks(2) {
            rows.push(pair.to_vec());
        }
        rows.push(vec![tap("Deny", Action::Deny)]);
    }

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

    fn after(&mut self, step: Step, user: &User) -> Step {
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
            Step::Refuse(_) => {}
        }
        step
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

impl Question {
    fn labels_owned(&self) -> Vec<String> {
        self.labels().into_iter().map(str::to_owned).collect()
    }
}

fn tap(label: &str, action: Action) -> Button<Action> {
    Button::Tap {
        label: clean(label, MAX_LABEL),
        action,
    }
}

fn question_tap(q: &mut Questions, action: Action) -> Step {
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
fn advance(q: &mut Questions, answer: Option<String>) -> Step {
    q.answers[q.step] = answer;
    q.step += 1;
    if q.qs.len() == 1 {
        return Step::Answer(encode::answers(q.answers.iter().cloned()));
    }
    Step::Redraw
}

fn approval_tap(a: &mut Approval, action: Action) -> Step {
    match action {
        Action::Allow(i) if !a.denying => match ToolOutcome::ALL.get(usize::from(i)) {
            Some(o) if a.allow.contains(o) => Step::Decide(Decision::allow(*o)),
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

/// An outcome line without the answer (for `--redact`).
fn redact_outcome(o: &str) -> String {
    o.split(':').next().unwrap_or(o).to_owned()
}

/// A code block cut with care: whole lines, at most [`MAX_CODE_LINES`] and [`MAX_CODE`]
/// characters (a single overlong line is cut on a character boundary); how many lines were cut.
fn cut_code(code: &str) -> (String, usize) {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = String::new();
    let mut kept = 0;
    for line in &lines {
        let add = line.chars().count() + usize::from(kept > 0);
        if kept >= MAX_CODE_LINES || out.chars().count() + add > MAX_CODE {
            if kept == 0 {
                out = line.chars().take(MAX_CODE - 1).collect();
                out.push('…');
                kept = 1;
            }
            break;
        }
        if kept > 0 {
            out.push('\n');
        }
        out.push_str(line);
        kept += 1;
    }
    (out, lines.len().saturating_sub(kept))
}

/// A code block's lines neutralised one by one (newlines are the block's own).
fn clean_code(code: &str) -> String {
    code.split('\n')
        .map(|l| clean(l, MAX_CODE))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
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
}
