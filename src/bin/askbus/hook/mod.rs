//! `askbus hook AGENT`: an agent's own permission hook (Gemini CLI's `BeforeTool`, Claude
//! Code's `PreToolUse`/`PermissionRequest`, Codex's `PermissionRequest`) that asks a person
//! through askbusd and writes the decision back in that agent's hook format.
//!
//! `agent` owns each agent's hook contract, `details` what the person is shown for a tool
//! call; this file reads the input, does the one exchange with the daemon and turns how it
//! ended into a verdict. It **fails closed**: only a person's explicit approval allows; an
//! unreachable daemon, a timeout, a dismissal, no UI, a refusal or a malformed input denies
//! (exit 2, the reason on stderr), or with `--fallback ask` hands the decision back to the
//! agent's own prompt. It never exits with a code an agent reads as "carry on".

mod agent;
mod details;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bytes::Bytes;
use clap::{Args, ValueEnum};
use serde_json::{Map, Value};

use askbusd::client::{new_correlation_id, ClientError, Connection};
use askbusd::protocol::{
    ApprovalResponse, ClientFrame, NoUiPolicy, Outcome, ProducerResponse, ServerFrame, ToolOutcome,
    PROTOCOL_VERSION,
};

pub use agent::{Agent, EXIT_BLOCK};
use agent::{Event, Output, Request, Verdict};
pub(crate) use details::root_commands;

/// Whether this process's command line is `askbus [--socket PATH] hook …`, for the usage
/// error path, which runs before the command line is understood.
pub fn invoked() -> bool {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy();
        if arg == "--socket" {
            args.next();
        } else if !arg.starts_with('-') {
            return arg == "hook";
        }
    }
    false
}

/// The most the hook reads from stdin: an agent's hook input carries one tool call, and a
/// request must fit in one frame anyway.
const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// Which agent runs this hook (its input and output formats)
    agent: Agent,
    /// How long to wait for a person [default: 55000 for gemini (under Gemini CLI's 60 s hook
    /// timeout, after which it runs the tool), 590000 for claude and codex]. Keep it under the
    /// hook's own timeout in the agent's settings.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    /// When no UI is connected: wait for one, or give up at once [default: the daemon's]
    #[arg(long, value_name = "POLICY", value_parser = askbusd::config::no_ui_arg())]
    no_ui: Option<NoUiPolicy>,
    /// When nobody decides (askbusd unreachable, timeout, no UI, dismissed): deny, or hand
    /// the decision back to the agent's own prompt (Gemini CLI and Claude Code in a terminal,
    /// Codex's approval prompt)
    #[arg(long, value_name = "WHAT", default_value = "deny")]
    fallback: Fallback,
    /// Name announced to the UIs as the producer
    #[arg(long, value_name = "NAME", default_value = concat!("askbus-hook/", env!("CARGO_PKG_VERSION")))]
    client: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// Deny the tool call (exit 2)
    Deny,
    /// Let the agent ask in its own terminal (or approval prompt)
    Ask,
}

/// Runs the hook: never fails, every error is a verdict.
pub async fn run(socket: &Path, args: HookArgs) -> ExitCode {
    let agent = args.agent;
    let hand_back = args.fallback == Fallback::Ask;
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut input);
    let parsed = match read {
        Err(e) => Err(format!("cannot read the hook input: {e}")),
        Ok(_) if input.len() as u64 > MAX_INPUT_BYTES => Err(format!(
            "the hook input is larger than {MAX_INPUT_BYTES} bytes"
        )),
        Ok(_) => agent::parse(agent, &input).map_err(|e| e.to_string()),
    };
    let output = match parsed {
        // A malformed input is never handed back: the agent and this hook disagree on the
        // contract, and only a config fix helps.
        Err(why) => agent::render(
            agent,
            None,
            Verdict::Undecided {
                why: format!(
                    "{}: {why}; the tool call was not approved.",
                    agent.command()
                ),
                hand_back: false,
            },
        ),
        Ok(event) => {
            let verdict = decide(socket, &args, &event).await;
            let verdict = match verdict {
                Verdict::Undecided { why, .. } => Verdict::Undecided { why, hand_back },
                v => v,
            };
            agent::render(agent, Some(&event), verdict)
        }
    };
    write(&output);
    ExitCode::from(output.code)
}

