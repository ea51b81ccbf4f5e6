//! Request context: who is asking, about what (a request's optional `context`, echoed to
//! UIs), and the `subscribe` filter UIs choose requests by. The one check of a context value
//! lives here, so both parsers and every client word it the same.

use serde::{Deserialize, Serialize};

/// The longest value of each `context` field, in characters (Unicode scalar values).
pub const CONTEXT_LIMITS: [(&str, usize); 5] = [
    ("agent", 256),
    ("session", 256),
    ("project", 128),
    ("cwd", 4096),
    ("title", 256),
];

/// Checks one `context` (or `filter`) value: non-empty, at most its field's length, one line
/// without control characters. The message names the field as `context.<name>`.
pub fn check_context_value(name: &str, value: &str) -> Result<(), String> {
    let max = CONTEXT_LIMITS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(256, |(_, max)| *max);
    if value.is_empty() {
        return Err(format!("context.{name} must not be empty"));
    }
    // Bounded before counting: a huge value is refused without walking all of it.
    if value.len() > max && value.chars().nth(max).is_some() {
        return Err(format!("context.{name} must be at most {max} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "context.{name} must be one line without control characters"
        ));
    }
    Ok(())
}

/// The agent's approval mode, as Gemini CLI names its modes (`context.approvalMode`): which
/// policy rules with `modes = [...]` apply to the request. Absent means `default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalMode {
    /// `default`: the agent asks before every tool call its rules do not allow.
    Default,
    /// `autoEdit`: file edits are allowed without asking.
    AutoEdit,
    /// `yolo`: every tool call is allowed without asking.
    Yolo,
    /// `plan`: read-only planning.
    Plan,
}

impl ApprovalMode {
    /// Every mode, in the wire's spelling.
    pub const ALL: [ApprovalMode; 4] = [
        ApprovalMode::Default,
        ApprovalMode::AutoEdit,
        ApprovalMode::Yolo,
        ApprovalMode::Plan,
    ];

    /// The wire's (and Gemini CLI's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Default => "default",
            ApprovalMode::AutoEdit => "autoEdit",
            ApprovalMode::Yolo => "yolo",
            ApprovalMode::Plan => "plan",
        }
    }

    /// From the wire's spelling (exactly; `YOLO` is not a mode).
    pub fn parse(s: &str) -> Option<ApprovalMode> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The `invalid-request` message for a value that is not a mode.
    pub fn refusal(shown: &str) -> String {
        format!(
            "context.approvalMode must be one of \"default\", \"autoEdit\", \"yolo\", \"plan\", not {shown}"
        )
    }
}

/// Who is asking, about what: a request's optional `context`, echoed to UIs with it. Every
/// field is optional; what they mean is in proto/PROTOCOL.md.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestContext {
    /// The agent itself, `name/version` (not the client library: that is `producer.client`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent's own session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// A short project name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The agent's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// One line: what the agent is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The agent's approval mode (absent: `default`); policy rules' `modes` match it.
    #[serde(
        default,
        rename = "approvalMode",
        skip_serializing_if = "Option::is_none"
    )]
    pub approval_mode: Option<ApprovalMode>,
    /// Whether a person is at the agent's own prompt (absent: yes); policy rules'
    /// `interactive` matches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
}

impl RequestContext {
    pub fn is_empty(&self) -> bool {
        self == &RequestContext::default()
    }

    /// `None` when no field is set: such a context is not sent on.
    pub fn into_option(self) -> Option<RequestContext> {
        (!self.is_empty()).then_some(self)
    }

    /// The string fields that are set, by name, in the wire's order (not `approvalMode` or
    /// `interactive`, which are typed).
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("agent", &self.agent),
            ("session", &self.session),
            ("project", &self.project),
            ("cwd", &self.cwd),
            ("title", &self.title),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
    }

    /// What the daemon would refuse in it (the `invalid-request` message), if anything.
    pub fn check(&self) -> Result<(), String> {
        self.fields()
            .try_for_each(|(n, v)| check_context_value(n, v))
    }
}

