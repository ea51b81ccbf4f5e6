//! Telegram: the Bot API over outbound HTTPS only. Updates come by long polling
//! (`getUpdates` with an offset, so each update is confirmed once handled and none is lost
//! across a dropped connection or a restart); messages go out with `sendMessage` (HTML parse
//! mode, link previews off) and `editMessageText`, taps are acknowledged with
//! `answerCallbackQuery` (its `show_alert` is the ephemeral "not allowed"), and typed answers
//! are replies to a `force_reply` prompt.
//!
//! Rate limits: a 429's `parameters.retry_after` is waited out and the call made again;
//! network errors and 5xx retry with exponential backoff. The token is part of every URL, so
//! no URL ever reaches a log or an error: reqwest's errors are stripped of theirs.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::card::{Block, Button, User, View};
use super::platform::{
    edited, failure_text, fit, join_blocks, posted, retrying, sender, Backoff, Failure, In, Msg,
    Out, Perform,
};
use super::text::defuse_mentions;

/// Telegram's limit on a message's text (characters after entity parsing).
pub const MAX_TEXT: usize = 4096;
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";

#[derive(Clone)]
pub struct Config {
    /// `https://api.telegram.org`, or a stand-in (tests, self-hosted Bot API servers).
    pub api_base: String,
    pub token: String,
    pub chat: String,
    /// Seconds a `getUpdates` long poll waits.
    pub poll_secs: u64,
    /// The update to start after (the saved cursor).
    pub cursor: Option<u64>,
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(cfg: &Config, timeout: Duration) -> Api {
        Api {
            http: reqwest::Client::builder()
                .timeout(timeout)
                .user_agent(concat!("askbus-chat/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("the HTTP client builds (rustls with bundled roots)"),
            base: format!("{}/bot{}", cfg.api_base.trim_end_matches('/'), cfg.token),
        }
    }

    async fn call(&self, method: &str, body: &Value) -> Result<Value, Failure> {
        let resp = self
            .http
            .post(format!("{}/{method}", self.base))
            .json(body)
            .send()
            .await
            // The URL holds the token: never let it into an error.
            .map_err(|e| Failure::Transient(e.without_url().to_string()))?;
        let status = resp.status();
        let v: Value = match resp.json().await {
            Ok(v) => v,
            Err(e) if status.is_server_error() || status.is_success() => {
                return Err(Failure::Transient(format!(
                    "{method}: HTTP {status}: {}",
                    e.without_url()
                )))
            }
            Err(_) => Value::Null,
        };
        if v.get("ok") == Some(&Value::Bool(true)) {
            return Ok(v.get("result").cloned().unwrap_or(Value::Null));
        }
        let desc = v
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("no description")
            .to_owned();
        let code = v
            .get("error_code")
            .and_then(Value::as_u64)
            .unwrap_or(u64::from(status.as_u16()));
        let msg = format!("{method}: {code} {desc}");
        Err(match code {
            429 => Failure::RetryAfter(Duration::from_secs(
                v.pointer("/parameters/retry_after")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .max(1),
            )),
            401 | 404 => Failure::Unauthorized(msg),
            500..=599 => Failure::Transient(msg),
            _ => Failure::Refused(msg),
        })
    }

    /// `call`, waiting out rate limits and retrying network errors (`platform::retrying`).
    async fn call_retrying(
        &self,
        method: &str,
        body: &Value,
        attempts: u32,
    ) -> Result<Value, Failure> {
        retrying("telegram", method, attempts, || self.call(method, body)).await
    }
}

/// Starts the sender and the poller; the engine's ends of their channels.
pub fn spawn(cfg: Config) -> (mpsc::UnboundedSender<Out>, mpsc::UnboundedReceiver<In>) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let worker = (Api::new(&cfg, Duration::from_secs(30)), cfg.clone());
    tokio::spawn(sender(worker, out_rx, in_tx.clone()));
    tokio::spawn(poller(cfg, in_tx));
    (out_tx, in_rx)
}

/// The sender's side: the API and where to post.
impl Perform for (Api, Config) {
    async fn perform(&mut self, op: Out) -> Option<In> {
        perform(&self.0, &self.1, op).await
    }
}

async fn perform(api: &Api, cfg: &Config, op: Out) -> Option<In> {
    match op {
        Out::Post { key, view } => {
            let (text, markup) = render(&view);
            let mut body = json!({"chat_id": cfg.chat, "text": text, "parse_mode": "HTML",
                "link_preview_options": {"is_disabled": true}});
            if let Some(m) = markup {
                body["reply_markup"] = m;
            }
            let r = api.call_retrying("sendMessage", &body, 8).await;
            posted(key, r, message_id)
        }
        Out::Edit { msg, view } => {
            let (text, markup) = render(&view);
            let body = json!({"chat_id": cfg.chat, "message_id": msg.parse::<i64>().unwrap_or(0),
                "text": text, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true},
                "reply_markup": markup.unwrap_or_else(|| json!({"inline_keyboard": []}))});
            match api.call_retrying("editMessageText", &body, 8).await {
                Err(Failure::Refused(e)) if e.contains("message is not modified") => None,
                r => edited(r),
            }
        }
        Out::Toast { reply, text, alert } => {
            let mut body = json!({"callback_query_id": reply});
            if !text.is_empty() {
                body["text"] = Value::String(text);
                body["show_alert"] = Value::Bool(alert);
            }
            // A tap's spinner stops by itself after a while: two tries are enough.
            if let Err(e) = api.call_retrying("answerCallbackQuery", &body, 2).await {
                eprintln!("askbus chat: cannot answer a tap: {}", failure_text(e));
            }
            None
        }
        Out::Prompt {
            key,
            reply_to,
            text,
            tap,
        } => {
            if let Some(id) = tap {
                let _ = api
                    .call_retrying("answerCallbackQuery", &json!({"callback_query_id": id}), 2)
                    .await;
            }
            let body = json!({"chat_id": cfg.chat, "text": escape(&text), "parse_mode": "HTML",
                "reply_markup": {"force_reply": true, "input_field_placeholder": "Your answer"},
                "reply_parameters": {"message_id": reply_to.parse::<i64>().unwrap_or(0),
                    "allow_sending_without_reply": true}});
            match api.call_retrying("sendMessage", &body, 8).await {
                Ok(r) => Some(In::Prompted {
                    key,
                    msg: message_id(&r)?,
                }),
                Err(e) => {
                    eprintln!("askbus chat: cannot post a prompt: {}", failure_text(e));
                    None
                }
            }
        }
    }
}

