//! `askbus chat discord` against the real daemon and a local stand-in of Discord (written here
//! from Discord's public API reference): the HTTP API it uses (`GET /gateway/bot`; `POST` and
//! `PATCH` of channel messages with the bot token; the interaction callback; 429 with a JSON
//! `retry_after`, the `X-RateLimit-*` headers and the global limit) and the Gateway (Hello with
//! the heartbeat interval, heartbeats and their ACKs, Identify and READY with its
//! `resume_gateway_url`, Resume with the session and the last sequence number replaying what
//! was missed, Reconnect, Invalid Session). The stand-in refuses what Discord refuses: content
//! over 2,000 characters, more than 5 action rows or 5 buttons a row, a `custom_id` over 100
//! characters or used twice in a message, a label over 80, a modal title over 45, an
//! interaction answered twice, a wrong token, a call before its bucket's reset. A person's
//! taps and modal submissions are `INTERACTION_CREATE` dispatches the test sends; every wait
//! is on the stand-in's or the daemon's events.

use crate::harness as common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::Router;
use common::{Daemon, Raw};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::chat_common::{
    allowed_by_rule, ask, chat_log, logged, policy_daemon, producer, shell_approval, state_holds,
    Chat, Shared,
};

const TOKEN: &str = "MTA5ODc2NTQzMjEwOTg3NjU0.GaBcDe.test_token-abc";
const CHANNEL: &str = "1100000000000000001";
const GUILD: &str = "1200000000000000001";
const ALICE: &str = "1300000000000000001";
const MALLORY: &str = "1300000000000000666";
/// Intents that need the Developer Portal's approval: GUILD_MEMBERS, GUILD_PRESENCES,
/// MESSAGE_CONTENT.
const PRIVILEGED: u64 = (1 << 1) | (1 << 8) | (1 << 15);

#[derive(Debug, Clone)]
struct Message {
    content: String,
    components: Value,
    edits: usize,
}

#[derive(Default)]
struct St {
    messages: BTreeMap<String, Message>,
    next_id: u64,
    /// Every HTTP call: route and body.
    calls: Vec<(String, Value)>,
    /// Interaction callbacks in order: interaction id and body.
    callbacks: Vec<(String, Value)>,
    /// The interactions created, by id.
    interactions: BTreeMap<String, Value>,
    next_interaction: u64,
    // The gateway.
    heartbeat_ms: u64,
    /// Heartbeats go unacknowledged (a zombied connection).
    zombie: bool,
    heartbeats: Vec<Value>,
    /// When each connection got its Hello, and its first heartbeat after it.
    hello_at: Option<Instant>,
    first_beat_after: Vec<Duration>,
    session: Option<String>,
    sessions: u64,
    seq: u64,
    /// Every dispatch of the session: its sequence number and payload (replayed on Resume).
    log: Vec<(u64, Value)>,
    conn: Option<mpsc::UnboundedSender<String>>,
    /// Connections by path (`gw` or `resume`).
    connections: Vec<String>,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    // Rate limits.
    /// The next N message posts get a 429 (route) with this retry_after.
    rate_limit: u32,
    /// The next message post gets a global 429 with this retry_after.
    global_limit: Option<f64>,
    /// The next successful post says its bucket is spent for this long.
    spend_bucket: Option<f64>,
    /// Until when a route's bucket is spent, or every route (global).
    reset_at: BTreeMap<String, Instant>,
    global_until: Option<Instant>,
    /// When each post was answered with a 429 and when each post succeeded.
    limited_at: Vec<Instant>,
    posted_at: Vec<Instant>,
    refused: Vec<String>,
}

/// The stand-in.
type Stand = Shared<St>;

impl Stand {
    async fn until<T>(&self, what: &str, f: impl FnMut(&St) -> Option<T>) -> T {
        self.until_or(what, f, |st| {
            format!(
                "calls: {:#?}; callbacks {:?}; refused {:?}",
                st.calls, st.callbacks, st.refused
            )
        })
        .await
    }

    /// A Dispatch in the session: sent now if connected, replayed on a Resume otherwise.
    fn dispatch(&self, t: &str, d: Value) {
        {
            let mut st = self.st.lock().unwrap();
            st.seq += 1;
            let seq = st.seq;
            let payload = json!({"op": 0, "t": t, "s": seq, "d": d});
            st.log.push((seq, payload.clone()));
            if let Some(c) = &st.conn {
                let _ = c.send(payload.to_string());
            }
        }
        self.changed();
    }

    /// An interaction by `user` (a guild member); its id.
    fn interaction(&self, user: &str, kind: u8, msg: &str, data: Value) -> String {
        let id = {
            let mut st = self.st.lock().unwrap();
            st.next_interaction += 1;
            format!("14000000000000{:05}", st.next_interaction)
        };
        let name = if user == ALICE { "alice" } else { "mallory" };
        let i = json!({"id": id, "application_id": "1500000000000000001", "type": kind,
            "token": format!("itok-{id}"), "version": 1, "channel_id": CHANNEL,
            "guild_id": GUILD, "locale": "en-US", "app_permissions": "3072",
            "member": {"user": {"id": user, "username": name, "global_name": name.to_uppercase(),
                "discriminator": "0"}, "roles": [], "permissions": "0"},
            "message": {"id": msg, "channel_id": CHANNEL, "type": 0},
            "data": data});
        self.st
            .lock()
            .unwrap()
            .interactions
            .insert(id.clone(), i.clone());
        self.dispatch("INTERACTION_CREATE", i);
        id
    }

