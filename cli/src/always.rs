//! "Allow always" in askbus's own terms: the rule Gemini CLI would write for an approval (a
//! shell command's root command, an MCP server's tool or every tool of the server, a file
//! tool), at the reference's priority for it (4.95) in this user's policy file, scoped to the
//! request's project unless the person widens it.
//!
//! This is the one code path every UI that offers "always" goes through (`askbus answer
//! --always`, the TUI, the web page and its signed one-tap links, `askbus notify`'s desktop
//! button; a push's "Allow always…" opens the link page): [`offers`] says which
//! "always" buttons an approval gets and the rule each writes, so the UI shows the rule before
//! the tap; [`Offer::apply`] writes it before the answer is sent, so the daemon decides the
//! next identical call by it. Where the agent offers no "always" of its own (the hooks offer
//! Allow once and Deny only), askbus's rule is the "always": the button sends `proceed_once`.

use std::path::PathBuf;

use askbus::protocol::{ToolOutcome, UiApproval};
use askbus_policy::tiers::{self, AlwaysRule, AlwaysScope};

/// The rule "allow always" (`outcome`, or the agent's plain "always" when it offers none of
/// its own) writes for `a`; `None` for another uid's request (its rules are not this user's
/// to write) or a call askbus cannot say a rule for.
pub fn rule_for(a: &UiApproval, outcome: ToolOutcome, any_project: bool) -> Option<AlwaysRule> {
    if a.producer.uid != askbus::trust::effective_uid() {
        return None;
    }
    let ctx = a.context.as_ref();
    let scope = if outcome == ToolOutcome::ProceedAlwaysServer {
        AlwaysScope::Server
    } else {
        AlwaysScope::Tool
    };
    let project = if any_project {
        None
    } else {
        ctx.and_then(|c| c.project.as_deref())
    };
    tiers::always_rule_for(
        &a.tool_call,
        a.server_name.as_deref(),
        ctx.and_then(|c| c.agent.as_deref()),
        scope,
        project,
    )
}

/// The "Allow always" family: the outcomes that mean "and the next such call too".
pub fn is_always(o: ToolOutcome) -> bool {
    matches!(
        o,
        ToolOutcome::ProceedAlways
            | ToolOutcome::ProceedAlwaysAndSave
            | ToolOutcome::ProceedAlwaysServer
            | ToolOutcome::ProceedAlwaysTool
    )
}

/// One "always" button of an approval: what it chooses, what the agent is sent, and the rule
/// askbus writes for it (scoped to the request's project, and widened to every project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The button's outcome: one of the agent's own "always" outcomes, or `proceed_always`
    /// for askbus's own "always" where the agent offers none.
    pub chosen: ToolOutcome,
    /// What the agent is sent: `chosen` when the agent offers it, else `proceed_once` (the
    /// rule is then the only "always").
    pub sent: ToolOutcome,
    /// The rule in the request's project (in every project when it names none); `None` when
    /// askbus can say no rule for it (another user's request): the agent's own "always" only.
    pub rule: Option<AlwaysRule>,
    /// The same rule in every project, when `rule` is scoped to one: what widening writes.
    pub wide: Option<AlwaysRule>,
}

impl Offer {
    /// The rule this button writes, widened to every project or not.
    pub fn rule(&self, any_project: bool) -> Option<&AlwaysRule> {
        match (any_project, &self.wide) {
            (true, Some(w)) => Some(w),
            _ => self.rule.as_ref(),
        }
    }

    /// Whether the person can widen the rule to every project (the request names one).
    pub fn widens(&self) -> bool {
        self.wide.is_some()
    }

    /// What a UI says before the tap: the rule it writes, or that it writes none.
    pub fn says(&self, any_project: bool) -> String {
        match self.rule(any_project) {
            Some(r) => format!("writes the rule: {}", describe(r)),
            None => "writes no askbus rule (the request is another user's, or askbus cannot \
                     say a rule for this call): the agent's own \"always\" only"
                .to_owned(),
        }
    }

    /// Writes the rule (when there is one) before the answer goes out, so the daemon decides
    /// the next identical call by it; returns the rule written.
    pub fn apply(&self, any_project: bool) -> std::io::Result<Option<AlwaysRule>> {
        match self.rule(any_project) {
            Some(r) => write(r).map(|_| Some(r.clone())),
            None => Ok(None),
        }
    }
}

