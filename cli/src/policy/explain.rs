//! `askbus policy explain ID`: why a past request was decided as it was, read from its record
//! in the history (the store file, or the daemon for another uid's store), and what the rules
//! in force now would decide about the same tool call. A rule's decision names the rule; a
//! person's names who and through which path; an end nobody chose (a timeout, no UI, a
//! restart) says so, because none of those is ever an approval.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use askbus::history::HistoryRecord;
use askbus_policy::daemon::{Approval, PolicySet, Sources};
use askbus_policy::loader::Decision;
use askbus_policy::tiers;
use serde_json::{json, Value};

use crate::term::sanitize;

/// `askbus policy explain`'s flags.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The request's correlation id (as `askbus history` lists it)
    id: String,
    /// The store file [default: as askbusd resolves it]
    #[arg(long, value_name = "PATH", conflicts_with = "daemon")]
    store: Option<PathBuf>,
    /// Ask the running daemon for the record instead of reading the store file
    #[arg(long)]
    daemon: bool,
    /// Leave the shipped defaults out when deciding the call again with today's rules
    #[arg(long)]
    no_defaults: bool,
    /// Print one JSON object: {"correlationId", "kind", "reason", "decidedBy", "then", "now"}
    #[arg(long)]
    json: bool,
}

/// What the rules in force now say about a recorded tool call.
#[derive(Debug, Clone, PartialEq)]
enum Now {
    /// A rule decides (allow or deny), as the daemon would, without a person.
    Rule { decision: Decision, rule: Value },
    /// No rule decides: a person is asked.
    AskUser,
    /// The record holds no tool call to decide (a question, or redacted).
    Unknown(&'static str),
}

pub fn run(args: ExplainArgs, socket: &Path) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let record = rt.block_on(crate::history::one(
        &args.id,
        args.store.clone(),
        args.daemon,
        socket,
    ))?;
    let now = decide_now(&record, !args.no_defaults);
    if args.json {
        println!("{}", as_json(&record, &now));
    } else {
        print!("{}", text(&record, &now));
    }
    Ok(ExitCode::SUCCESS)
}

/// The recorded approval decided again by the daemon's tiers as they are now, for the uid
/// that asked (its own user tier), with the request's context (agent, cwd, project).
fn decide_now(r: &HistoryRecord, defaults: bool) -> Now {
    if r.kind != "approval" {
        return Now::Unknown("a question: the policy decides approvals only");
    }
    let Some(call) = &r.tool_call else {
        return Now::Unknown("the tool call was redacted from the record");
    };
    let own_uid = askbus::trust::effective_uid();
    let set = PolicySet::new(
        Sources {
            defaults,
            admin_dir: PathBuf::from(tiers::ADMIN_DIR),
            admin_owner: 0,
        },
        // Only the caller's own user tier is known here; another uid's record is decided
        // with the shared tiers alone.
        move |uid| (uid == own_uid).then(tiers::own_user_dir),
    );
    let ctx = |k: &str| context(r, k);
    let tool_call = call.to_string();
    let verdict = set.decide(&Approval {
        uid: r.producer.uid,
        tool_call: &tool_call,
        cwd: ctx("cwd"),
        project: ctx("project"),
        agent: ctx("agent"),
        ..Approval::default()
    });
    match verdict {
        Some(v) => Now::Rule {
            decision: v.decision,
            rule: v.rule,
        },
        None => Now::AskUser,
    }
}

/// A field of the request's context, as the producer gave it.
fn context<'a>(r: &'a HistoryRecord, key: &str) -> Option<&'a str> {
    r.context.as_ref()?.get(key)?.as_str()
}