    fn tap(&self, user: &str, msg: &str, custom_id: &str) -> String {
        self.interaction(
            user,
            3,
            msg,
            json!({"custom_id": custom_id, "component_type": 2}),
        )
    }

    /// Submits the last modal opened, typing `text`.
    async fn submit(&self, user: &str, msg: &str, text: &str) -> String {
        let modal = self
            .until("a modal", |st| {
                st.callbacks
                    .iter()
                    .rev()
                    .find(|c| c.1["type"] == 9)
                    .map(|c| c.1["data"].clone())
            })
            .await;
        let input = modal["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == 18)
            .expect("a label with the text input")["component"]
            .clone();
        assert_eq!(input["type"], 4, "{modal}");
        self.interaction(
            user,
            5,
            msg,
            json!({"custom_id": modal["custom_id"], "components": [
                {"type": 18, "id": 1, "component": {"type": 4, "id": 2,
                    "custom_id": input["custom_id"], "value": text}}]}),
        )
    }

    /// The callback that answered interaction `id`.
    async fn callback(&self, id: &str) -> Value {
        self.until("the interaction's callback", |st| {
            st.callbacks.iter().find(|c| c.0 == id).map(|c| c.1.clone())
        })
        .await
    }

    async fn message(&self, needle: &str) -> (String, Message) {
        self.until(&format!("a message with {needle:?}"), |st| {
            st.messages
                .iter()
                .find(|(_, m)| visible(&m.content).contains(needle))
                .map(|(id, m)| (id.clone(), m.clone()))
        })
        .await
    }

    async fn message_where(&self, id: &str, what: &str, f: impl Fn(&Message) -> bool) -> Message {
        self.until(what, |st| {
            let m = &st.messages[id];
            f(m).then(|| m.clone())
        })
        .await
    }

    fn posts(&self) -> usize {
        let st = self.st.lock().unwrap();
        st.calls
            .iter()
            .filter(|c| c.0 == "POST /channels/messages")
            .count()
    }

    fn send_raw(&self, frame: &str) {
        if let Some(c) = &self.st.lock().unwrap().conn {
            let _ = c.send(frame.to_owned());
        }
    }

    /// Cuts the connection (no close frame), as a network failure does.
    fn drop_connection(&self) {
        if let Some(c) = self.st.lock().unwrap().conn.take() {
            let _ = c.send("\0drop".into());
        }
    }

    async fn connection(&self, n: usize) {
        self.until(&format!("connection {n}"), |st| {
            (st.connections.len() >= n && st.conn.is_some()).then_some(())
        })
        .await;
    }
}

/// What a person reads: backslash escapes and word joiners gone.
fn visible(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    let mut chars = content.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(|n| n.is_ascii_punctuation()) {
            out.push(chars.next().unwrap());
        } else if c != '\u{2060}' {
            out.push(c);
        }
    }
    out
}

fn buttons(m: &Message) -> Vec<Value> {
    m.components
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["components"].as_array().unwrap().clone())
        .collect()
}

fn button(m: &Message, label: &str) -> String {
    buttons(m)
        .into_iter()
        .find(|b| b["label"] == label)
        .and_then(|b| b["custom_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no button {label:?} in {}", m.components))
}

/// Checks a message as Discord does (the limits of its reference), and that nobody can be
/// pinged by it.
fn check_message(body: &Value) -> Result<(), String> {
    let content = body["content"].as_str().unwrap_or("");
    if content.chars().count() > 2000 {
        return Err(format!("content: {} characters", content.chars().count()));
    }
    if body["allowed_mentions"] != json!({"parse": []}) {
        return Err(format!("allowed_mentions: {}", body["allowed_mentions"]));
    }
    let rows = body["components"].as_array().ok_or("components")?;
    if rows.len() > 5 {
        return Err("more than 5 action rows".into());
    }
    let mut ids = BTreeSet::new();
    for r in rows {
        let bs = r["components"].as_array().ok_or("row components")?;
        if r["type"] != 1 || bs.is_empty() || bs.len() > 5 {
            return Err(format!("an action row of {} buttons", bs.len()));
        }
        for b in bs {
            let label = b["label"].as_str().unwrap_or("");
            if b["type"] != 2 || label.is_empty() || label.chars().count() > 80 {
                return Err(format!("button label {label:?}"));
            }
            match (
                b["style"].as_u64(),
                b["custom_id"].as_str(),
                b["url"].as_str(),
            ) {
                (Some(5), None, Some(_)) => {}
                (Some(1..=4), Some(id), None) => {
                    if id.is_empty() || id.chars().count() > 100 {
                        return Err(format!("custom_id of {} characters", id.chars().count()));
                    }
                    if !ids.insert(id.to_owned()) {
                        return Err("a custom_id used twice".into());
                    }
                }
                _ => return Err(format!("a button {b}")),
            }
        }
    }
    Ok(())
}