fn write(output: &Output) {
    if let Some(out) = &output.stdout {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{out}");
        let _ = stdout.flush();
    }
    if let Some(err) = &output.stderr {
        // Agents show it in their terminal: bus text (a person's reason, the daemon's
        // messages) goes through sanitize, newlines included.
        eprintln!("{}", crate::term::sanitize(err));
    }
}

/// Asks and waits; how it ended, as a verdict (before `--fallback` applies).
async fn decide(socket: &Path, args: &HookArgs, event: &Event) -> Verdict {
    let request = agent::request(args.agent, event);
    let id = new_correlation_id();
    let timeout_ms = args
        .timeout_ms
        .unwrap_or_else(|| args.agent.default_timeout_ms());
    let (frame, title) = match request {
        Request::Approval { fields, title } => {
            let mut frame = Map::new();
            frame.insert("type".into(), "tool-confirmation-request".into());
            frame.insert("correlationId".into(), id.clone().into());
            frame.extend(fields);
            (frame, title)
        }
        Request::Questions { questions, title } => {
            let mut frame = Map::new();
            frame.insert("type".into(), "ask-user-request".into());
            frame.insert("correlationId".into(), id.clone().into());
            frame.insert("questions".into(), questions);
            (frame, title)
        }
    };
    let mut frame = frame;
    frame.insert("timeoutMs".into(), timeout_ms.into());
    if let Some(policy) = args.no_ui {
        frame.insert("noUi".into(), policy.as_str().into());
    }
    frame.insert(
        "context".into(),
        Value::Object(context(args.agent, event, &title)),
    );
    let payload = Bytes::from(serde_json::to_vec(&Value::Object(frame)).expect("JSON serializes"));
    match exchange(socket, &args.client, payload, &id).await {
        Ok(Ended::Approval(r)) => approval_verdict(r),
        Ok(Ended::Question(r)) => question_verdict(r),
        Ok(Ended::Refused { code, message }) => Verdict::Undecided {
            why: format!(
                "askbusd refused the request ({code}: {message}), so the tool call was not \
                 approved."
            ),
            hand_back: false,
        },
        Err(e) => Verdict::Undecided {
            why: format!("{e}, so the tool call was not approved."),
            hand_back: false,
        },
    }
}

fn approval_verdict(r: ApprovalResponse) -> Verdict {
    match r.reason {
        Outcome::Answered if r.confirmed => Verdict::Allow {
            always: r.outcome != ToolOutcome::ProceedOnce,
        },
        Outcome::Answered => Verdict::Deny {
            reason: match r.message.as_deref().map(str::trim) {
                Some(m) if !m.is_empty() => format!("The user denied this tool call: {m}"),
                _ => "The user denied this tool call.".to_owned(),
            },
        },
        // The daemon words every other ending for the agent.
        _ => Verdict::Undecided {
            why: r.message.unwrap_or_else(|| {
                format!(
                    "The approval ended ({}), so the tool call was not approved.",
                    r.reason.as_str()
                )
            }),
            hand_back: false,
        },
    }
}

fn question_verdict(r: ProducerResponse) -> Verdict {
    match r.reason {
        Outcome::Answered if !r.cancelled => Verdict::Answers(
            r.answers
                .iter()
                .map(|(i, a)| (i.to_string(), Value::String(a.clone())))
                .collect(),
        ),
        // The reference's text for how it ended (dismissed, timeout, …), which tells the model
        // to carry on without an answer.
        _ => Verdict::Undecided {
            why: r.result.llm_content,
            hand_back: false,
        },
    }
}