/// How the request was decided, from its record: the one line a person reads first.
fn then_line(r: &HistoryRecord) -> String {
    let by = r.decided_by.as_ref();
    let kind = by.and_then(|d| d["kind"].as_str()).unwrap_or("");
    let outcome = r
        .decision
        .as_ref()
        .and_then(|d| d["outcome"].as_str())
        .unwrap_or("");
    match (r.ended_at.is_some(), kind) {
        (false, _) => "still pending: nobody has decided yet".to_owned(),
        (true, "rule") => {
            let rule = by.map(|d| &d["rule"]).unwrap_or(&Value::Null);
            format!(
                "decided by a policy rule ({outcome}): {}",
                describe_rule(rule)
            )
        }
        (true, "human") => {
            let d = by.expect("kind came from it");
            let mut who = String::from("a person");
            if let Some(user) = d["user"].as_str() {
                who = user.to_owned();
            } else if let Some(uid) = d["uid"].as_u64() {
                who = format!("a person (uid {uid})");
            }
            let via = d["via"].as_str().unwrap_or("a client");
            let client = d["client"]
                .as_str()
                .map(|c| format!(", {c}"))
                .unwrap_or_default();
            let node = d["node"]
                .as_str()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            let what = if r.kind == "approval" {
                format!(" ({outcome})")
            } else {
                String::new()
            };
            format!("decided by {who} via {via}{client}{node}{what}: no rule decided it, so a person was asked")
        }
        (true, "timeout") => "nobody decided: it timed out, which is never an approval".to_owned(),
        (true, "no-ui") => {
            "nobody decided: no UI was there to ask, which is never an approval".to_owned()
        }
        (true, "producer") => "the agent withdrew it or went away before anyone decided".to_owned(),
        (true, "shutdown") => {
            "nobody decided: the daemon shut down, which is never an approval".to_owned()
        }
        (true, k) => format!("ended {} (decided by {k})", r.reason),
    }
}

/// A rule as a person reads it: what it decides, for which tool, where it comes from.
fn describe_rule(rule: &Value) -> String {
    let s = |k: &str| rule[k].as_str().unwrap_or("?").to_owned();
    let priority = match &rule["priority"] {
        Value::Number(n) => n.to_string(),
        _ => "?".into(),
    };
    let mut out = format!(
        "{} {} (priority {priority}) from {}",
        s("decision"),
        s("toolName"),
        s("source")
    );
    if let Some(server) = rule["mcpName"].as_str() {
        out.push_str(&format!(", MCP server {server}"));
    }
    if let Some(msg) = rule["denyMessage"].as_str() {
        out.push_str(&format!(", telling the agent {msg:?}"));
    }
    out
}

fn now_line(now: &Now) -> String {
    match now {
        Now::Rule { decision, rule } => format!(
            "the rules in force now would {}: {}",
            decision.as_str(),
            describe_rule(rule)
        ),
        Now::AskUser => "the rules in force now would ask a person (no rule decides it)".into(),
        Now::Unknown(why) => format!("not decided again: {why}"),
    }
}

fn what(r: &HistoryRecord) -> String {
    match &r.tool_call {
        Some(call) => {
            let name = call["name"].as_str().unwrap_or("?");
            match call["args"]["command"].as_str() {
                Some(cmd) => format!("{name}: {cmd}"),
                None => name.to_owned(),
            }
        }
        None if r.kind == "approval" => "(redacted)".into(),
        None => r
            .questions
            .as_ref()
            .and_then(|q| q[0]["question"].as_str())
            .unwrap_or("(redacted)")
            .to_owned(),
    }
}

fn text(r: &HistoryRecord, now: &Now) -> String {
    let ctx = |k: &str| context(r, k).unwrap_or("-");
    format!(
        "{} ({}, asked {} by {} in {})\n  what   {}\n  then   {}\n  now    {}\n",
        sanitize(&r.correlation_id),
        r.kind,
        r.asked_at,
        sanitize(ctx("agent")),
        sanitize(ctx("project")),
        sanitize(&what(r)),
        sanitize(&then_line(r)),
        sanitize(&now_line(now)),
    )
}

fn as_json(r: &HistoryRecord, now: &Now) -> Value {
    let now = match now {
        Now::Rule { decision, rule } => json!({"decision": decision.as_str(), "rule": rule}),
        Now::AskUser => json!({"decision": "ask_user", "rule": null}),
        Now::Unknown(why) => json!({"decision": null, "why": why}),
    };
    json!({
        "correlationId": r.correlation_id,
        "kind": r.kind,
        "reason": r.reason,
        "decision": r.decision,
        "decidedBy": r.decided_by,
        "then": then_line(r),
        "now": now,
    })
}