fn check_callback(body: &Value) -> Result<(), String> {
    match body["type"].as_u64() {
        Some(6) => Ok(()),
        Some(4) => {
            let c = body["data"]["content"].as_str().unwrap_or("");
            if c.is_empty() || c.chars().count() > 2000 {
                return Err("callback content".into());
            }
            Ok(())
        }
        Some(9) => {
            let d = &body["data"];
            let title = d["title"].as_str().unwrap_or("");
            let id = d["custom_id"].as_str().unwrap_or("");
            let n = d["components"].as_array().map_or(0, Vec::len);
            if title.is_empty() || title.chars().count() > 45 {
                return Err("modal title".into());
            }
            if id.is_empty() || id.chars().count() > 100 {
                return Err("modal custom_id".into());
            }
            if !(1..=5).contains(&n) {
                return Err("modal components".into());
            }
            Ok(())
        }
        _ => Err(format!("callback type {}", body["type"])),
    }
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: &str, code: u64) -> Response {
    json_response(status, json!({"message": message, "code": code}))
}

/// Discord's 400 for a body it refuses; the test records it (no call should get one).
fn invalid(st: &mut St, e: String) -> Response {
    let r = error(
        StatusCode::BAD_REQUEST,
        &format!("Invalid Form Body: {e}"),
        50035,
    );
    st.refused.push(e);
    r
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bot {TOKEN}"))
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, "401: Unauthorized", 0)
}

async fn gateway_bot(State(s): State<Stand>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    s.st.lock()
        .unwrap()
        .calls
        .push(("GET /gateway/bot".into(), Value::Null));
    s.changed();
    json_response(
        StatusCode::OK,
        json!({"url": format!("{}/gw", s.base.replace("http://", "ws://")), "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000,
                "max_concurrency": 1}}),
    )
}

/// A call on `route` before its bucket (or the global limit) reset: Discord answers 429, and
/// the test records it as refused.
fn early(st: &mut St, route: &str) -> bool {
    let now = Instant::now();
    if st.global_until.is_some_and(|t| now < t) {
        st.refused
            .push(format!("{route} called during the global limit"));
        return true;
    }
    if st.reset_at.get(route).is_some_and(|t| now < *t) {
        st.refused
            .push(format!("{route} called before its bucket reset"));
        return true;
    }
    false
}

fn limited(retry_after: f64, global: bool) -> Response {
    let mut r = json_response(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"message": "You are being rate limited.", "retry_after": retry_after,
            "global": global}),
    );
    let h = r.headers_mut();
    h.insert("retry-after", "1".parse().unwrap());
    if global {
        h.insert("x-ratelimit-global", "true".parse().unwrap());
        h.insert("x-ratelimit-scope", "global".parse().unwrap());
    } else {
        h.insert("x-ratelimit-limit", "5".parse().unwrap());
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert(
            "x-ratelimit-reset-after",
            retry_after.to_string().parse().unwrap(),
        );
        h.insert("x-ratelimit-bucket", "msgs-bucket".parse().unwrap());
        h.insert("x-ratelimit-scope", "user".parse().unwrap());
    }
    r
}

async fn post_message(
    State(s): State<Stand>,
    UrlPath(channel): UrlPath<String>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    let route = "POST /channels/messages";
    message_call(&s, route, &channel, &headers, &raw, |st, body| {
        let now = Instant::now();
        if let Some(secs) = st.global_limit.take() {
            st.limited_at.push(now);
            st.global_until = Some(now + Duration::from_secs_f64(secs));
            return limited(secs, true);
        }
        if st.rate_limit > 0 {
            st.rate_limit -= 1;
            st.limited_at.push(now);
            st.reset_at
                .insert(route.into(), now + Duration::from_millis(250));
            return limited(0.25, false);
        }
        st.next_id += 1;
        let id = format!("16000000000000{:05}", st.next_id);
        st.messages.insert(
            id.clone(),
            Message {
                content: body["content"].as_str().unwrap_or("").to_owned(),
                components: body["components"].clone(),
                edits: 0,
            },
        );
        st.posted_at.push(now);
        let mut r = json_response(
            StatusCode::OK,
            json!({"id": id, "channel_id": CHANNEL, "type": 0, "content": body["content"],
                "components": body["components"], "author": {"id": "1500000000000000001",
                    "username": "askbus", "bot": true}, "flags": body["flags"]}),
        );
        let h = r.headers_mut();
        h.insert("x-ratelimit-bucket", "msgs-bucket".parse().unwrap());
        h.insert("x-ratelimit-limit", "5".parse().unwrap());
        let (remaining, reset_after) = match st.spend_bucket.take() {
            Some(secs) => {
                st.reset_at
                    .insert(route.into(), now + Duration::from_secs_f64(secs));
                ("0", secs.to_string())
            }
            None => ("4", "1.0".to_owned()),
        };
        h.insert("x-ratelimit-remaining", remaining.parse().unwrap());
        h.insert("x-ratelimit-reset-after", reset_after.parse().unwrap());
        r
    })
}

