//! Slack: Socket Mode and the Web API, over outbound connections only. Events come over a
//! WebSocket whose URL `apps.connections.open` hands out for the app-level token (`xapp-…`);
//! every envelope is acknowledged (`{"envelope_id": …}`) as soon as it is read, before it is
//! handled, and an envelope seen before (Slack retries one whose ack it missed) is acked again
//! but applied once. A `disconnect` message (Slack refreshes connections every few hours), a
//! closed socket or a silent one (no frame for [`SILENT`] after our ping) opens a new
//! connection, with backoff when that fails.
//!
//! Messages are Block Kit: every piece of text is a `plain_text` object (no mrkdwn: a question
//! cannot format itself into a link, a fake button or a mention), code is a `rich_text`
//! preformatted block, buttons carry the sealed callback data as their `value`. Messages are
//! posted with `chat.postMessage` and edited with `chat.update` (the outcome has no actions
//! block: nothing stays tappable); a refused tap gets `chat.postEphemeral` (only that person
//! sees it); a typed answer or a deny reason is a modal (`views.open` with the tap's
//! `trigger_id`), whose `view_submission` comes back as a reply.
//!
//! Rate limits: a 429's `Retry-After` is waited out and the call made again; each method also
//! spends from a bucket sized to its documented tier (`chat.postMessage` about one a second per
//! channel, `chat.update` Tier 3, `chat.postEphemeral` and `views.open` Tier 4), so a burst is
//! spread instead of refused. The tokens travel in `Authorization` headers only, never in a
//! URL, a log line or an error.
//!
//! This module owns the Web API (its calls, the buckets, what each engine op becomes);
//! `socket` the Socket Mode connection and the events it brings, `blocks` the Block Kit
//! rendering of a card.

mod blocks;
mod socket;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::card::{Block, Button, View};
use super::platform::{
    edited, failure_text, fit, modal_tap, posted, retrying, sender, Backoff, Failure, In, Out,
    Perform, Seen,
};
use super::text::clip;
use blocks::{escape, plain, render};
use socket::socket;

pub const DEFAULT_API_BASE: &str = "https://slack.com/api";
/// What a message shows, at most (Slack's own limits are per block; this keeps it readable).
const MAX_TEXT: usize = 3900;
/// Slack's limits: blocks per message, characters per section, header, button label, and
/// elements per actions block and context block.
const MAX_BLOCKS: usize = 50;
const MAX_SECTION: usize = 3000;
const MAX_HEADER: usize = 150;
const MAX_LABEL: usize = 75;
const MAX_ACTIONS: usize = 25;
const MAX_CONTEXT: usize = 10;
/// A socket that says nothing this long after our ping is dead: open another.
const SILENT: Duration = Duration::from_secs(60);
const PING_EVERY: Duration = Duration::from_secs(30);
/// The modal that asks for a typed reply.
const REPLY_CALLBACK: &str = "askbus-reply";

#[derive(Clone)]
pub struct Config {
    /// `https://slack.com/api`, or a stand-in (tests).
    pub api_base: String,
    /// The app-level token (`xapp-…`, scope `connections:write`): opens the socket.
    pub app_token: String,
    /// The bot token (`xoxb-…`, scope `chat:write`): posts and edits.
    pub bot_token: String,
    /// A channel id (`C…`), or a user id (`U…`) for a direct message from the bot.
    pub channel: String,
}

/// A method's share of Slack's rate limits: `cap` calls at once, `per_sec` sustained.
struct Bucket {
    tokens: f64,
    cap: f64,
    per_sec: f64,
    at: Instant,
}

impl Bucket {
    fn new(cap: f64, per_sec: f64) -> Bucket {
        Bucket {
            tokens: cap,
            cap,
            per_sec,
            at: Instant::now(),
        }
    }

    /// How long to wait before the next call (zero when one may go now); spends it.
    fn take(&mut self) -> Duration {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.per_sec).min(self.cap);
        self.at = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.per_sec)
        }
    }
}

struct Api {
    http: reqwest::Client,
    base: String,
    /// Behind a lock so calls take `&self` (the sender and the socket each have their own
    /// `Api`; the lock is never contended across an await).
    buckets: Mutex<HashMap<&'static str, Bucket>>,
}

