//! Request context on the command line: the `--project/--agent/--session/--title` flags (and
//! their `ASKBUS_*` variables) a producer fills a request's `context` from, the filter flags
//! of the UIs (`ui`, `web`, `pending`), and the one line that says who asks, about what.

use askbus::protocol::{RequestContext, SubscribeFilter};

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
            ..RequestContext::default()
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
    /// Federation: only questions asked on this askbusd node
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

impl FilterArgs {
    pub fn filter(&self) -> SubscribeFilter {
        SubscribeFilter {
            project: set(self.project.clone()),
            agent: set(self.agent.clone()),
            session: set(self.session.clone()),
            node: set(self.node.clone()),
        }
    }
}

/// "project web, agent gemini-cli" for a filter ("" when it shows everything), safe to print.
pub fn describe_filter(filter: &SubscribeFilter) -> String {
    [
        ("project", &filter.project),
        ("agent", &filter.agent),
        ("session", &filter.session),
        ("node", &filter.node),
    ]
    .into_iter()
    .filter_map(|(k, v)| {
        v.as_deref()
            .map(|v| format!("{k} {}", crate::term::sanitize(v)))
    })
    .collect::<Vec<_>>()
    .join(", ")
}

fn set(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}