async fn patch_message(
    State(s): State<Stand>,
    UrlPath((channel, id)): UrlPath<(String, String)>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    let route = "PATCH /channels/messages";
    message_call(&s, route, &channel, &headers, &raw, |st, body| {
        match st.messages.get_mut(&id) {
            Some(m) => {
                m.content = body["content"].as_str().unwrap_or("").to_owned();
                m.components = body["components"].clone();
                m.edits += 1;
                json_response(StatusCode::OK, json!({"id": id, "channel_id": CHANNEL}))
            }
            None => error(StatusCode::NOT_FOUND, "Unknown Message", 10008),
        }
    })
}

/// What every message call goes through (the token, the call recorded, the bucket and the
/// global limit, the channel, Discord's checks of the message), then `f`.
fn message_call(
    s: &Stand,
    route: &str,
    channel: &str,
    headers: &HeaderMap,
    raw: &[u8],
    f: impl FnOnce(&mut St, &Value) -> Response,
) -> Response {
    if !authorized(headers) {
        return unauthorized();
    }
    let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let reply = {
        let mut st = s.st.lock().unwrap();
        st.calls.push((route.into(), body.clone()));
        if early(&mut st, route) {
            limited(0.1, false)
        } else if channel != CHANNEL {
            error(StatusCode::NOT_FOUND, "Unknown Channel", 10003)
        } else if let Err(e) = check_message(&body) {
            invalid(&mut st, e)
        } else {
            f(&mut st, &body)
        }
    };
    s.changed();
    reply
}

async fn interaction_callback(
    State(s): State<Stand>,
    UrlPath((id, token)): UrlPath<(String, String)>,
    raw: axum::body::Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let reply = {
        let mut st = s.st.lock().unwrap();
        st.calls
            .push(("POST /interactions/callback".into(), body.clone()));
        if token != format!("itok-{id}") || !st.interactions.contains_key(&id) {
            error(StatusCode::NOT_FOUND, "Unknown interaction", 10062)
        } else if st.callbacks.iter().any(|c| c.0 == id) {
            st.refused.push(format!("interaction {id} answered twice"));
            error(
                StatusCode::BAD_REQUEST,
                "Interaction has already been acknowledged.",
                40060,
            )
        } else if let Err(e) = check_callback(&body) {
            invalid(&mut st, e)
        } else {
            st.callbacks.push((id, body));
            StatusCode::NO_CONTENT.into_response()
        }
    };
    s.changed();
    reply
}

async fn gw(ws: WebSocketUpgrade, State(s): State<Stand>) -> Response {
    ws.on_upgrade(move |sock| serve_gateway(s, sock, "gw"))
}

async fn resume(ws: WebSocketUpgrade, State(s): State<Stand>) -> Response {
    ws.on_upgrade(move |sock| serve_gateway(s, sock, "resume"))
}

