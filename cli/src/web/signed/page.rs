//! The HTML of the signed-link pages: what a request asks (or, redacted, only who waits) and
//! what the link would answer, in words, in the style of the web UI (`/links.css`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use askbus::protocol::{ToolOutcome, UiApproval};
use serde_json::Value;

use super::bus::{Pending, Reply};

/// An approval's outcome as a person reads it.
pub(super) fn outcome_words(o: ToolOutcome) -> &'static str {
    match o {
        ToolOutcome::ProceedOnce => "Allow once",
        ToolOutcome::ProceedAlways => "Allow always (this session)",
        ToolOutcome::ProceedAlwaysAndSave => "Allow always, and save the rule",
        ToolOutcome::ProceedAlwaysServer => "Allow every tool of this server",
        ToolOutcome::ProceedAlwaysTool => "Allow this tool always",
        ToolOutcome::ModifyWithEditor => "Modify in an editor",
        ToolOutcome::Cancel => "Deny",
    }
}

/// Who asks: the context's agent, else the producer's client name.
pub(super) fn asker(
    context: Option<&askbus::protocol::RequestContext>,
    client: Option<&str>,
) -> String {
    context
        .and_then(|c| c.agent.clone())
        .or_else(|| client.map(str::to_owned))
        .unwrap_or_else(|| "An agent".into())
}

/// The request (and the answer the link gives, if any) as HTML, in the web page's classes.
/// `redacted`: who asks and the answer only, nothing of the request's text.
pub(super) fn describe(pending: &Pending, reply: Option<&Reply>, redacted: bool) -> String {
    let mut out = String::from("<div class=dialog>");
    let hidden = "<p class=hint>The details are hidden: this link came from a redacted \
                  notification. Sign in to askbus web on a device you trust to see them.</p>";
    match pending {
        Pending::Question(r) => {
            let agent = asker(r.context.as_deref(), r.producer.client.as_deref());
            let questions = r.questions.as_array().cloned().unwrap_or_default();
            out += &format!(
                "<p class=from><span class=agent>{}</span> asks {}:</p>",
                esc(&agent),
                if questions.len() == 1 {
                    "a question".to_owned()
                } else {
                    format!("{} questions", questions.len())
                }
            );
            if redacted {
                out += hidden;
            }
            for (i, q) in questions.iter().enumerate() {
                let text = q.get("question").and_then(Value::as_str).unwrap_or("");
                let header = q.get("header").and_then(Value::as_str).unwrap_or("");
                out += "<section class=question>";
                if !redacted {
                    out += &format!(
                        "<span class=chip>{}</span><h2 class=qtext>{}</h2>",
                        esc(header),
                        esc(text)
                    );
                    let options = q.get("options").and_then(Value::as_array);
                    if let Some(options) = options.filter(|o| !o.is_empty()) {
                        out += "<ul class=options>";
                        for o in options {
                            let label = o.get("label").and_then(Value::as_str).unwrap_or("");
                            let desc = o.get("description").and_then(Value::as_str).unwrap_or("");
                            out += &format!(
                                "<li class=opt><span class=label>{}</span> <span class=desc>{}</span></li>",
                                esc(label),
                                esc(desc)
                            );
                        }
                        out += "</ul>";
                    }
                }
                match reply {
                    Some(Reply::Answers(a)) => match a.get(&i) {
                        Some(ans) => {
                            out += &format!("<p>Answer: <strong>{}</strong></p>", esc(ans))
                        }
                        None => out += "<p>Answer: <em>(none)</em></p>",
                    },
                    Some(Reply::Dismiss) => {
                        out += "<p>Answer: <strong>dismiss the question</strong></p>"
                    }
                    _ => {}
                }
                out += "</section>";
            }
        }
        Pending::Approval(a) => {
            let agent = asker(a.context.as_ref(), a.producer.client.as_deref());
            out += &format!(
                "<p class=from><span class=agent>{}</span> asks for your approval:</p>",
                esc(&agent)
            );
            if redacted {
                out += hidden;
            } else {
                out += "<div class=approval-body>";
                out += &approval_html(a);
                out += "</div>";
            }
            if let Some(Reply::Decision(o)) = reply {
                out += &format!("<p>Decision: <strong>{}</strong></p>", outcome_words(*o));
                // "Always": the rule askbus writes for it, said before the button.
                if let Some(offer) = crate::always::offer(a, *o) {
                    out += &match offer.rule(false) {
                        Some(r) => format!(
                            "<p class=always-rule>It writes the rule <code>{}</code></p>",
                            esc(&crate::always::describe(r))
                        ),
                        None => format!("<p class=always-rule>{}</p>", esc(&offer.says(false))),
                    };
                }
            }
        }
    }
    out += "</div>";
    out
}

