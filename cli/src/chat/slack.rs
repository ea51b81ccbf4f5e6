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

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::card::{Block, Button, User, View};
use super::platform::{enqueue, failure_text, fit, Backoff, Failure, In, Out, Seen};
use super::text::{clip, defuse_mentions};

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
    buckets: HashMap<&'static str, Bucket>,
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
            buckets: tiers.into_iter().collect(),
        }
    }

    async fn call(
        &mut self,
        method: &'static str,
        token: &str,
        body: &Value,
    ) -> Result<Value, Failure> {
        if let Some(b) = self.buckets.get_mut(method) {
            let wait = b.take();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
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

    /// `call`, waiting out rate limits and retrying network errors (at most `attempts` tries).
    async fn call_retrying(
        &mut self,
        method: &'static str,
        token: &str,
        body: &Value,
        attempts: u32,
    ) -> Result<Value, Failure> {
        let mut backoff = Backoff::default();
        let mut tries = 0;
        loop {
            match self.call(method, token, body).await {
                Err(Failure::RetryAfter(d)) => {
                    eprintln!(
                        "askbus chat: slack asks to wait {}s ({method})",
                        d.as_secs()
                    );
                    tokio::time::sleep(d).await;
                }
                Err(Failure::Transient(e)) => {
                    tries += 1;
                    if tries >= attempts {
                        return Err(Failure::Transient(e));
                    }
                    tokio::time::sleep(backoff.next()).await;
                }
                other => return other,
            }
        }
    }
}

/// Starts the sender and the socket; the engine's ends of their channels.
pub fn spawn(cfg: Config) -> (mpsc::UnboundedSender<Out>, mpsc::UnboundedReceiver<In>) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    tokio::spawn(sender(cfg.clone(), out_rx, in_tx.clone()));
    tokio::spawn(socket(cfg, in_tx));
    (out_tx, in_rx)
}