async fn serve_gateway(s: Stand, mut sock: WebSocket, path: &'static str) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let interval = {
        let mut st = s.st.lock().unwrap();
        st.connections.push(path.into());
        st.hello_at = Some(Instant::now());
        if st.heartbeat_ms == 0 {
            st.heartbeat_ms = 41_250;
        }
        st.heartbeat_ms
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}}).to_string();
    if sock.send(WsMessage::Text(hello.into())).await.is_err() {
        return;
    }
    s.changed();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(m) if m == "\0drop" => return,
                Some(m) => {
                    if sock.send(WsMessage::Text(m.into())).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            inc = sock.recv() => match inc {
                Some(Ok(WsMessage::Text(t))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                    let reply = gateway_op(&s, &v, &tx);
                    s.changed();
                    if let Some(r) = reply {
                        if sock.send(WsMessage::Text(r.into())).await.is_err() {
                            break;
                        }
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    let mut st = s.st.lock().unwrap();
    if st.conn.as_ref().is_some_and(|c| c.same_channel(&tx)) {
        st.conn = None;
    }
    drop(st);
    s.changed();
}

/// What the gateway does with a client's payload; a payload to answer with at once.
fn gateway_op(s: &Stand, v: &Value, tx: &mpsc::UnboundedSender<String>) -> Option<String> {
    let mut st = s.st.lock().unwrap();
    match v["op"].as_u64() {
        Some(1) => {
            if st.heartbeats.is_empty() || st.first_beat_after.len() < st.connections.len() {
                let after = st.hello_at.map(|t| t.elapsed()).unwrap_or_default();
                st.first_beat_after.push(after);
            }
            st.heartbeats.push(v["d"].clone());
            (!st.zombie).then(|| json!({"op": 11}).to_string())
        }
        Some(2) => {
            st.identifies.push(v["d"].clone());
            if v["d"]["token"] != TOKEN {
                st.refused.push("identify with a wrong token".into());
                return None;
            }
            if v["d"]["intents"]
                .as_u64()
                .is_none_or(|i| i & PRIVILEGED != 0)
            {
                st.refused.push(format!("intents {}", v["d"]["intents"]));
                return None;
            }
            st.sessions += 1;
            let session = format!("session-{}", st.sessions);
            st.session = Some(session.clone());
            st.seq = 0;
            st.log.clear();
            st.conn = Some(tx.clone());
            drop(st);
            s.dispatch(
                "READY",
                json!({"v": 10, "session_id": session,
                    "resume_gateway_url": format!("{}/resume", s.base.replace("http://", "ws://")),
                    "user": {"id": "1500000000000000001", "username": "askbus", "bot": true},
                    "guilds": [], "application": {"id": "1500000000000000001", "flags": 0}}),
            );
            None
        }
        Some(6) => {
            st.resumes.push(v["d"].clone());
            let ok = v["d"]["token"] == TOKEN
                && st
                    .session
                    .as_ref()
                    .is_some_and(|x| *x == v["d"]["session_id"]);
            if !ok {
                return Some(json!({"op": 9, "d": false}).to_string());
            }
            let from = v["d"]["seq"].as_u64().unwrap_or(0);
            for (seq, payload) in &st.log {
                if *seq > from {
                    let _ = tx.send(payload.to_string());
                }
            }
            st.conn = Some(tx.clone());
            drop(st);
            s.dispatch("RESUMED", Value::Null);
            None
        }
        _ => None,
    }
}

async fn stand_in() -> Stand {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stand = Stand::new(&base);
    let app = Router::new()
        .route("/api/v10/gateway/bot", get(gateway_bot))
        .route("/api/v10/channels/{channel}/messages", post(post_message))
        .route(
            "/api/v10/channels/{channel}/messages/{id}",
            patch(patch_message),
        )
        .route(
            "/api/v10/interactions/{id}/{token}/callback",
            post(interaction_callback),
        )
        .route("/gw/", get(gw))
        .route("/resume/", get(resume))
        .with_state(stand.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    stand
}

fn chat(d: &Daemon, s: &Stand, extra: &[&str]) -> Chat {
    let mut cmd = d.cli();
    cmd.args([
        "chat",
        "discord",
        "--channel",
        CHANNEL,
        "--allow-user",
        ALICE,
    ])
    .arg("--api-base")
    .arg(format!("{}/api/v10", s.base))
    .arg("--state")
    .arg(d.dir.path().join("chat.json"))
    .args(extra)
    .env("ASKBUS_DISCORD_TOKEN", TOKEN);
    Chat::spawn(d, cmd)
}

async fn watcher(d: &Daemon) -> Raw {
    let mut w = d.connect().await;
    w.send(json!({"type": "watch", "client": "test-watch/1"}))
        .await;
    w.recv_type("watching").await;
    w
}

/// The `decidedBy` of `id`'s end event.
async fn decided_by(w: &mut Raw, id: &str) -> Value {
    loop {
        let e = w.recv_type("bus-event").await;
        if e["correlationId"] == id && e["event"] != "request" {
            return e["decidedBy"].clone();
        }
    }
}

fn approval(id: &str, command: &str) -> Value {
    json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
            "rootCommand": "rm", "rootCommands": ["rm"]},
        "outcomes": ["proceed_once", "proceed_always", "cancel"],
        "context": {"agent": "gemini-cli", "project": "shop"}})
}

#[test]
fn every_kind_answered_from_discord_through_the_daemon() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        let _chat = chat(&d, &s, &[]);
        // Discord delivers interactions to a connected bot only.
        s.connection(1).await;
        let mut p = producer(&d).await;
        let mut w = watcher(&d).await;

        // The bot identified with no privileged intent.
        let identify = s
            .until("an identify", |st| st.identifies.first().cloned())
            .await;
        assert_eq!(identify["intents"], 0, "{identify}");

        // yesno: a stranger's tap gets an ephemeral "not allowed" and changes nothing; forged
        // custom_ids answer nothing; Alice's tap answers through askbusd; the message is
        // edited to the outcome without components.
        p.send(ask(
            "q-yesno",
            json!([{"question": "Deploy to prod?", "header": "Deploy", "type": "yesno"}]),
        ))
        .await;
        let (mid, m) = s.message("Deploy to prod?").await;
        let shown = visible(&m.content);
        assert!(
            shown.contains("gemini-cli") && shown.contains("project shop"),
            "{shown}"
        );
        assert!(shown.contains("min left"), "{shown}");
        let yes = button(&m, "Yes");
        let i = s.tap(MALLORY, &mid, &yes);
        let cb = s.callback(&i).await;
        assert_eq!((cb["type"].clone(), cb["data"]["flags"].clone()), (json!(4), json!(64)));
        assert!(visible(cb["data"]["content"].as_str().unwrap()).contains("not allowed"));
        let i = s.tap(ALICE, &mid, "forged-custom-id");
        assert!(visible(s.callback(&i).await["data"]["content"].as_str().unwrap())
            .contains("not valid"));
        let mut forged = yes.clone().into_bytes();
        forged[12] = if forged[12] == b'A' { b'B' } else { b'A' };
        let i = s.tap(ALICE, &mid, &String::from_utf8(forged).unwrap());
        assert_eq!(s.callback(&i).await["data"]["flags"], 64);
        p.expect_silence(Duration::from_millis(200)).await;
        let i = s.tap(ALICE, &mid, &yes);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "Yes"}), "{r}");
        assert_eq!(s.callback(&i).await, json!({"type": 6}));
        let by = decided_by(&mut w, "q-yesno").await;
        assert_eq!(
            (&by["kind"], &by["via"], &by["user"]),
            (
                &json!("human"),
                &json!("discord"),
                &json!(format!("alice ({ALICE})"))
            ),
            "{by}"
        );
        let m = s
            .message_where(&mid, "the outcome", |m| {
                visible(&m.content).contains("Answered in Discord")
            })
            .await;
        assert!(visible(&m.content).contains(&format!("alice ({ALICE})")));
        assert_eq!(m.components, json!([]));
        // The old button tapped again (a replay) answers nothing.
        let i = s.tap(ALICE, &mid, &yes);
        assert!(visible(s.callback(&i).await["data"]["content"].as_str().unwrap())
            .contains("over"));
        p.expect_silence(Duration::from_millis(200)).await;
        assert!(
            chat_log(&d).contains(&format!(
                "refused a tap by mallory ({MALLORY}): not an allowed user"
            )),
            "{}",
            chat_log(&d)
        );

        // choice: a button per option.
        p.send(ask(
            "q-choice",
            json!([{"question": "Which database?", "header": "DB", "type": "choice",
                "multiSelect": false, "options": [
                {"label": "PostgreSQL", "description": ""}, {"label": "SQLite", "description": ""}]}]),
        ))
        .await;
        let (mid, m) = s.message("Which database?").await;
        s.tap(ALICE, &mid, &button(&m, "SQLite"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "SQLite"}), "{r}");

        // multiSelect: toggles (a tap on an older rendering is refused), Done.
        p.send(ask(
            "q-multi",
            json!([{"question": "Which checks?", "header": "Checks",
            "type": "choice", "multiSelect": true, "options": [
                {"label": "lint", "description": ""}, {"label": "test", "description": ""}]}]),
        ))
        .await;
        let (mid, m) = s.message("Which checks?").await;
        let lint = button(&m, "☐ lint");
        s.tap(ALICE, &mid, &lint);
        let m = s
            .message_where(&mid, "lint checked", |m| {
                buttons(m).iter().any(|b| b["label"] == "☑ lint")
            })
            .await;
        let i = s.tap(ALICE, &mid, &lint);
        assert!(visible(s.callback(&i).await["data"]["content"].as_str().unwrap())
            .contains("changed"));
        s.tap(ALICE, &mid, &button(&m, "Done"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "lint"}), "{r}");

        // text: the Answer button opens a modal; its submission answers.
        p.send(ask(
            "q-text",
            json!([{"question": "Branch name?", "header": "Branch", "type": "text"}]),
        ))
        .await;
        let (mid, m) = s.message("Branch name?").await;
        let i = s.tap(ALICE, &mid, &button(&m, "✏️ Answer"));
        assert_eq!(s.callback(&i).await["type"], 9);
        let i = s.submit(ALICE, &mid, "feature/discord").await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "feature/discord"}), "{r}");
        assert_eq!(s.callback(&i).await, json!({"type": 6}));

        // Approval: the command in a code block; Deny opens a modal for the reason.
        p.send(approval("a-1", "rm -rf build")).await;
        let (mid, m) = s.message("Confirm Shell Command").await;
        assert!(m.content.contains("```\nrm -rf build\n```"), "{}", m.content);
        button(&m, "Allow once");
        button(&m, "Allow always");
        let i = s.tap(ALICE, &mid, &button(&m, "Deny"));
        let modal = s.callback(&i).await;
        assert_eq!(modal["type"], 9);
        assert!(
            visible(modal["data"]["components"][0]["content"].as_str().unwrap())
                .contains("Why deny"),
            "{modal}"
        );
        s.message_where(&mid, "the deny row", |m| {
            buttons(m)
                .iter()
                .any(|b| b["label"] == "Deny without a reason")
        })
        .await;
        // A stranger's forged submission is refused, ephemerally.
        let i = s.submit(MALLORY, &mid, "sure, go").await;
        assert!(visible(s.callback(&i).await["data"]["content"].as_str().unwrap())
            .contains("not allowed"));
        s.submit(ALICE, &mid, "not on a Friday").await;
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (r["outcome"].as_str(), r["message"].as_str()),
            (Some("cancel"), Some("not on a Friday")),
            "{r}"
        );
        let m = s
            .message_where(&mid, "the decision", |m| {
                visible(&m.content).contains("Decided in Discord")
            })
            .await;
        assert_eq!(m.components, json!([]));

        // Deny, then "Deny without a reason".
        p.send(approval("a-2", "rm -rf dist")).await;
        let (mid, m) = s.message("rm -rf dist").await;
        s.tap(ALICE, &mid, &button(&m, "Deny"));
        let m = s
            .message_where(&mid, "the deny row", |m| {
                buttons(m)
                    .iter()
                    .any(|b| b["label"] == "Deny without a reason")
            })
            .await;
        s.tap(ALICE, &mid, &button(&m, "Deny without a reason"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["outcome"], "cancel", "{r}");

        // Allow once.
        p.send(approval("a-3", "rm -rf tmp")).await;
        let (mid, m) = s.message("rm -rf tmp").await;
        s.tap(ALICE, &mid, &button(&m, "Allow once"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (r["correlationId"].as_str(), r["outcome"].as_str()),
            (Some("a-3"), Some("proceed_once")),
            "{r}"
        );
        s.message_where(&mid, "the decision", |m| m.components == json!([]))
            .await;

        // Allow always, the agent's own (it offers proceed_always).
        p.send(approval("a-4", "rm -rf cache")).await;
        let (mid, m) = s.message("rm -rf cache").await;
        s.tap(ALICE, &mid, &button(&m, "Allow always"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (r["correlationId"].as_str(), r["outcome"].as_str()),
            (Some("a-4"), Some("proceed_always")),
            "{r}"
        );
        // Every interaction was answered, once.
        s.until("every interaction answered", |st| {
            (st.callbacks.len() == st.interactions.len()).then_some(())
        })
        .await;
        let st = s.st.lock().unwrap();
        assert!(st.refused.is_empty(), "{:?}", st.refused);
    });
}

