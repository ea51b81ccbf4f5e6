//! Asking through askbusd for one hook call: the request frame (the agent's approval or
//! questions, the timeout, the no-UI policy, the context), the one exchange on one
//! connection, and how the reply (or its absence) becomes a [`Verdict`] with the [`Cause`]
//! the policy flags act on. Only a person's explicit, consistent approval of an outcome that
//! was offered allows.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Map, Value};

use askbus::client::{new_correlation_id, ClientError, Connection};
use askbus::protocol::{
    ApprovalResponse, ClientFrame, NoUiPolicy, Outcome, ProducerResponse, ServerFrame, ToolOutcome,
    PROTOCOL_VERSION,
};

use super::agent::{AgentHook, Event, Request, Verdict};
use super::{one_line, Cause, HookArgs, NoUi};

/// Asks and waits; how it ended, as a verdict (before the flags decide on handing it back),
/// and why nobody decided if nobody did.
pub(super) async fn decide(
    socket: &Path,
    args: &HookArgs,
    hook: &dyn AgentHook,
    event: &Event,
) -> (Verdict, Cause) {
    let request = hook.request(event);
    let id = new_correlation_id();
    let timeout_ms = args.timeout_ms.unwrap_or_else(|| hook.default_timeout_ms());
    let mut frame = Map::new();
    let (title, expect) = match request {
        Request::Approval {
            fields,
            title,
            offered,
        } => {
            frame.insert("type".into(), "tool-confirmation-request".into());
            frame.insert("correlationId".into(), id.clone().into());
            frame.extend(fields);
            (title, Expect::Approval(offered))
        }
        Request::Questions {
            questions,
            title,
            count,
        } => {
            frame.insert("type".into(), "ask-user-request".into());
            frame.insert("correlationId".into(), id.clone().into());
            frame.insert("questions".into(), questions);
            (title, Expect::Answers(count))
        }
    };
    frame.insert("timeoutMs".into(), timeout_ms.into());
    let no_ui = match args.no_ui {
        NoUi::Ask | NoUi::Reject => NoUiPolicy::Reject,
        NoUi::Wait => NoUiPolicy::Wait,
    };
    frame.insert("noUi".into(), no_ui.as_str().into());
    frame.insert(
        "context".into(),
        Value::Object(context(hook, event, &title)),
    );
    let payload = Bytes::from(serde_json::to_vec(&Value::Object(frame)).expect("JSON serializes"));
    let undecided = |why: String, cause| {
        (
            Verdict::Undecided {
                why,
                hand_back: false,
            },
            cause,
        )
    };
    match exchange(socket, &args.client, payload, &id).await {
        Ok(Ended::Approval(r)) => match expect {
            Expect::Approval(offered) => approval_verdict(r, &offered),
            Expect::Answers(_) => undecided(
                contradictory("an approval's reply".into()),
                Cause::Contradictory,
            ),
        },
        Ok(Ended::Question(r)) => match expect {
            Expect::Answers(count) => question_verdict(r, count),
            Expect::Approval(_) => undecided(
                contradictory("a question's reply".into()),
                Cause::Contradictory,
            ),
        },
        Ok(Ended::Refused { code, message }) => undecided(
            format!(
                "askbusd refused the request ({code}: {message}), so the tool call was not \
                 approved."
            ),
            Cause::Other,
        ),
        Err(e @ ExchangeError::Unreachable { .. }) => undecided(
            format!("{e}, so the tool call was not approved."),
            Cause::NoUi,
        ),
        Err(e) => undecided(
            format!("{e}, so the tool call was not approved."),
            Cause::Other,
        ),
    }
}

/// What a reply must be to decide the request: an approval of one of the outcomes offered,
/// or answers to at most this many questions.
enum Expect {
    Approval(Vec<ToolOutcome>),
    Answers(usize),
}

fn contradictory(what: String) -> String {
    format!("askbusd sent {what} that contradicts the request, so the tool call was not approved.")
}

