//! "Allow always" in askbus's own terms: the rule Gemini CLI would write for an approval (a
//! shell command's root command, an MCP server's tool or every tool of the server, a file
//! tool), at the reference's priority for it (4.95) in this user's policy file, scoped to the
//! request's project unless the person widens it. Every UI that offers "always" (`askbus
//! answer --always`, the TUI) shows the rule from here before the tap and writes it from here
//! before it sends the answer, so the daemon decides the next identical call by it.

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