#[test]
fn ended_elsewhere_spoofing_rate_limits_resume_restart_and_digest() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        s.st.lock().unwrap().rate_limit = 2;
        let mut c = chat(&d, &s, &["--max-messages", "3"]);
        s.connection(1).await;
        let mut p = producer(&d).await;

        // Text that tries to spoof: markdown stays text, bidi and zero-width are
        // neutralised, mentions are defused; rate limited twice, the message still comes,
        // once, each retry after the retry_after.
        let spoof =
            "Pick [OK](https://evil) <@123> \u{202E}evil\u{202C} @everyone **now**\u{200B} # big";
        p.send(ask(
            "q-spoof",
            json!([{"question": spoof, "header": "Spoof", "type": "yesno"}]),
        ))
        .await;
        let (mid, m) = s.message("Pick").await;
        assert_eq!(s.posts(), 3);
        {
            let st = s.st.lock().unwrap();
            assert!(
                st.posted_at[0] - st.limited_at[1] >= Duration::from_millis(250),
                "the retry came before retry_after"
            );
        }
        assert!(
            m.content
                .contains("\\[OK\\]\\(https\\://evil\\) \\<@\u{2060}123\\>"),
            "{}",
            m.content
        );
        assert!(
            !m.content.contains('\u{202E}') && !m.content.contains('\u{200B}'),
            "{}",
            m.content
        );
        assert!(
            m.content.contains("@\u{2060}everyone \\*\\*now\\*\\*"),
            "{}",
            m.content
        );
        assert!(m.content.contains("\\# big"), "{}", m.content);
        // Another UI answers first: the message is edited, its buttons removed.
        let (mut ui, _) = d.ui().await;
        ui.recv_type("ask-user-request").await;
        ui.send(common::answer("q-spoof", json!({"0": "No"}))).await;
        p.recv_type("ask-user-response").await;
        let m = s
            .message_where(&mid, "the ended edit", |m| {
                visible(&m.content).contains("Answered elsewhere")
            })
            .await;
        assert_eq!(m.components, json!([]));
        drop(ui);

        // A long command fits Discord's 2,000 characters (the stand-in refuses more), its
        // code block closed; the bucket the post spent is waited out before the next post.
        s.st.lock().unwrap().spend_bucket = Some(0.3);
        let long = format!("echo {}", "`x` ".repeat(1500));
        p.send(approval("a-long", &long)).await;
        let (mid, m) = s.message("Confirm Shell Command").await;
        assert!(m.content.chars().count() <= 2000);
        assert_eq!(m.content.matches("```").count(), 2, "{}", m.content);
        p.send(ask(
            "q-after",
            json!([{"question": "After the bucket?", "header": "B", "type": "yesno"}]),
        ))
        .await;
        s.message("After the bucket?").await;
        {
            let st = s.st.lock().unwrap();
            let n = st.posted_at.len();
            assert!(st.posted_at[n - 1] - st.posted_at[n - 2] >= Duration::from_millis(300));
        }
        let allow = button(&m, "Allow once");

        // The connection drops; a tap made meanwhile is replayed on the Resume, once; the
        // Resume went to the resume_gateway_url with the session and the last seq.
        let seq = s.st.lock().unwrap().seq;
        s.drop_connection();
        let i = s.tap(ALICE, &mid, &allow);
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["correlationId"], "a-long");
        let resume = s.until("a resume", |st| st.resumes.first().cloned()).await;
        assert_eq!(
            (resume["session_id"].clone(), resume["seq"].clone()),
            (json!("session-1"), json!(seq))
        );
        assert_eq!(s.st.lock().unwrap().connections.last().unwrap(), "resume");
        assert_eq!(s.callback(&i).await, json!({"type": 6}));
        // The same interaction delivered again: not applied again (nor answered twice).
        let again = s.st.lock().unwrap().interactions[&i].clone();
        s.dispatch("INTERACTION_CREATE", again);
        logged(&d, "refused a redelivered interaction").await;
        // A Reconnect (op 7): resumed on a new connection; an unresumable Invalid Session:
        // identified again.
        let n = s.st.lock().unwrap().connections.len();
        s.send_raw(&json!({"op": 7, "d": null}).to_string());
        s.until("the second resume", |st| {
            (st.resumes.len() == 2).then_some(())
        })
        .await;
        s.connection(n + 1).await;
        s.send_raw(&json!({"op": 9, "d": false}).to_string());
        s.until("a new identify", |st| {
            (st.identifies.len() == 2).then_some(())
        })
        .await;
        assert_eq!(s.st.lock().unwrap().connections.last().unwrap(), "gw");
        s.until("the new session", |st| {
            (st.session.as_deref() == Some("session-2") && st.conn.is_some()).then_some(())
        })
        .await;

        // Restart: a pending request's message is not posted again, and its buttons work.
        p.send(ask(
            "r-2",
            json!([{"question": "Second?", "header": "Two", "type": "yesno"}]),
        ))
        .await;
        let (mid2, m2) = s.message("Second?").await;
        let posts = s.posts();
        state_holds(&d, "r-2").await;
        drop(c);
        let identifies = s.st.lock().unwrap().identifies.len();
        c = chat(&d, &s, &["--max-messages", "3"]);
        s.until("the restarted chat's identify", |st| {
            (st.identifies.len() > identifies && st.conn.is_some()).then_some(())
        })
        .await;
        s.tap(ALICE, &mid2, &button(&m2, "No"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "r-2");
        assert_eq!(s.posts(), posts, "nothing posted again after the restart");

        // A burst: 3 messages of their own (q-after is one), the rest in one digest; a global
        // 429 on the way stops every call until it is over.
        s.st.lock().unwrap().global_limit = Some(0.3);
        for i in 0..20 {
            p.send(ask(
                &format!("b-{i}"),
                json!([{"question": format!("Burst {i}?"), "header": "B", "type": "yesno"}]),
            ))
            .await;
        }
        s.message("18 more requests are waiting").await;
        // Two messages and the digest, and the one post the global 429 refused.
        assert_eq!(s.posts(), posts + 4);
        let log = chat_log(&d);
        assert!(log.contains("discord asks to wait 0.3s"), "{log}");
        // The token is in no log line.
        assert!(!log.contains(TOKEN), "{log}");
        let st = s.st.lock().unwrap();
        assert!(st.refused.is_empty(), "{:?}", st.refused);
        drop(st);
        drop(c);
    });
}

