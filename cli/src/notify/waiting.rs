//! What a notification says about one waiting request, and which answers it offers: built
//! once from the request frame (question or approval), so the notifier keeps a few short
//! strings per pending request rather than the frame. Owns the privacy rules too: what a
//! redacted push may say, and that no answer text is ever put into a notification.

use std::collections::BTreeMap;

use askbus::protocol::{RequestContext, ToolOutcome, UiApproval, UiRequest};
use serde_json::Value;

/// The longest body a notification carries (characters); longer text ends in "…".
const MAX_BODY: usize = 300;
/// The longest title.
const MAX_TITLE: usize = 100;
/// A choice question gets one-click buttons only up to this many options.
pub const MAX_CHOICE_ACTIONS: usize = 3;

/// One answer a single click sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// An `ask-user-response`'s answers.
    Question(BTreeMap<usize, String>),
    /// A `tool-confirmation-response`'s decision.
    Approval(ToolOutcome),
}

impl Answer {
    /// The body a UI would send, as signed into a link (COMMON "Signed links").
    pub fn link_body(&self) -> Value {
        match self {
            Answer::Question(answers) => {
                let map: serde_json::Map<String, Value> = answers
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                    .collect();
                serde_json::json!({ "answers": map })
            }
            Answer::Approval(outcome) => serde_json::json!({ "outcome": outcome.as_str() }),
        }
    }
}

/// A button: its label and the answer it sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub label: String,
    pub answer: Answer,
    /// Whether the label is generic (Yes/No/Allow/Deny) rather than text the agent wrote:
    /// only generic labels may leave the machine in a redacted push.
    pub generic: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Question,
    Approval,
}

/// A pending request as notifications show it. Every string is bus text and is sanitized by
/// the sink that shows it.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub id: String,
    pub kind: Kind,
    /// Who asks: the context's agent, else the producer's client name.
    pub agent: String,
    pub project: Option<String>,
    /// The first question's header, or the approval's title / tool name.
    pub header: String,
    /// The question text, or the command / file / tool the approval is about.
    pub body: String,
    pub choices: Vec<Choice>,
    /// An approval's "Allow always" (`crate::always`'s first offer for it: what it chooses,
    /// sends, and the rule it writes). Never a one-click choice: the desktop shows its rule in
    /// the body before the button, a push opens the link page that shows it before the tap.
    pub always: Option<crate::always::Offer>,
    /// Milliseconds the request had left when it arrived.
    pub timeout_ms: u64,
    /// `shownSha256` of the request: its signed links are bound to it, so they can never
    /// answer (or show) a later request that reuses the correlationId.
    pub shown: String,
}

