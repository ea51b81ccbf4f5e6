//! `askbus pending`: subscribes, lists the pending questions (who asked, headers, options)
//! and approvals (the tool, what it would do, the choices offered), oldest first, and exits.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use serde_json::Value;

use askbus::client::{Ui, UiEvent};
use askbus::protocol::{ServerFrame, SubscribeFilter, UiApproval, UiRequest};

use crate::term::{self, sanitize, sanitize_lines};

pub async fn run(socket: &Path, json: bool, filter: &SubscribeFilter) -> Result<ExitCode> {
    // The daemon filters: it replays only the questions the filter matches.
    let mut ui = Ui::subscribe_filtered(
        socket,
        Some(concat!("askbus-pending/", env!("CARGO_PKG_VERSION"))),
        filter,
    )
    .await?;
    // The replay counts questions and approvals alike; both are listed, in its order.
    let mut replayed = 0;
    let mut requests: Vec<ServerFrame> = Vec::new();
    while replayed < ui.pending_at_subscribe() {
        match ui.next().await? {
            Some(UiEvent::Request(r)) => {
                replayed += 1;
                requests.push(ServerFrame::AskUserRequest(r))
            }
            Some(UiEvent::Approval(a)) => {
                replayed += 1;
                requests.push(ServerFrame::ToolConfirmationRequest(*a))
            }
            Some(
                UiEvent::Withdrawn { correlation_id, .. }
                | UiEvent::ApprovalWithdrawn { correlation_id, .. },
            ) => requests.retain(|r| id_of(r) != Some(&correlation_id)),
            Some(_) => {}
            None => bail!("askbusd closed the connection"),
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&requests)?;
        println!("{}", term::json(&text));
        return Ok(ExitCode::SUCCESS);
    }
    if requests.is_empty() {
        println!("No pending questions.");
    }
    for r in &requests {
        match r {
            ServerFrame::AskUserRequest(r) => print_request(r)?,
            ServerFrame::ToolConfirmationRequest(a) => print_approval(a),
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn id_of(frame: &ServerFrame) -> Option<&String> {
    match frame {
        ServerFrame::AskUserRequest(r) => Some(&r.correlation_id),
        ServerFrame::ToolConfirmationRequest(a) => Some(&a.correlation_id),
        _ => None,
    }
}

fn print_header(
    id: &str,
    kind: &str,
    p: &askbus::protocol::ProducerInfo,
    timeout_ms: u64,
    context: Option<&askbus::protocol::RequestContext>,
) {
    println!(
        "{}  {kind}from {} (pid {}, uid {}), {} left",
        sanitize(id),
        sanitize(p.client.as_deref().unwrap_or("unnamed agent")),
        p.pid.map_or("?".to_string(), |p| p.to_string()),
        p.uid,
        crate::duration::short(std::time::Duration::from_millis(timeout_ms))
    );
    if let Some(c) = context {
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
}

/// An approval: the tool, what it would do (by details kind), and how to answer it.
fn print_approval(a: &UiApproval) {
    print_header(
        &a.correlation_id,
        "approval ",
        &a.producer,
        a.timeout_ms,
        a.context.as_ref(),
    );
    let tool = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let server = a
        .server_name
        .as_deref()
        .map(|s| format!(" (server {})", sanitize(s)))
        .unwrap_or_default();
    let kind = a
        .details
        .as_ref()
        .and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("tool call");
    println!("  {} {}{server}", sanitize(kind), sanitize(tool));
    let field = |name: &str| {
        a.details
            .as_ref()
            .and_then(|d| d.get(name))
            .and_then(Value::as_str)
            .map(sanitize_lines)
    };
    let indent = |text: &str| text.replace('\n', "\n      ");
    if let Some(title) = field("title") {
        println!("  title: {}", indent(&title));
    }
    match kind {
        "exec" | "sandbox_expansion" => {
            if let Some(c) = field("command") {
                println!("  $ {}", indent(&c));
            }
            if let Some(p) = a
                .details
                .as_ref()
                .and_then(|d| d.get("additionalPermissions"))
            {
                println!("  permissions: {}", sanitize(&p.to_string()));
            }
        }
        "edit" => {
            if let Some(f) = field("filePath") {
                println!("  file: {f}");
            }
            if let Some(diff) = field("fileDiff") {
                for line in diff.lines() {
                    println!("    {line}");
                }
            }
        }
        "mcp" => {
            let d = a.details.as_ref();
            if let (Some(s), Some(t)) = (field("serverName"), field("toolName")) {
                println!("  {s} → {t}");
            }
            if let Some(args) = d.and_then(|d| d.get("toolArgs")) {
                println!("  arguments: {}", sanitize(&args.to_string()));
            }
        }
        "info" => {
            if let Some(p) = field("prompt") {
                println!("  {}", indent(&p));
            }
            for u in a
                .details
                .as_ref()
                .and_then(|d| d.get("urls"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                println!("  {}", sanitize(u));
            }
        }
        "exit_plan_mode" => {
            if let Some(p) = field("planPath") {
                println!("  plan: {p}");
            }
        }
        "ask_user" => {
            for q in a
                .details
                .as_ref()
                .and_then(|d| d.get("questions"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = q.get("question").and_then(Value::as_str).unwrap_or("");
                println!("  - {}", indent(&sanitize_lines(text)));
            }
        }
        _ => {
            let args = a.tool_call.get("args").cloned().unwrap_or(Value::Null);
            if !args.is_null() {
                println!("  arguments: {}", sanitize(&args.to_string()));
            }
        }
    }
    if let Some(m) = field("systemMessage") {
        println!("  note: {}", indent(&m));
    }
    let allow: Vec<&str> = a
        .outcomes
        .iter()
        .filter(|o| o.confirms())
        .map(|o| o.label())
        .collect();
    let always = a.outcomes.iter().any(|o| is_always(*o));
    println!(
        "  choices: {} · Deny   (askbus answer ID --allow{} | --deny [REASON])",
        allow.join(" · "),
        if always { " [--always]" } else { "" }
    );
    println!();
}

/// The "Allow always" family `--always` picks from.
pub use crate::always::is_always;

fn print_request(r: &UiRequest) -> Result<()> {
    print_header(
        &r.correlation_id,
        "",
        &r.producer,
        r.timeout_ms,
        r.context.as_deref(),
    );
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