/// Heartbeats: the first after a random part of the interval, then one an interval carrying
/// the last sequence number; a heartbeat with no ACK means a zombied connection, dropped and
/// resumed with the session.
#[test]
fn heartbeats_and_a_zombied_connection_resumed() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        s.st.lock().unwrap().heartbeat_ms = 400;
        let _chat = chat(&d, &s, &[]);
        // Discord delivers interactions to a connected bot only.
        s.connection(1).await;
        s.until("three heartbeats", |st| {
            (st.heartbeats.len() >= 3).then_some(())
        })
        .await;
        {
            let st = s.st.lock().unwrap();
            // Within the interval (jittered), with room for a loaded machine.
            assert!(st.first_beat_after[0] <= Duration::from_millis(700));
            assert_eq!(st.heartbeats[2], json!(st.seq), "{:?}", st.heartbeats);
        }
        s.st.lock().unwrap().zombie = true;
        s.until("a resume after the zombie", |st| {
            st.resumes.first().cloned()
        })
        .await;
        s.st.lock().unwrap().zombie = false;
        s.connection(2).await;
        assert!(chat_log(&d).contains("zombied"), "{}", chat_log(&d));
        // Still working: a request is posted and answered.
        let mut p = producer(&d).await;
        p.send(ask(
            "z-1",
            json!([{"question": "Still there?", "header": "Z", "type": "yesno"}]),
        ))
        .await;
        let (mid, m) = s.message("Still there?").await;
        s.tap(ALICE, &mid, &button(&m, "Yes"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "Yes"}), "{r}");
        assert_eq!(
            s.st.lock().unwrap().identifies.len(),
            1,
            "resumed, not identified"
        );
    });
}