fn message_id(r: &Value) -> Option<Msg> {
    r.get("message_id")
        .and_then(Value::as_i64)
        .map(|i| i.to_string())
}

async fn poller(cfg: Config, tx: mpsc::UnboundedSender<In>) {
    let api = Api::new(&cfg, Duration::from_secs(cfg.poll_secs + 15));
    let mut offset = cfg.cursor.map(|c| c + 1);
    let mut backoff = Backoff::default();
    let mut was_down = false;
    loop {
        let mut body = json!({"timeout": cfg.poll_secs,
            "allowed_updates": ["message", "callback_query"]});
        if let Some(o) = offset {
            body["offset"] = json!(o);
        }
        match api.call("getUpdates", &body).await {
            Ok(updates) => {
                if was_down {
                    eprintln!("askbus chat: telegram reachable again");
                    was_down = false;
                }
                backoff = Backoff::default();
                for u in updates.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    let Some(id) = u.get("update_id").and_then(Value::as_u64) else {
                        continue;
                    };
                    offset = Some(id + 1);
                    if let Some(event) = update(&cfg, id, u) {
                        if tx.send(event).is_err() {
                            return;
                        }
                    }
                }
            }
            Err(Failure::RetryAfter(d)) => tokio::time::sleep(d).await,
            Err(Failure::Unauthorized(e)) => {
                let _ = tx.send(In::Fatal(e));
                return;
            }
            Err(e) => {
                let wait = backoff.next();
                if !was_down {
                    eprintln!("askbus chat: telegram: {}; retrying", failure_text(e));
                    was_down = true;
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

fn user(from: Option<&Value>) -> User {
    let s = |k: &str| {
        from.and_then(|f| f.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let mut name = [s("first_name"), s("last_name")]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if !s("username").is_empty() {
        name = format!("{name} @{}", s("username")).trim().to_owned();
    }
    User {
        id: from
            .and_then(|f| f.get("id"))
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default(),
        name,
    }
}

fn same_chat(cfg: &Config, chat: Option<&Value>) -> bool {
    chat.and_then(|c| c.get("id")).is_some_and(|id| match id {
        Value::String(s) => *s == cfg.chat,
        other => other.as_i64().is_some_and(|n| n.to_string() == cfg.chat),
    })
}

fn update(cfg: &Config, id: u64, u: &Value) -> Option<In> {
    if let Some(q) = u.get("callback_query") {
        let message = q.get("message");
        return Some(In::Tap {
            cursor: Some(id),
            reply: q.get("id")?.as_str()?.to_owned(),
            user: user(q.get("from")),
            data: q
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            msg: message
                .filter(|m| same_chat(cfg, m.get("chat")))
                .and_then(|m| m.get("message_id"))
                .and_then(Value::as_i64)
                .map(|i| i.to_string()),
        });
    }
    let m = u.get("message")?;
    if !same_chat(cfg, m.get("chat")) {
        return None;
    }
    Some(In::Reply {
        cursor: Some(id),
        user: user(m.get("from")),
        reply_to: m
            .pointer("/reply_to_message/message_id")
            .and_then(Value::as_i64)
            .map(|i| i.to_string()),
        text: m.get("text").and_then(Value::as_str)?.to_owned(),
        ack: None,
    })
}

/// HTML parse mode's escapes (`&`, `<`, `>`, and `"` for attributes), then mentions defused.
fn escape(s: &str) -> String {
    defuse_mentions(&escape_attr(s))
}

fn escape_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The message text (HTML) and its inline keyboard, if it has buttons.
pub fn render(view: &View<String>) -> (String, Option<Value>) {
    let mut blocks = view.blocks.clone();
    fit(&mut blocks, MAX_TEXT - 96);
    let text = join_blocks(&blocks, |b| match b {
        Block::Title(s) => format!("<b>{}</b>", escape(s)),
        Block::Meta(s) | Block::Note(s) => format!("<i>{}</i>", escape(s)),
        Block::Text(s) => escape(s),
        Block::Code(s) => format!("<pre>{}</pre>", escape(s)),
    });
    let rows: Vec<Value> = view
        .rows
        .iter()
        .filter(|r| !r.is_empty())
        .map(|row| {
            Value::Array(
                row.iter()
                    .map(|b| match b {
                        Button::Tap { label, action } => {
                            json!({"text": label, "callback_data": action})
                        }
                        Button::Link { label, url } => json!({"text": label, "url": url}),
                    })
                    .collect(),
            )
        })
        .collect();
    let markup = (!rows.is_empty()).then(|| json!({ "inline_keyboard": rows }));
    (text, markup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_cannot_be_injected() {
        let view: View<String> = View {
            blocks: vec![Block::Text("<a href=\"x\">click</a> @channel & <b>".into())],
            rows: vec![],
        };
        let (text, markup) = render(&view);
        assert_eq!(
            text,
            "&lt;a href=&quot;x&quot;&gt;click&lt;/a&gt; @\u{2060}channel &amp; &lt;b&gt;"
        );
        assert!(markup.is_none());
    }
}
