//! Request context on the command line: the `--project/--agent/--session/--title` flags (and
//! their `ASKBUS_*` variables) a producer fills a request's `context` from, the filter flags
//! of the UIs (`ui`, `web`, `pending`), and the one line that says who asks, about what.

use std::borrow::Cow;

use askbusd::protocol::{RequestContext, SubscribeFilter};

/// Who is asking, about what (`askbus ask`). Each flag defaults to its environment variable;
/// an empty value counts as unset.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ContextArgs {
    /// The project the question is about (a short name), shown to UIs and used by their filters
    #[arg(long, value_name = "NAME", env = "ASKBUS_PROJECT")]
    pub project: Option<String>,
    /// One line saying what the agent is doing
    #[arg(long, value_name = "TEXT", env = "ASKBUS_TITLE")]
    pub title: Option<String>,
    /// The agent asking, as name/version (the agent itself, not this tool)
    #[arg(long, value_name = "NAME/VERSION", env = "ASKBUS_AGENT")]
    pub agent: Option<String>,
    /// The agent's own session id
    #[arg(long, value_name = "ID", env = "ASKBUS_SESSION")]
    pub session: Option<String>,
    /// The agent's working directory
    #[arg(long, value_name = "DIR", env = "ASKBUS_CWD")]
    pub cwd: Option<String>,
}

impl ContextArgs {
    /// The request's `context`, `None` when nothing was given.
    pub fn context(self) -> Option<RequestContext> {
        RequestContext {
            agent: set(self.agent),
            session: set(self.session),
            project: set(self.project),
            cwd: set(self.cwd),
            title: set(self.title),
        }
        .into_option()
    }
}

/// Which questions a UI shows (`askbus ui`, `web`, `pending`): only those whose context
/// matches every filter given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only questions about this project (their context.project)
    #[arg(long, value_name = "NAME")]
    pub project: Option<String>,
    /// Only questions from this agent: its name (`gemini-cli`) or name/version
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only questions from this agent session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

impl FilterArgs {
    pub fn filter(&self) -> SubscribeFilter {
        SubscribeFilter {
            project: set(self.project.clone()),
            agent: set(self.agent.clone()),
            session: set(self.session.clone()),
        }
    }
}

fn set(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// One line saying who asks about what: `project · agent · title`, with what is missing left
/// out; empty when there is no context. Safe to print (every value is sanitized).
pub fn summary(context: Option<&RequestContext>) -> String {
    let Some(c) = context else {
        return String::new();
    };
    [&c.project, &c.agent, &c.title]
        .into_iter()
        .flatten()
        .map(|v| sanitize(v).into_owned())
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The project a question is grouped under, or `None` for questions without one.
pub fn project(context: Option<&RequestContext>) -> Option<&str> {
    context.and_then(|c| c.project.as_deref())
}

/// Bus data on its way to a terminal: every control character (C0, DEL, C1) and bidi control
/// replaced by a visible stand-in.
// TODO(hardening): switch to `crate::term::sanitize` once term.rs lands.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    let is_unsafe = |c: char| {
        c.is_control()
            || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !s.contains(is_unsafe) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                c if !is_unsafe(c) => c,
                '\0'..='\u{1F}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
                '\u{7F}' => '\u{2421}',
                _ => '\u{FFFD}',
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_joins_what_is_there_and_is_safe_to_print() {
        assert_eq!(summary(None), "");
        let c = RequestContext {
            project: Some("askbus".into()),
            agent: Some("gemini-cli/0.61.0".into()),
            title: Some("Fix \u{1b}[2J CI\u{202e}".into()),
            ..RequestContext::default()
        };
        assert_eq!(
            summary(Some(&c)),
            "askbus · gemini-cli/0.61.0 · Fix \u{241b}[2J CI\u{FFFD}"
        );
        let only = RequestContext {
            title: Some("t".into()),
            ..RequestContext::default()
        };
        assert_eq!(summary(Some(&only)), "t");
    }
}
