//! `askbus pending`: subscribes, lists the pending questions (who asked, headers, options)
//! and exits.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use serde_json::Value;

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::{ServerFrame, SubscribeFilter, UiRequest};

use crate::term::{self, sanitize, sanitize_lines};

pub async fn run(socket: &Path, json: bool, filter: &SubscribeFilter) -> Result<ExitCode> {
    // The daemon filters: it replays only the questions the filter matches.
    let mut ui = Ui::subscribe_filtered(
        socket,
        Some(concat!("askbus-pending/", env!("CARGO_PKG_VERSION"))),
        filter,
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
        let text = serde_json::to_string_pretty(&frames)?;
        println!("{}", term::json(&text));
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
        sanitize(&r.correlation_id),
        sanitize(p.client.as_deref().unwrap_or("unnamed agent")),
        p.pid.map_or("?".to_string(), |p| p.to_string()),
        p.uid,
        crate::duration::short(std::time::Duration::from_millis(r.timeout_ms))
    );
    if let Some(c) = &r.context {
        let about: Vec<String> = [
            ("project", &c.project),
            ("agent", &c.agent),
            ("session", &c.session),
            ("cwd", &c.cwd),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.as_deref().map(|v| format!("{name} {}", sanitize(v))))
        .collect();
        if !about.is_empty() {
            println!("  {}", about.join(" · "));
        }
        if let Some(title) = &c.title {
            println!("  title: {}", sanitize(title));
        }
    }
    let questions = r
        .questions
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, q) in questions.iter().enumerate() {
        let header = sanitize(q.get("header").and_then(Value::as_str).unwrap_or(""));
        let text = sanitize_lines(q.get("question").and_then(Value::as_str).unwrap_or(""));
        let ty = sanitize(q.get("type").and_then(Value::as_str).unwrap_or(""));
        let multi = q
            .get("multiSelect")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let kind = if multi {
            format!("{ty}, several")
        } else {
            ty.to_string()
        };
        println!(
            "  [{i}] {header} ({kind}): {}",
            text.replace('\n', "\n      ")
        );
        if ty == "yesno" {
            println!("      - Yes\n      - No");
        } else if let Some(options) = q.get("options").and_then(Value::as_array) {
            for o in options {
                let label = sanitize(o.get("label").and_then(Value::as_str).unwrap_or(""));
                let desc = sanitize(o.get("description").and_then(Value::as_str).unwrap_or(""));
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
