//! `askbus pending`: subscribes, lists the pending questions (who asked, headers, options)
//! and exits.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use serde_json::Value;

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::{ServerFrame, UiRequest};

pub async fn run(socket: &Path, json: bool) -> Result<ExitCode> {
    let mut ui = Ui::subscribe(
        socket,
        Some(concat!("askbus-pending/", env!("CARGO_PKG_VERSION"))),
    )
    .await?;
    let mut requests: Vec<UiRequest> = Vec::new();
    while (requests.len() as u64) < ui.pending_at_subscribe() {
        match ui.next().await? {
            Some(UiEvent::Request(r)) => requests.push(r),
            Some(UiEvent::Withdrawn { correlation_id, .. }) => {
                requests.retain(|r| r.correlation_id != correlation_id)
            }
            Some(_) => {}
            None => bail!("askbusd closed the connection"),
        }
    }
    if json {
        let frames: Vec<_> = requests
            .into_iter()
            .map(ServerFrame::AskUserRequest)
            .collect();
        println!("{}", serde_json::to_string_pretty(&frames)?);
        return Ok(ExitCode::SUCCESS);
    }
    if requests.is_empty() {
        println!("No pending questions.");
    }
    for r in &requests {
        print_request(r)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_request(r: &UiRequest) -> Result<()> {
    let p = &r.producer;
    println!(
        "{}  from {} (pid {}, uid {}), {} left",
        r.correlation_id,
        p.client.as_deref().unwrap_or("unnamed agent"),
        p.pid.map_or("?".to_string(), |p| p.to_string()),
        p.uid,
        crate::duration::short(std::time::Duration::from_millis(r.timeout_ms))
    );
    let questions = r
        .questions
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, q) in questions.iter().enumerate() {
        let header = q.get("header").and_then(Value::as_str).unwrap_or("");
        let text = q.get("question").and_then(Value::as_str).unwrap_or("");
        let ty = q.get("type").and_then(Value::as_str).unwrap_or("");
        let multi = q
            .get("multiSelect")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let kind = if multi {
            format!("{ty}, several")
        } else {
            ty.to_owned()
        };
        println!(
            "  [{i}] {header} ({kind}): {}",
            text.replace('\n', "\n      ")
        );
        if ty == "yesno" {
            println!("      - Yes\n      - No");
        } else if let Some(options) = q.get("options").and_then(Value::as_array) {
            for o in options {
                let label = o.get("label").and_then(Value::as_str).unwrap_or("");
                let desc = o.get("description").and_then(Value::as_str).unwrap_or("");
                if desc.is_empty() {
                    println!("      - {label}");
                } else {
                    println!("      - {label}: {desc}");
                }
            }
        }
    }
    println!();
    Ok(())
}