async fn sender(cfg: Config, mut rx: mpsc::UnboundedReceiver<Out>, tx: mpsc::UnboundedSender<In>) {
    let mut api = Api::new(&cfg.api_base);
    let mut queue = VecDeque::new();
    loop {
        if queue.is_empty() {
            match rx.recv().await {
                Some(op) => enqueue(&mut queue, op),
                None => return,
            }
        }
        while let Ok(op) = rx.try_recv() {
            enqueue(&mut queue, op);
        }
        let Some(op) = queue.pop_front() else {
            continue;
        };
        if let Some(event) = perform(&mut api, &cfg, op).await {
            if tx.send(event).is_err() {
                return;
            }
        }
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

async fn perform(api: &mut Api, cfg: &Config, op: Out) -> Option<In> {
    let token = cfg.bot_token.as_str();
    match op {
        Out::Post { key, view } => {
            let (text, blocks) = render(&view);
            let body = json!({"channel": cfg.channel, "text": text, "blocks": blocks,
                "unfurl_links": false, "unfurl_media": false});
            match api.call_retrying("chat.postMessage", token, &body, 8).await {
                Ok(r) => {
                    let channel = r.get("channel").and_then(Value::as_str)?;
                    let ts = r.get("ts").and_then(Value::as_str)?;
                    Some(In::Posted {
                        key,
                        msg: format!("{channel}:{ts}"),
                    })
                }
                Err(Failure::Unauthorized(e)) => Some(In::Fatal(e)),
                Err(e) => Some(In::Failed {
                    key,
                    error: failure_text(e),
                }),
            }
        }
        Out::Edit { msg, view } => {
            let (channel, ts) = split_msg(&msg);
            let (text, blocks) = render(&view);
            let body = json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks});
            match api.call_retrying("chat.update", token, &body, 8).await {
                Ok(_) => None,
                Err(Failure::Unauthorized(e)) => Some(In::Fatal(e)),
                Err(e) => {
                    eprintln!("askbus chat: cannot edit a message: {}", failure_text(e));
                    None
                }
            }
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
            let Some(tap) = tap else {
                eprintln!("askbus chat: a prompt without a tap cannot open a Slack modal");
                return None;
            };
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

/// The socket: opened, read, acked, reopened, for as long as the engine listens.
async fn socket(cfg: Config, tx: mpsc::UnboundedSender<In>) {
    let mut api = Api::new(&cfg.api_base);
    let mut backoff = Backoff::default();
    let mut seen = Seen::new();
    let mut was_down = false;
    loop {
        let url = match api
            .call_retrying("apps.connections.open", &cfg.app_token, &json!({}), 1)
            .await
        {
            Ok(r) => r.get("url").and_then(Value::as_str).map(str::to_owned),
            Err(Failure::Unauthorized(e)) => {
                let _ = tx.send(In::Fatal(e));
                return;
            }
            Err(e) => {
                if !was_down {
                    eprintln!("askbus chat: slack: {}; retrying", failure_text(e));
                    was_down = true;
                }
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        let Some(url) = url else {
            eprintln!("askbus chat: slack: apps.connections.open gave no URL; retrying");
            tokio::time::sleep(backoff.next()).await;
            continue;
        };
        match tokio_tungstenite::connect_async(url.as_str()).await {
            Ok((ws, _)) => {
                backoff = Backoff::default();
                match read(ws, &tx, &mut seen, &mut was_down).await {
                    Ok(()) => {}
                    Err(Gone) => return,
                }
            }
            Err(e) => {
                // The URL carries a ticket: the error's text, not the URL, is logged.
                if !was_down {
                    eprintln!("askbus chat: slack: cannot open the socket: {e}; retrying");
                    was_down = true;
                }
                tokio::time::sleep(backoff.next()).await;
            }
        }
    }
}

/// The engine stopped listening.
struct Gone;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads one connection until it ends (Ok: open another).
async fn read(
    mut ws: Ws,
    tx: &mpsc::UnboundedSender<In>,
    seen: &mut Seen,
    was_down: &mut bool,
) -> Result<(), Gone> {
    let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
    let mut heard = Instant::now();
    loop {
        let frame = tokio::select! {
            f = ws.next() => f,
            _ = ping.tick() => {
                if heard.elapsed() > SILENT {
                    eprintln!("askbus chat: slack: the socket went silent; reconnecting");
                    return Ok(());
                }
                if ws.send(WsMessage::Ping(Vec::new().into())).await.is_err() {
                    return Ok(());
                }
                continue;
            }
        };
        heard = Instant::now();
        let text = match frame {
            Some(Ok(WsMessage::Text(t))) => t,
            Some(Ok(WsMessage::Close(_))) | None => return Ok(()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                eprintln!("askbus chat: slack: the socket failed: {e}; reconnecting");
                return Ok(());
            }
        };
        let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("hello") => {
                if std::mem::take(was_down) {
                    eprintln!("askbus chat: slack reachable again");
                }
                continue;
            }
            Some("disconnect") => return Ok(()),
            _ => {}
        }
        let Some(envelope) = v.get("envelope_id").and_then(Value::as_str) else {
            continue;
        };
        // Acked first: Slack wants it within 3 seconds, whatever handling takes.
        let ack = json!({"envelope_id": envelope}).to_string();
        if ws.send(WsMessage::Text(ack.into())).await.is_err() {
            return Ok(());
        }
        if !seen.first(envelope) {
            eprintln!("askbus chat: refused a redelivered envelope (handled already)");
            continue;
        }
        if v.get("type").and_then(Value::as_str) != Some("interactive") {
            continue;
        }
        for event in interactive(v.get("payload").unwrap_or(&Value::Null)) {
            if tx.send(event).is_err() {
                return Err(Gone);
            }
        }
    }
}

fn user(u: Option<&Value>) -> User {
    let s = |k: &str| {
        u.and_then(|u| u.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let name = match s("username") {
        n if n.is_empty() => s("name"),
        n => n,
    };
    User { id: s("id"), name }
}

/// What an interactive payload means for the engine.
fn interactive(p: &Value) -> Vec<In> {
    let who = user(p.get("user"));
    match p.get("type").and_then(Value::as_str) {
        Some("block_actions") => {
            let channel = p
                .pointer("/container/channel_id")
                .or_else(|| p.pointer("/channel/id"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let ts = p
                .pointer("/container/message_ts")
                .or_else(|| p.pointer("/message/ts"))
                .and_then(Value::as_str);
            let trigger = p.get("trigger_id").and_then(Value::as_str).unwrap_or("");
            p.get("actions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                // Link buttons report a click too; they carry no value and do nothing here.
                .filter_map(|a| a.get("value").and_then(Value::as_str))
                .map(|data| In::Tap {
                    cursor: None,
                    reply: format!("{channel}\t{}\t{trigger}", who.id),
                    user: who.clone(),
                    data: data.to_owned(),
                    msg: ts.map(|ts| format!("{channel}:{ts}")),
                })
                .collect()
        }
        Some("view_submission")
            if p.pointer("/view/callback_id").and_then(Value::as_str) == Some(REPLY_CALLBACK) =>
        {
            let text = p
                .pointer("/view/state/values/reply/text/value")
                .and_then(Value::as_str)
                .unwrap_or("");
            vec![In::Reply {
                cursor: None,
                user: who,
                reply_to: p
                    .pointer("/view/private_metadata")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                text: text.to_owned(),
            }]
        }
        _ => Vec::new(),
    }
}

/// Slack's three control characters as entities (its documented escaping), then mentions
/// defused.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    defuse_mentions(&out)
}

/// A `plain_text` object, escaped and cut to `max` characters (before escaping).
fn plain(s: &str, max: usize) -> Value {
    let s = if s.is_empty() { "…" } else { s };
    json!({"type": "plain_text", "text": escape(&clip(s, max)), "emoji": true})
}

/// The notification text (what a phone's banner shows) and the message's blocks.
pub fn render(view: &View<String>) -> (String, Value) {
    let mut blocks = view.blocks.clone();
    fit(&mut blocks, MAX_TEXT);
    let mut out: Vec<Value> = Vec::new();
    let mut context: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, context: &mut Vec<Value>| {
        if !context.is_empty() {
            out.push(json!({"type": "context", "elements": std::mem::take(context)}));
        }
    };
    for b in &blocks {
        match b {
            Block::Meta(s) | Block::Note(s) => {
                if context.len() == MAX_CONTEXT {
                    flush(&mut out, &mut context);
                }
                context.push(plain(s, MAX_SECTION));
            }
            other => {
                flush(&mut out, &mut context);
                out.push(match other {
                    Block::Title(s) => json!({"type": "header", "text": plain(s, MAX_HEADER)}),
                    Block::Code(s) => json!({"type": "rich_text", "elements": [
                        {"type": "rich_text_preformatted", "elements": [
                            {"type": "text", "text": escape(&clip(s, MAX_SECTION))}]}]}),
                    Block::Text(s) => json!({"type": "section", "text": plain(s, MAX_SECTION)}),
                    Block::Meta(_) | Block::Note(_) => unreachable!("handled above"),
                });
            }
        }
    }
    flush(&mut out, &mut context);
    let rows: Vec<&Vec<Button<String>>> = view.rows.iter().filter(|r| !r.is_empty()).collect();
    // One actions block per row; when that is more blocks than a message may have, the
    // buttons share blocks of 25 (Slack wraps them).
    let groups: Vec<Vec<&Button<String>>> = if out.len() + rows.len() <= MAX_BLOCKS {
        rows.iter()
            .map(|r| r.iter().take(MAX_ACTIONS).collect())
            .collect()
    } else {
        let all: Vec<&Button<String>> = rows.iter().flat_map(|r| r.iter()).collect();
        all.chunks(MAX_ACTIONS).map(<[_]>::to_vec).collect()
    };
    for (i, group) in groups.into_iter().enumerate() {
        if out.len() >= MAX_BLOCKS {
            break;
        }
        let elements: Vec<Value> = group
            .into_iter()
            .enumerate()
            .map(|(j, b)| match b {
                Button::Tap { label, action } => json!({"type": "button",
                    "action_id": format!("b{j}"), "text": plain(label, MAX_LABEL), "value": action}),
                Button::Link { label, url } => json!({"type": "button",
                    "action_id": format!("l{j}"), "text": plain(label, MAX_LABEL), "url": url}),
            })
            .collect();
        out.push(json!({"type": "actions", "block_id": format!("r{i}"), "elements": elements}));
    }
    let summary = blocks
        .iter()
        .find_map(|b| match b {
            Block::Title(s) | Block::Text(s) => Some(s.as_str()),
            _ => None,
        })
        .or_else(|| {
            blocks.first().map(|b| match b {
                Block::Title(s)
                | Block::Meta(s)
                | Block::Text(s)
                | Block::Code(s)
                | Block::Note(s) => s.as_str(),
            })
        })
        .unwrap_or("askbus");
    (escape(&clip(summary, 300)), Value::Array(out))
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
