//! Asking through askbusd for one hook call: the request frame (the agent's approval or
//! questions, the timeout, the no-UI policy, the context), the exchange (resumed under the
//! same id across a daemon restart), and how the reply (or its absence) becomes a [`Verdict`] with the [`Cause`]
//! the policy flags act on. Only a person's explicit, consistent approval of an outcome that
//! was offered allows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::time::Instant;

use askbus::client::{new_correlation_id, Backoff, ClientError, Connection};
use askbus::protocol::{
    ApprovalResponse, ClientFrame, ErrorCode, NoUiPolicy, Outcome, ProducerResponse, ServerFrame,
    ToolOutcome, PROTOCOL_VERSION,
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
    // A resend after a restart is bounded by the request's own timeout (and a little for the
    // daemon's own end of it to arrive first).
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.saturating_add(2_000));
    match exchange(socket, &args.client, payload, &id, deadline).await {
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

/// The exchange, resumed across a daemon restart: `hello` and the request written back to
/// back on one connection (no round trip before the request is on the socket), then the wait
/// for the request's one terminal frame. When the connection drops without that frame (a
/// daemon with a store stops or crashes and keeps the request pending), the daemon answers
/// `store-unavailable` (transient), or refuses a resend as `duplicate-correlation-id` (the
/// dropped connection's copy is still held), the same request is sent again under the same id
/// on the shared [`Backoff`] until `deadline`: a daemon with a store re-attaches it (its
/// original deadline stands), so a restart is no longer a reason to deny. A `shutdown`
/// answer (a daemon without a store: protocol v1, the request is gone) still denies.
async fn exchange(
    socket: &Path,
    client: &str,
    request: Bytes,
    id: &str,
    deadline: Instant,
) -> Result<Ended, ExchangeError> {
    let lost = |source| ExchangeError::Lost {
        path: socket.to_owned(),
        source,
    };
    let mut conn = Connection::connect(socket).await.map_err(|e| match e {
        ClientError::Connect { path, source } => ExchangeError::Unreachable { path, source },
        other => lost(other),
    })?;
    let mut backoff = Backoff::default();
    let mut resend = false;
    loop {
        let why = match attempt(&mut conn, client, request.clone(), id, resend).await {
            Ok(Attempt::Ended(ended)) => return Ok(ended),
            Ok(Attempt::Again(why)) => why,
            Err(e) => e,
        };
        resend = true;
        conn = loop {
            let delay = backoff.next_delay();
            if Instant::now() + delay >= deadline {
                return Err(lost(why));
            }
            tokio::time::sleep(delay).await;
            if let Ok(c) = Connection::connect(socket).await {
                break c;
            }
        };
        backoff.reset();
    }
}

/// How one connection's exchange ended.
enum Attempt {
    Ended(Ended),
    /// Ask again (the next daemon, or this one once it can take it).
    Again(ClientError),
}

async fn attempt(
    conn: &mut Connection,
    client: &str,
    request: Bytes,
    id: &str,
    resend: bool,
) -> Result<Attempt, ClientError> {
    let again = |e: askbus::protocol::ErrorFrame| {
        let code = e.code.known();
        let transient = code == Some(ErrorCode::StoreUnavailable)
            || (resend && code == Some(ErrorCode::DuplicateCorrelationId));
        if transient {
            Attempt::Again(ClientError::Rejected(e))
        } else {
            Attempt::Ended(Ended::Refused {
                code: e.code.to_string(),
                message: e.message,
            })
        }
    };
    let hello = ClientFrame::Hello {
        via: None,
        protocol: PROTOCOL_VERSION,
        client: Some(client),
    };
    for sent in [conn.send(&hello).await, conn.send_raw(request).await] {
        match sent {
            Ok(()) => {}
            Err(ClientError::Rejected(e)) => return Ok(again(e)),
            Err(e) => return Err(e),
        }
    }
    loop {
        match conn.recv().await? {
            Some(ServerFrame::ToolConfirmationResponse(r)) if r.correlation_id == id => {
                return Ok(Attempt::Ended(Ended::Approval(r)))
            }
            Some(ServerFrame::AskUserResponse(r)) if r.correlation_id == id => {
                return Ok(Attempt::Ended(Ended::Question(r)))
            }
            // An error without an id is about the connection (hello), so about this request.
            Some(ServerFrame::Error(e)) if e.correlation_id.as_deref().is_none_or(|c| c == id) => {
                return Ok(again(e))
            }
            Some(_) => continue,
            None => return Err(ClientError::Closed),
        }
    }
}
