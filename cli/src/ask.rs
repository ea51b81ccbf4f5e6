//! `askbus ask`: asks the questions in a file as a producer and waits for the one answer;
//! the exit status says how it ended, for scripts (every failure has its own status, apart
//! from the outcomes).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use askbus::client::{new_correlation_id, Ask, ClientError, Connection, Producer};
use askbus::protocol::{NoUiPolicy, Outcome, ProducerResponse, RequestContext, ServerFrame};

use crate::fail::{exit, Failure};
use crate::term;

pub fn read_questions(file: Option<PathBuf>) -> Result<Value> {
    let text =
        crate::read_file_or_stdin(file.as_deref()).map_err(|e| Failure::new(exit::BAD_FILE, e))?;
    let value: Value = serde_json::from_str(&text)
        .context("the questions file is not valid JSON")
        .map_err(|e| Failure::new(exit::BAD_FILE, e))?;
    Ok(match value {
        Value::Object(mut obj) if obj.contains_key("questions") => {
            obj.remove("questions").unwrap_or_default()
        }
        other => other,
    })
}

/// The exit status for a client error while asking.
pub fn status_of(e: &ClientError) -> u8 {
    match e {
        ClientError::Connect { .. }
        | ClientError::Untrusted(_)
        | ClientError::Unreachable { .. } => exit::UNREACHABLE,
        ClientError::Io(_) | ClientError::Closed => exit::LOST,
        ClientError::Protocol(_) => exit::PROTOCOL,
        ClientError::Rejected(_) => exit::REJECTED,
    }
}

pub async fn run(
    socket: &Path,
    questions: Value,
    timeout_ms: Option<u64>,
    no_ui: Option<NoUiPolicy>,
    context: Option<RequestContext>,
    json: bool,
    client: &str,
) -> Result<ExitCode> {
    // Installed before asking, so a Ctrl-C at any moment withdraws the question.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot handle SIGINT")?;
    let failed = |e: ClientError| {
        let code = status_of(&e);
        Failure::new(code, e)
    };
    if std::io::stderr().is_terminal() && no_ui != Some(NoUiPolicy::Reject) {
        // Said before asking, so it is never printed after the answer.
        if let Some(line) = waiting_hint(socket, timeout_ms).await.map_err(failed)? {
            eprintln!("{line}");
        }
    }
    let producer = Producer::connect(socket, Some(client))
        .await
        .map_err(|e| match e {
            // Nothing was asked yet: askbusd went away during the handshake (it was killed
            // or restarted), which is an unreachable daemon, not a lost question.
            ClientError::Closed | ClientError::Io(_) => Failure::new(
                exit::UNREACHABLE,
                anyhow::Error::new(e)
                    .context("askbusd went away while connecting; nothing was asked"),
            ),
            e => failed(e),
        })?;
    let id = new_correlation_id();
    let request = Ask {
        questions,
        correlation_id: Some(id.clone()),
        timeout_ms,
        no_ui,
        context,
    };
    let asked = producer.ask(request);
    tokio::pin!(asked);
    let response = tokio::select! {
        r = &mut asked => r,
        _ = interrupt.recv() => {
            // Withdraw the question so no UI keeps showing it, then report how it ended.
            producer.cancel(&id).await.map_err(failed)?;
            asked.await
        }
    };
    let response = match response {
        Ok(r) => r,
        Err(ClientError::Rejected(e)) => {
            eprintln!("{}", crate::term::sanitize_lines(&e.message));
            if let Some(hint) = crate::explain::rejection(&e.message) {
                eprintln!("{hint}");
            }
            if json {
                let text = serde_json::to_string(&ServerFrame::Error(e))?;
                println!("{}", term::json(&text));
            }
            return Ok(ExitCode::from(exit::REJECTED));
        }
        Err(ClientError::Closed | ClientError::Io(_)) => {
            return Err(Failure::new(
                exit::LOST,
                anyhow::anyhow!(
                    "the connection to askbusd was lost before the answer came \
                     (askbusd stopped or crashed); the question is gone"
                ),
            )
            .into())
        }
        // The question was taken, then its daemon went away and none took the resend back
        // before the deadline: the question was lost, not never asked.
        Err(ClientError::Unreachable { .. }) => {
            return Err(Failure::new(
                exit::LOST,
                anyhow::anyhow!(
                    "askbusd was lost before the answer came, and no askbusd took the \
                     question back before its deadline; the question is gone"
                ),
            )
            .into())
        }
        Err(e) => return Err(failed(e).into()),
    };
    if json {
        let frame = ServerFrame::AskUserResponse(response.clone());
        println!("{}", term::json(&serde_json::to_string(&frame)?));
    } else {
        print_response(&response);
    }
    Ok(ExitCode::from(match response.reason {
        Outcome::Answered => exit::OK,
        Outcome::Dismissed => exit::DISMISSED,
        Outcome::Timeout => exit::TIMEOUT,
        Outcome::NoUi => exit::NO_UI,
        Outcome::Withdrawn | Outcome::Shutdown => exit::ENDED,
    }))
}