/// Which requests a UI is shown (`subscribe`'s `filter`): every field that is set must match
/// the request's context; a request without that context field does not match. `agent`
/// matches the whole `name/version` or just its name. `node` (federation) matches the node a
/// request was asked on; a daemon without federation has no node, so it matches nothing there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SubscribeFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Federation: only requests asked on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl SubscribeFilter {
    /// The keys a filter may have.
    pub const KEYS: [&'static str; 4] = ["project", "agent", "session", "node"];

    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<String>> {
        match key {
            "project" => Some(&mut self.project),
            "agent" => Some(&mut self.agent),
            "session" => Some(&mut self.session),
            "node" => Some(&mut self.node),
            _ => None,
        }
    }

    pub(crate) fn key_name(key: &str) -> &'static str {
        Self::KEYS
            .into_iter()
            .find(|k| *k == key)
            .unwrap_or("filter")
    }

    /// Whether it shows everything.
    pub fn is_empty(&self) -> bool {
        self == &SubscribeFilter::default()
    }

    /// Whether a request with this context, asked on `node` (`None`: no federation), is shown.
    pub fn matches_request(&self, context: Option<&RequestContext>, node: Option<&str>) -> bool {
        self.matches(context) && self.node.as_deref().is_none_or(|want| node == Some(want))
    }

    /// Whether a request with this context is shown, its node aside.
    pub fn matches(&self, context: Option<&RequestContext>) -> bool {
        let field =
            |f: fn(&RequestContext) -> &Option<String>| context.and_then(|c| f(c).as_deref());
        let eq = |want: &Option<String>, got: Option<&str>| match want {
            None => true,
            Some(want) => got == Some(want.as_str()),
        };
        let agent = match &self.agent {
            None => true,
            Some(want) => field(|c| &c.agent).is_some_and(|got| {
                got == want
                    || got
                        .strip_prefix(want.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }),
        };
        agent
            && eq(&self.project, field(|c| &c.project))
            && eq(&self.session, field(|c| &c.session))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_by_project_agent_name_or_version_and_session() {
        let ctx = |agent: &str, project: &str| RequestContext {
            agent: Some(agent.into()),
            project: Some(project.into()),
            ..RequestContext::default()
        };
        let f = SubscribeFilter {
            project: Some("askbus".into()),
            agent: Some("gemini-cli".into()),
            ..SubscribeFilter::default()
        };
        let on_a = SubscribeFilter {
            node: Some("A".into()),
            ..f.clone()
        };
        let c = ctx("gemini-cli/0.61.0", "askbus");
        assert!(on_a.matches_request(Some(&c), Some("A")));
        assert!(!on_a.matches_request(Some(&c), Some("B")));
        assert!(!on_a.matches_request(Some(&c), None));
        assert!(f.matches_request(Some(&c), None));
        assert!(f.matches(Some(&ctx("gemini-cli/0.61.0", "askbus"))));
        assert!(f.matches(Some(&ctx("gemini-cli", "askbus"))));
        assert!(!f.matches(Some(&ctx("gemini-cli-x/1", "askbus"))));
        assert!(!f.matches(Some(&ctx("gemini-cli/1", "other"))));
        assert!(!f.matches(None));
        assert!(SubscribeFilter::default().matches(None));
        let exact = SubscribeFilter {
            agent: Some("gemini-cli/0.61.0".into()),
            ..SubscribeFilter::default()
        };
        assert!(exact.matches(Some(&ctx("gemini-cli/0.61.0", "x"))));
        assert!(!exact.matches(Some(&ctx("gemini-cli/0.62.0", "x"))));
        let session = SubscribeFilter {
            session: Some("s1".into()),
            ..SubscribeFilter::default()
        };
        let mut c = ctx("a", "p");
        assert!(!session.matches(Some(&c)));
        c.session = Some("s1".into());
        assert!(session.matches(Some(&c)));
    }

    #[test]
    fn values_are_bounded_one_line_and_not_empty() {
        assert_eq!(check_context_value("project", "askbus"), Ok(()));
        assert!(check_context_value("project", &"é".repeat(128)).is_ok());
        assert_eq!(
            check_context_value("project", &"é".repeat(129)),
            Err("context.project must be at most 128 characters".into())
        );
        assert!(check_context_value("cwd", &"d".repeat(4096)).is_ok());
        assert!(check_context_value("title", "a\u{85}b").is_err());
        assert!(check_context_value("title", "a\u{7f}").is_err());
        assert_eq!(
            check_context_value("agent", ""),
            Err("context.agent must not be empty".into())
        );
        let c = RequestContext {
            title: Some("x\ty".into()),
            ..RequestContext::default()
        };
        assert!(c.check().is_err());
        assert!(RequestContext::default().into_option().is_none());
    }
}