fn approval_verdict(r: ApprovalResponse, offered: &[ToolOutcome]) -> (Verdict, Cause) {
    let proceeds = !matches!(
        r.outcome,
        ToolOutcome::Cancel | ToolOutcome::ModifyWithEditor
    );
    match r.reason {
        // Only a consistent approval of an outcome the request offered allows.
        Outcome::Answered if r.confirmed && proceeds && offered.contains(&r.outcome) => (
            Verdict::Allow {
                always: r.outcome != ToolOutcome::ProceedOnce,
            },
            Cause::Other,
        ),
        Outcome::Answered if r.confirmed => (
            Verdict::Undecided {
                why: contradictory(format!(
                    "an approval with outcome {:?}{}",
                    r.outcome.as_str(),
                    if proceeds {
                        ", which was not offered,"
                    } else {
                        ""
                    }
                )),
                hand_back: false,
            },
            Cause::Contradictory,
        ),
        Outcome::Answered => (
            Verdict::Deny {
                reason: match r.message.as_deref().map(str::trim) {
                    Some(m) if !m.is_empty() => format!("The user denied this tool call: {m}"),
                    _ => "The user denied this tool call.".to_owned(),
                },
            },
            Cause::Other,
        ),
        // The daemon words every other ending for the agent.
        reason => (
            Verdict::Undecided {
                why: r.message.unwrap_or_else(|| {
                    format!(
                        "The approval ended ({}), so the tool call was not approved.",
                        reason.as_str()
                    )
                }),
                hand_back: false,
            },
            if reason == Outcome::NoUi {
                Cause::NoUi
            } else {
                Cause::Other
            },
        ),
    }
}

fn question_verdict(r: ProducerResponse, count: usize) -> (Verdict, Cause) {
    let in_range = r.answers.keys().all(|i| *i < count);
    match r.reason {
        Outcome::Answered if !r.cancelled && in_range => (
            Verdict::Answers(
                r.answers
                    .iter()
                    .map(|(i, a)| (i.to_string(), Value::String(a.clone())))
                    .collect(),
            ),
            Cause::Other,
        ),
        Outcome::Answered if !r.cancelled => (
            Verdict::Undecided {
                why: contradictory("answers to questions it did not ask".into()),
                hand_back: false,
            },
            Cause::Contradictory,
        ),
        // The reference's text for how it ended (dismissed, timeout, …), which tells the model
        // to carry on without an answer.
        reason => (
            Verdict::Undecided {
                why: r.result.llm_content,
                hand_back: false,
            },
            if reason == Outcome::NoUi {
                Cause::NoUi
            } else {
                Cause::Other
            },
        ),
    }
}

/// The request's `context`: which agent, its session, the project and cwd, a title, and the
/// agent's approval mode and interactivity when its hook input says them.
/// Each value is made one line and cut to what askbusd accepts.
fn context(hook: &dyn AgentHook, event: &Event, title: &str) -> Map<String, Value> {
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
        ("agent", Some(hook.context_name().to_owned()), 256),
        ("session", event.session.clone(), 256),
        ("project", project, 128),
        ("cwd", Some(cwd), 4096),
        ("title", Some(title.to_owned()), 256),
    ] {
        if let Some(v) = value.map(|v| one_line(&v, max)).filter(|v| !v.is_empty()) {
            ctx.insert(name.into(), v.into());
        }
    }
    // What the daemon's policy rules with `modes` and `interactive` match.
    if let Some(mode) = event.approval_mode {
        ctx.insert("approvalMode".into(), mode.into());
    }
    if let Some(interactive) = event.interactive {
        ctx.insert("interactive".into(), interactive.into());
    }
    ctx
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
    let refused = |e: askbus::protocol::ErrorFrame| Ended::Refused {
        code: e.code.to_string(),
        message: e.message,
    };
    let hello = ClientFrame::Hello {
        via: None,
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