/// The line a person at a terminal reads while `ask` waits: for how long, and whether any UI
/// can answer (with the commands that start one). From the welcome and the live counters of
/// a short-lived second connection.
async fn waiting_hint(
    socket: &Path,
    timeout_ms: Option<u64>,
) -> Result<Option<String>, ClientError> {
    let mut conn = Connection::connect(socket).await?;
    let Ok(ServerFrame::Welcome {
        default_timeout_ms,
        max_timeout_ms,
        ..
    }) = conn.hello(None).await
    else {
        return Ok(None);
    };
    let wait = timeout_ms.map_or(default_timeout_ms, |t| t.min(max_timeout_ms));
    let stats = conn.stats().await.ok();
    let uis = stats
        .as_ref()
        .and_then(|s| s.get("uis").and_then(Value::as_u64));
    // Federated: the other nodes' UIs show the question too (this node cannot count them).
    let nodes: Vec<String> = stats
        .as_ref()
        .and_then(|s| s.get("federation"))
        .filter(|f| f.get("connected") == Some(&Value::Bool(true)))
        .and_then(|f| f.get("nodes").and_then(Value::as_array))
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|n| term::sanitize(n).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let wait = crate::duration::short(Duration::from_millis(wait));
    Ok(Some(match uis {
        Some(0) if !nodes.is_empty() => format!(
            "askbus: waiting up to {wait} for an answer; no UI is connected to this askbusd, \
             but the UIs of the other federated node{} ({}) show it too. Ctrl-C withdraws \
             the question.",
            if nodes.len() == 1 { "" } else { "s" },
            nodes.join(", ")
        ),
        Some(0) => format!(
            "askbus: waiting up to {wait} for an answer; no UI is connected to askbusd. \
             Answer in another terminal with `askbus ui`, in a browser with `askbus web`, \
             or with `askbus pending` and `askbus answer`. Ctrl-C withdraws the question."
        ),
        Some(1) => format!(
            "askbus: waiting up to {wait} for an answer from the UI connected to askbusd. \
             Ctrl-C withdraws the question."
        ),
        Some(n) => format!(
            "askbus: waiting up to {wait} for an answer from one of the {n} UIs connected \
             to askbusd. Ctrl-C withdraws the question."
        ),
        None => {
            format!("askbus: waiting up to {wait} for an answer. Ctrl-C withdraws the question.")
        }
    }))
}

fn print_response(r: &ProducerResponse) {
    match r.reason {
        // The reference's own rendering of the answers, as the user would see it (the
        // answers are the UI's text: shown, never obeyed).
        Outcome::Answered => println!("{}", term::sanitize_lines(&r.result.return_display)),
        _ => eprintln!("{}", term::sanitize_lines(&r.result.llm_content)),
    }
}