/// askbus's own "Allow always" (the hook offers none): the message shows the rule before the
/// tap; the tap writes it and sends the decision; the daemon then allows the same call by the
/// rule, never shown in the chat.
#[test]
fn allow_always_shows_and_writes_the_rule_the_daemon_then_applies() {
    common::rt().block_on(async {
        let (d, _admin, file) = policy_daemon();
        let s = stand_in().await;
        let _chat = chat(&d, &s, &[]);
        // Discord delivers interactions to a connected bot only.
        s.connection(1).await;
        let mut p = producer(&d).await;
        let rule = format!(
            "allow run_shell_command commands starting \"npm\" in project shop ({}, user tier, \
             priority 4.95)",
            file.display()
        );
        p.send(shell_approval("first", "npm run build", "shop"))
            .await;
        let (mid, m) = s.message("npm run build").await;
        assert!(
            visible(&m.content).contains(&format!("Allow always: writes the rule: {rule}")),
            "{}",
            m.content
        );
        assert!(!file.exists(), "no rule before the tap");
        s.tap(ALICE, &mid, &button(&m, "Allow always"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["outcome"], "proceed_once", "{r}");
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(written.contains("commandPrefix = \"npm\""), "{written}");
        s.message_where(&mid, "the decision", |m| {
            visible(&m.content).contains(&format!("Allow always, writing the rule: {rule}"))
        })
        .await;
        allowed_by_rule(&mut p, "next", "npm test", "shop").await;
        assert_eq!(s.posts(), 1, "the rule's call was never posted");
    });
}