/// The "always" buttons a UI offers for `a`, in the protocol's order: each "always" outcome
/// the agent offers, with the rule askbus writes for it; or, when the agent offers none,
/// askbus's own "Allow always" if it can say a rule for the call.
pub fn offers(a: &UiApproval) -> Vec<Offer> {
    let own: Vec<ToolOutcome> = ToolOutcome::ALL
        .into_iter()
        .filter(|o| is_always(*o) && a.outcomes.contains(o))
        .collect();
    if own.is_empty() {
        return offer(a, ToolOutcome::ProceedAlways)
            .filter(|o| o.rule.is_some())
            .into_iter()
            .collect();
    }
    own.into_iter().filter_map(|o| offer(a, o)).collect()
}

/// The offer behind a button that chose `chosen`; `None` when it is no "always", or an
/// "always" neither the agent nor askbus offers for `a`.
pub fn offer(a: &UiApproval, chosen: ToolOutcome) -> Option<Offer> {
    if !is_always(chosen) {
        return None;
    }
    let offered = a.outcomes.contains(&chosen);
    let agent_has_any = a.outcomes.iter().any(|o| is_always(*o));
    if !offered && (agent_has_any || chosen != ToolOutcome::ProceedAlways) {
        return None;
    }
    let rule = rule_for(a, chosen, false);
    let wide = rule_for(a, chosen, true).filter(|w| Some(w) != rule.as_ref());
    if !offered && rule.is_none() {
        return None;
    }
    Some(Offer {
        chosen,
        sent: if offered {
            chosen
        } else {
            ToolOutcome::ProceedOnce
        },
        rule,
        wide,
    })
}

/// What a UI says before the tap: `allow SUMMARY (FILE, user tier, priority 4.95)`.
pub fn describe(rule: &AlwaysRule) -> String {
    format!(
        "allow {} ({}, user tier, priority 4.95)",
        rule.summary,
        file().display()
    )
}

/// This user's file the rules go to.
pub fn file() -> PathBuf {
    tiers::own_user_dir().join(tiers::USER_FILE)
}

/// Appends the rule to this user's file (mode 0600; refused if the file would not load).
pub fn write(rule: &AlwaysRule) -> std::io::Result<PathBuf> {
    tiers::append_user_rule(&tiers::own_user_dir(), &rule.toml)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approval(outcomes: &[&str], project: Option<&str>) -> UiApproval {
        let mut f = json!({"type": "tool-confirmation-request", "correlationId": "a1",
            "toolCall": {"name": "run_shell_command", "args": {"command": "npm test"}},
            "outcomes": outcomes, "timeoutMs": 1000,
            "producer": {"uid": askbus::trust::effective_uid(), "pid": 1}});
        if let Some(p) = project {
            f["context"] = json!({"project": p});
        }
        serde_json::from_value(f).expect("a UI approval frame")
    }

    #[test]
    fn the_agents_own_always_sends_itself_and_writes_the_rule() {
        let a = approval(&["proceed_once", "proceed_always", "cancel"], Some("shop"));
        let o = offers(&a);
        assert_eq!(o.len(), 1);
        assert_eq!(
            (o[0].chosen, o[0].sent),
            (ToolOutcome::ProceedAlways, ToolOutcome::ProceedAlways)
        );
        let r = o[0].rule(false).unwrap();
        assert_eq!(
            r.summary,
            "run_shell_command commands starting \"npm\" in project shop"
        );
        assert!(o[0].widens());
        assert!(o[0]
            .rule(true)
            .unwrap()
            .summary
            .ends_with("in every project"));
    }

    #[test]
    fn without_an_always_of_its_own_askbus_offers_its_rule_sending_once() {
        let a = approval(&["proceed_once", "cancel"], None);
        let o = offers(&a);
        assert_eq!(o.len(), 1);
        assert_eq!(
            (o[0].chosen, o[0].sent),
            (ToolOutcome::ProceedAlways, ToolOutcome::ProceedOnce)
        );
        // No project: the rule is already every project's; nothing to widen.
        assert!(!o[0].widens());
        assert_eq!(offer(&a, ToolOutcome::ProceedAlwaysTool), None);
        assert_eq!(offer(&a, ToolOutcome::ProceedOnce), None);
    }
}
