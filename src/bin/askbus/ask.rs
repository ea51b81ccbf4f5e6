//! `askbus ask`: asks the questions in a file as a producer and waits for the one answer;
//! the exit status says how it ended, for scripts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::Value;

use askbusd::client::{new_correlation_id, Ask, ClientError, Producer};
use askbusd::protocol::{NoUiPolicy, Outcome, ProducerResponse, RequestContext, ServerFrame};

use crate::term;

/// Exit statuses of `askbus ask`, documented in its help.
pub mod exit {
    pub const DISMISSED: u8 = 1;
    pub const TIMEOUT: u8 = 2;
    pub const NO_UI: u8 = 3;
    pub const REJECTED: u8 = 4;
    pub const UNREACHABLE: u8 = 5;
    pub const ENDED: u8 = 6;
}

pub fn read_questions(file: Option<PathBuf>) -> Result<Value> {
    let text = crate::read_file_or_stdin(file.as_deref())?;
    let value: Value =
        serde_json::from_str(&text).context("the questions file is not valid JSON")?;
    Ok(match value {
        Value::Object(mut obj) if obj.contains_key("questions") => {
            obj.remove("questions").unwrap_or_default()
        }
        other => other,
    })
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
    let producer = Producer::connect(socket, Some(client)).await?;
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
            producer.cancel(&id).await?;
            asked.await
        }
    };
    let response = match response {
        Ok(r) => r,
        Err(ClientError::Rejected(e)) => {
            eprintln!("{}", term::sanitize_lines(&e.message));
            if json {
                let text = serde_json::to_string(&ServerFrame::Error(e))?;
                println!("{}", term::json(&text));
            }
            return Ok(ExitCode::from(exit::REJECTED));
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        let frame = ServerFrame::AskUserResponse(response.clone());
        println!("{}", term::json(&serde_json::to_string(&frame)?));
    } else {
        print_response(&response);
    }
    Ok(ExitCode::from(match response.reason {
        Outcome::Answered => 0,
        Outcome::Dismissed => exit::DISMISSED,
        Outcome::Timeout => exit::TIMEOUT,
        Outcome::NoUi => exit::NO_UI,
        Outcome::Withdrawn | Outcome::Shutdown => exit::ENDED,
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