/// What an approval asks, by its details' type: the command, the file and its diff, the MCP
/// tool, the fetch prompt; else the tool call's arguments.
pub(super) fn approval_html(a: &UiApproval) -> String {
    let d = a.details.as_ref();
    let s = |k: &str| {
        d.and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let tool = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("a tool");
    let args = || {
        a.tool_call
            .get("args")
            .map(|v| {
                format!(
                    "<pre class=json>{}</pre>",
                    esc(&serde_json::to_string_pretty(v).unwrap_or_default())
                )
            })
            .unwrap_or_default()
    };
    match d.and_then(|d| d.get("type")).and_then(Value::as_str) {
        Some("exec") => {
            let cmd = if s("command").is_empty() {
                a.tool_call
                    .pointer("/args/command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            } else {
                s("command")
            };
            format!(
                "<p class=kind>Run a shell command</p><pre class=cmd>{}</pre>",
                esc(cmd)
            )
        }
        Some("edit") => {
            let mut out = format!(
                "<p class=kind>Change a file</p><p class=file><strong class=file-name>{}</strong></p>",
                esc(if s("fileName").is_empty() { s("filePath") } else { s("fileName") })
            );
            if !s("filePath").is_empty() {
                out += &format!("<p class=path><code>{}</code></p>", esc(s("filePath")));
            }
            out += "<pre class=diff>";
            for line in s("fileDiff").lines() {
                let class = if line.starts_with("+++") || line.starts_with("---") {
                    "d-meta"
                } else if line.starts_with('+') {
                    "d-add"
                } else if line.starts_with('-') {
                    "d-del"
                } else if line.starts_with("@@") {
                    "d-hunk"
                } else {
                    "d-ctx"
                };
                out += &format!("<span class={class}>{}</span>\n", esc(line));
            }
            out += "</pre>";
            out
        }
        Some("mcp") => format!(
            "<p class=kind>Call an MCP tool</p><p>Tool <code>{}</code> of server <code>{}</code></p>{}",
            esc(if s("toolName").is_empty() { tool } else { s("toolName") }),
            esc(s("serverName")),
            args()
        ),
        Some("info") => {
            let mut out = format!(
                "<p class=kind>Fetch from the web</p><p class=prompt>{}</p>",
                esc(s("prompt"))
            );
            let urls = d.and_then(|d| d.get("urls")).and_then(Value::as_array);
            if let Some(urls) = urls.filter(|u| !u.is_empty()) {
                out += "<ul class=urls>";
                for u in urls.iter().filter_map(Value::as_str) {
                    out += &format!("<li><code>{}</code></li>", esc(u));
                }
                out += "</ul>";
            }
            out
        }
        _ => format!(
            "<p class=kind>Run <code>{}</code></p>{}",
            esc(tool),
            args()
        ),
    }
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A link page, styled by the web page's own stylesheet (`/links.css`, no session needed).
pub(super) fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport \
         content=\"width=device-width, initial-scale=1\"><link rel=stylesheet href=\"/links.css\">\
         <title>askbus: {t}</title><header class=bar><span class=brand>askbus</span></header>\
         <main><div class=dialog-area><h1>{t}</h1>{body}</div></main>\n",
        t = esc(title)
    );
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}