impl Waiting {
    pub fn from_question(r: &UiRequest) -> Waiting {
        let questions = r.questions.as_array().map(Vec::as_slice).unwrap_or(&[]);
        let first = questions.first();
        let text = |q: Option<&Value>, key: &str| {
            q.and_then(|q| q.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let mut body = text(first, "question");
        if questions.len() > 1 {
            body.push_str(&format!(" (+{} more)", questions.len() - 1));
        }
        Waiting {
            shown: askbus::protocol::shown_sha256(&r.shown()),
            id: r.correlation_id.clone(),
            kind: Kind::Question,
            agent: agent_name(r.context.as_deref(), r.producer.client.as_deref()),
            project: r.context.as_ref().and_then(|c| c.project.clone()),
            header: text(first, "header"),
            body: clip(&body, MAX_BODY),
            choices: question_choices(questions),
            always: None,
            timeout_ms: r.timeout_ms,
        }
    }

    pub fn from_approval(r: &UiApproval) -> Waiting {
        let details = r.details.as_ref();
        let field = |k: &str| details.and_then(|d| d.get(k)).and_then(Value::as_str);
        let tool = r
            .tool_call
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("a tool");
        let header = field("title").map_or_else(|| format!("Allow {tool}?"), str::to_owned);
        // What a person decides on: the command, the file, the prompt, the MCP tool.
        let body = match field("type") {
            Some("exec") | Some("sandbox_expansion") => field("command").map(str::to_owned),
            Some("edit") => field("filePath")
                .or(field("fileName"))
                .map(|f| format!("Edit {f}")),
            Some("mcp") => match (field("serverName"), field("toolDisplayName")) {
                (Some(s), Some(t)) => Some(format!("{s}: {t}")),
                _ => None,
            },
            Some("info") => field("prompt").map(str::to_owned),
            Some("exit_plan_mode") => field("planPath").map(|p| format!("Plan: {p}")),
            _ => None,
        }
        .unwrap_or_else(|| {
            let args = r.tool_call.get("args").map(Value::to_string);
            match args {
                Some(a) => format!("{tool} {a}"),
                None => tool.to_owned(),
            }
        });
        let mut choices = Vec::new();
        if r.outcomes.contains(&ToolOutcome::ProceedOnce) {
            choices.push(Choice {
                label: "Allow".into(),
                answer: Answer::Approval(ToolOutcome::ProceedOnce),
                generic: true,
            });
        }
        choices.push(Choice {
            label: "Deny".into(),
            answer: Answer::Approval(ToolOutcome::Cancel),
            generic: true,
        });
        Waiting {
            shown: askbus::protocol::shown_sha256(&r.shown()),
            id: r.correlation_id.clone(),
            kind: Kind::Approval,
            agent: agent_name(r.context.as_ref(), r.producer.client.as_deref()),
            project: r.context.as_ref().and_then(|c| c.project.clone()),
            header: clip(&header, MAX_TITLE),
            body: clip(&body, MAX_BODY),
            choices,
            always: crate::always::offers(r).into_iter().next(),
            timeout_ms: r.timeout_ms,
        }
    }

    /// "claude-code · Database" (agent and header), or with the project when there is one.
    pub fn title(&self) -> String {
        let mut t = self.agent.clone();
        if let Some(p) = &self.project {
            t = format!("{t} ({p})");
        }
        if !self.header.is_empty() {
            t = format!("{t} · {}", self.header);
        }
        clip(&t, MAX_TITLE)
    }

    /// What a redacted push says: who is waiting, nothing of what they ask.
    pub fn redacted_body(&self) -> String {
        match self.kind {
            Kind::Question => format!("agent {} is waiting for an answer", self.agent),
            Kind::Approval => format!("agent {} is waiting for an approval", self.agent),
        }
    }

    /// The body a desktop notification shows: with an "Allow always" button, the rule it
    /// writes, said before the click.
    pub fn desktop_body(&self) -> String {
        match &self.always {
            Some(o) => format!("{}\n\"Allow always\" {}", self.body, o.says(false)),
            None => self.body.clone(),
        }
    }

    /// The buttons a push may show: all of them, or the generic ones when redacting.
    pub fn push_choices(&self, redact: bool) -> impl Iterator<Item = &Choice> {
        self.choices.iter().filter(move |c| !redact || c.generic)
    }
}

/// The one-click answers of a request: only when one click answers it whole (a single yesno
/// or single-pick choice of at most three options); text, multiSelect and several questions
/// are answered in a UI ("Open").
fn question_choices(questions: &[Value]) -> Vec<Choice> {
    let [q] = questions else {
        return Vec::new();
    };
    let answer = |label: &str| Answer::Question(BTreeMap::from([(0, label.to_owned())]));
    match q.get("type").and_then(Value::as_str) {
        Some("yesno") => ["Yes", "No"]
            .into_iter()
            .map(|l| Choice {
                label: l.into(),
                answer: answer(l),
                generic: true,
            })
            .collect(),
        Some("choice") if q.get("multiSelect").and_then(Value::as_bool) != Some(true) => {
            let options = q
                .get("options")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let labels: Vec<&str> = options
                .iter()
                .filter_map(|o| o.get("label").and_then(Value::as_str))
                .collect();
            if labels.is_empty() || labels.len() > MAX_CHOICE_ACTIONS {
                return Vec::new();
            }
            labels
                .into_iter()
                .map(|l| Choice {
                    label: l.to_owned(),
                    answer: answer(l),
                    generic: false,
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

fn agent_name(context: Option<&RequestContext>, client: Option<&str>) -> String {
    context
        .and_then(|c| c.agent.as_deref())
        .or(client)
        .unwrap_or("an agent")
        .to_owned()
}

/// `s` cut to `max` characters (on a character boundary), ending in "…" when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(v: Value) -> UiRequest {
        serde_json::from_value(
            json!({"correlationId": "c1", "questions": v, "timeoutMs": 1000,
            "producer": {"client": "my-agent/1", "pid": 1, "uid": 0},
            "context": {"agent": "gemini-cli/0.61.0", "project": "web"}}),
        )
        .unwrap()
    }

    #[test]
    fn yesno_offers_yes_and_no() {
        let w = Waiting::from_question(&question(json!([{"question": "Deploy?",
            "header": "Deploy", "type": "yesno"}])));
        assert_eq!(w.title(), "gemini-cli/0.61.0 (web) · Deploy");
        assert_eq!(w.body, "Deploy?");
        let labels: Vec<_> = w.choices.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["Yes", "No"]);
        assert_eq!(
            w.choices[1].answer.link_body(),
            json!({"answers": {"0": "No"}})
        );
    }

    #[test]
    fn choices_only_when_one_click_answers() {
        let opts = |n: usize| -> Vec<Value> {
            (0..n)
                .map(|i| json!({"label": format!("L{i}"), "description": ""}))
                .collect()
        };
        let w = Waiting::from_question(&question(json!([{"question": "Pick", "header": "H",
            "type": "choice", "options": opts(3)}])));
        assert_eq!(w.choices.len(), 3);
        assert!(!w.choices[0].generic);
        let w = Waiting::from_question(&question(json!([{"question": "Pick", "header": "H",
            "type": "choice", "options": opts(4)}])));
        assert!(w.choices.is_empty());
        let w = Waiting::from_question(&question(json!([{"question": "Pick", "header": "H",
            "type": "choice", "multiSelect": true, "options": opts(2)}])));
        assert!(w.choices.is_empty());
        let w = Waiting::from_question(&question(json!([
            {"question": "A?", "header": "A", "type": "yesno"},
            {"question": "B?", "header": "B", "type": "yesno"}])));
        assert!(w.choices.is_empty());
        assert_eq!(w.body, "A? (+1 more)");
        let w = Waiting::from_question(&question(json!([{"question": "Name?", "header": "N",
            "type": "text"}])));
        assert!(w.choices.is_empty());
    }

    #[test]
    fn approvals_show_the_command_and_allow_deny() {
        let a: UiApproval = serde_json::from_value(json!({"correlationId": "a1",
            "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build"}},
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": "rm -rf build",
                "rootCommand": "rm", "rootCommands": ["rm"]},
            "outcomes": ["proceed_once", "proceed_always", "cancel"], "timeoutMs": 5000,
            "producer": {"client": "askbus-hook/0.1.0", "pid": 3,
                "uid": askbus::trust::effective_uid()}}))
        .unwrap();
        let w = Waiting::from_approval(&a);
        // "Allow always" is no one-click choice: the desktop body says its rule first.
        let always = w.always.as_ref().expect("an Allow always");
        assert_eq!(always.sent, ToolOutcome::ProceedAlways);
        assert!(
            w.desktop_body().starts_with(
                "rm -rf build\n\"Allow always\" writes the rule: allow run_shell_command \
                 commands starting \"rm\" in every project ("
            ),
            "{}",
            w.desktop_body()
        );
        assert_eq!(w.title(), "askbus-hook/0.1.0 · Confirm Shell Command");
        assert_eq!(w.body, "rm -rf build");
        let labels: Vec<_> = w.choices.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["Allow", "Deny"]);
        assert_eq!(
            w.choices[0].answer.link_body(),
            json!({"outcome": "proceed_once"})
        );
        assert_eq!(
            w.redacted_body(),
            "agent askbus-hook/0.1.0 is waiting for an approval"
        );
    }

    #[test]
    fn redaction_keeps_only_generic_buttons() {
        let w = Waiting::from_question(&question(json!([{"question": "Which secret?",
            "header": "H", "type": "choice", "options": [{"label": "prod-key", "description": ""}]}])));
        assert_eq!(w.push_choices(true).count(), 0);
        assert_eq!(w.push_choices(false).count(), 1);
        assert!(w.always.is_none());
        assert_eq!(w.desktop_body(), w.body);
        assert!(!w.redacted_body().contains("secret"));
    }

    #[test]
    fn long_text_is_clipped() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("ab", 4), "ab");
        assert_eq!(clip("ééééé", 3), "éé…");
    }
}