/// The request's `context`: which agent, its session, the project and cwd, and a title.
/// Each value is made one line and cut to what askbusd accepts.
fn context(agent: Agent, event: &Event, title: &str) -> Map<String, Value> {
    // $ASKBUS_PROJECT names it as `askbus ask --project` does; else the project directory the
    // agent gives its hooks, else the cwd, by its last component.
    let project = std::env::var("ASKBUS_PROJECT")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .or_else(|| {
            ["GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"]
                .iter()
                .find_map(std::env::var_os)
                .map(PathBuf::from)
                .unwrap_or_else(|| event.cwd.clone())
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        });
    let cwd = event.cwd.to_string_lossy().into_owned();
    let mut ctx = Map::new();
    for (name, value, max) in [
        ("agent", Some(agent.context_name().to_owned()), 256),
        ("session", event.session.clone(), 256),
        ("project", project, 128),
        ("cwd", Some(cwd), 4096),
        ("title", Some(title.to_owned()), 256),
    ] {
        if let Some(v) = value.map(|v| one_line(&v, max)).filter(|v| !v.is_empty()) {
            ctx.insert(name.into(), v.into());
        }
    }
    ctx
}

/// `s` on one line (controls as spaces, trimmed), at most `max` characters (the last one `…`
/// when cut).
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    match clean.char_indices().nth(max - 1) {
        Some((i, _)) if clean.chars().count() > max => format!("{}…", &clean[..i]),
        _ => clean.to_owned(),
    }
}

/// How the exchange ended when the daemon had its say.
#[derive(Debug)]
enum Ended {
    Approval(ApprovalResponse),
    Question(ProducerResponse),
    Refused { code: String, message: String },
}

/// Why the daemon never said how the request ended.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error("askbus cannot reach askbusd at {}: {source}", path.display())]
    Unreachable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("askbus lost its connection to askbusd at {} before anyone decided ({source})", path.display())]
    Lost { path: PathBuf, source: ClientError },
}

/// One connection, `hello` and the request written back to back (no round trip before the
/// request is on the socket), then the wait for the request's one terminal frame.
async fn exchange(
    socket: &Path,
    client: &str,
    request: Bytes,
    id: &str,
) -> Result<Ended, ExchangeError> {
    let lost = |source| ExchangeError::Lost {
        path: socket.to_owned(),
        source,
    };
    let mut conn = Connection::connect(socket).await.map_err(|e| match e {
        ClientError::Connect { path, source } => ExchangeError::Unreachable { path, source },
        other => lost(other),
    })?;
    let refused = |e: askbusd::protocol::ErrorFrame| Ended::Refused {
        code: e.code.to_string(),
        message: e.message,
    };
    let hello = ClientFrame::Hello {
        protocol: PROTOCOL_VERSION,
        client: Some(client),
    };
    match conn.send(&hello).await {
        Ok(()) => {}
        Err(ClientError::Rejected(e)) => return Ok(refused(e)),
        Err(e) => return Err(lost(e)),
    }
    match conn.send_raw(request).await {
        Ok(()) => {}
        Err(ClientError::Rejected(e)) => return Ok(refused(e)),
        Err(e) => return Err(lost(e)),
    }
    loop {
        match conn.recv().await.map_err(lost)? {
            Some(ServerFrame::ToolConfirmationResponse(r)) if r.correlation_id == id => {
                return Ok(Ended::Approval(r))
            }
            Some(ServerFrame::AskUserResponse(r)) if r.correlation_id == id => {
                return Ok(Ended::Question(r))
            }
            // An error without an id is about the connection (hello), so about this request.
            Some(ServerFrame::Error(e)) if e.correlation_id.as_deref().is_none_or(|c| c == id) => {
                return Ok(refused(e))
            }
            Some(_) => continue,
            None => return Err(lost(ClientError::Closed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_values() {
        assert_eq!(one_line("  a\nb\tc ", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
        assert_eq!(one_line("ééééé", 3).chars().count(), 3);
    }
}