impl Api {
    fn new(base: &str) -> Api {
        let tiers = [
            // "1 per second per channel, short bursts allowed".
            ("chat.postMessage", Bucket::new(8.0, 1.0)),
            // Tier 3: 50+ per minute.
            ("chat.update", Bucket::new(10.0, 50.0 / 60.0)),
            // Tier 4: 100+ per minute.
            ("chat.postEphemeral", Bucket::new(10.0, 100.0 / 60.0)),
            ("views.open", Bucket::new(10.0, 100.0 / 60.0)),
            // Tier 1: 1+ per minute (a reconnect storm must not get the app refused).
            ("apps.connections.open", Bucket::new(3.0, 1.0 / 60.0)),
        ];
        Api {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .user_agent(concat!("askbus-chat/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("the HTTP client builds (rustls with bundled roots)"),
            base: base.trim_end_matches('/').to_owned(),
            buckets: Mutex::new(tiers.into_iter().collect()),
        }
    }

    async fn call(
        &self,
        method: &'static str,
        token: &str,
        body: &Value,
    ) -> Result<Value, Failure> {
        let wait = self
            .buckets
            .lock()
            .expect("the bucket lock is never poisoned")
            .get_mut(method)
            .map_or(Duration::ZERO, Bucket::take);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let resp = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .map_err(|e| Failure::Transient(format!("{method}: {}", e.without_url())))?;
        let status = resp.status();
        if status.as_u16() == 429 {
            let secs = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(1);
            return Err(Failure::RetryAfter(Duration::from_secs(secs.max(1))));
        }
        if status.is_server_error() {
            return Err(Failure::Transient(format!("{method}: HTTP {status}")));
        }
        let v: Value = resp.json().await.map_err(|e| {
            Failure::Transient(format!("{method}: HTTP {status}: {}", e.without_url()))
        })?;
        if v.get("ok") == Some(&Value::Bool(true)) {
            return Ok(v);
        }
        let error = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no error given")
            .to_owned();
        let msg = format!("{method}: {error}");
        Err(match error.as_str() {
            "ratelimited" | "rate_limited" => Failure::RetryAfter(Duration::from_secs(1)),
            "invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "token_revoked"
            | "token_expired"
            | "not_allowed_token_type" => Failure::Unauthorized(msg),
            "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
                Failure::Transient(msg)
            }
            _ => Failure::Refused(msg),
        })
    }

    /// `call`, waiting out rate limits and retrying network errors (`platform::retrying`).
    async fn call_retrying(
        &self,
        method: &'static str,
        token: &str,
        body: &Value,
        attempts: u32,
    ) -> Result<Value, Failure> {
        retrying("slack", method, attempts, || self.call(method, token, body)).await
    }
}

/// Starts the sender and the socket; the engine's ends of their channels.
pub fn spawn(cfg: Config) -> (mpsc::UnboundedSender<Out>, mpsc::UnboundedReceiver<In>) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let worker = (Api::new(&cfg.api_base), cfg.clone());
    tokio::spawn(sender(worker, out_rx, in_tx.clone()));
    tokio::spawn(socket(cfg, in_tx));
    (out_tx, in_rx)
}

/// The sender's side: the Web API and where to post.
impl Perform for (Api, Config) {
    async fn perform(&mut self, op: Out) -> Option<In> {
        perform(&self.0, &self.1, op).await
    }
}

/// A message reference: `channel:ts`.
fn split_msg(msg: &str) -> (&str, &str) {
    msg.split_once(':').unwrap_or(("", msg))
}

/// A tap's handle: channel, user and `trigger_id`, tab-separated.
fn split_tap(tap: &str) -> (&str, &str, &str) {
    let mut it = tap.splitn(3, '\t');
    (
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
    )
}

async fn perform(api: &Api, cfg: &Config, op: Out) -> Option<In> {
    let token = cfg.bot_token.as_str();
    match op {
        Out::Post { key, view } => {
            let (text, blocks) = render(&view);
            let body = json!({"channel": cfg.channel, "text": text, "blocks": blocks,
                "unfurl_links": false, "unfurl_media": false});
            let r = api.call_retrying("chat.postMessage", token, &body, 8).await;
            posted(key, r, |r| {
                let channel = r.get("channel").and_then(Value::as_str)?;
                let ts = r.get("ts").and_then(Value::as_str)?;
                Some(format!("{channel}:{ts}"))
            })
        }
        Out::Edit { msg, view } => {
            let (channel, ts) = split_msg(&msg);
            let (text, blocks) = render(&view);
            let body = json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks});
            edited(api.call_retrying("chat.update", token, &body, 8).await)
        }
        Out::Toast { reply, text, .. } => {
            // The envelope was acked when it came; only a notice needs a call.
            if text.is_empty() {
                return None;
            }
            let (channel, user, _) = split_tap(&reply);
            let body = json!({"channel": channel, "user": user, "text": escape(&text)});
            if let Err(e) = api
                .call_retrying("chat.postEphemeral", token, &body, 2)
                .await
            {
                eprintln!("askbus chat: cannot answer a tap: {}", failure_text(e));
            }
            None
        }
        Out::Prompt {
            reply_to,
            text,
            tap,
            ..
        } => {
            let tap = modal_tap(tap, "Slack")?;
            let (_, _, trigger) = split_tap(&tap);
            let view = json!({"type": "modal", "callback_id": REPLY_CALLBACK,
                "private_metadata": reply_to,
                "title": {"type": "plain_text", "text": "askbus"},
                "submit": {"type": "plain_text", "text": "Send"},
                "close": {"type": "plain_text", "text": "Cancel"},
                "blocks": [
                    {"type": "section", "text": plain(&text, MAX_SECTION)},
                    {"type": "input", "block_id": "reply",
                     "label": {"type": "plain_text", "text": "Your answer"},
                     "element": {"type": "plain_text_input", "action_id": "text",
                        "multiline": true, "max_length": 3000}}]});
            let body = json!({"trigger_id": trigger, "view": view});
            if let Err(e) = api.call_retrying("views.open", token, &body, 2).await {
                eprintln!("askbus chat: cannot open a modal: {}", failure_text(e));
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_plain_and_escaped() {
        let view: View<String> = View {
            blocks: vec![
                Block::Title("<!channel> *bold*".into()),
                Block::Text("<https://evil|OK> @everyone & co".into()),
            ],
            rows: vec![vec![Button::Tap {
                label: "Yes".into(),
                action: "data".into(),
            }]],
        };
        let (text, blocks) = render(&view);
        assert_eq!(text, "&lt;!channel&gt; *bold*");
        assert_eq!(blocks[0]["text"]["type"], "plain_text");
        assert_eq!(
            blocks[1]["text"]["text"],
            "&lt;https://evil|OK&gt; @\u{2060}everyone &amp; co"
        );
        assert_eq!(blocks[2]["elements"][0]["value"], "data");
    }

    #[test]
    fn buckets_spread_a_burst() {
        let mut b = Bucket::new(2.0, 1.0);
        assert!(b.take().is_zero());
        assert!(b.take().is_zero());
        assert!(b.take() > Duration::from_millis(900));
    }
}
