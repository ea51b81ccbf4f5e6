//! The Discord Gateway: `GET /gateway/bot` gives its URL; on a connection, Hello gives the
//! heartbeat interval, the first heartbeat goes after a random part of it (so that many
//! clients reconnecting at once do not beat together), then one every interval. A heartbeat
//! that got no ACK by the next one means a zombied connection: it is dropped (not with 1000
//! or 1001, which would end the session) and resumed. A new session Identifies (no intents);
//! a lost connection, a Reconnect (op 7) or a resumable Invalid Session (op 9, `d: true`)
//! Resumes on the Ready event's `resume_gateway_url` with the session id and the last
//! sequence number, so Discord replays what was missed; an unresumable one starts over.
//! Every interaction is applied once: an id seen before (a replay) is dropped.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::rest::Rest;
use super::{handle, Config, REPLY_INPUT, REPLY_MODAL};
use crate::chat::card::User;
use crate::chat::platform::{failure_text, json_user, Backoff, Failure, In, Seen};

/// Gateway opcodes.
const DISPATCH: u64 = 0;
const HEARTBEAT: u64 = 1;
const IDENTIFY: u64 = 2;
const RESUME: u64 = 6;
const RECONNECT: u64 = 7;
const INVALID_SESSION: u64 = 9;
const HELLO: u64 = 10;
const HEARTBEAT_ACK: u64 = 11;
/// Interaction types: a component (button) and a modal submission.
const COMPONENT: u64 = 3;
const MODAL_SUBMIT: u64 = 5;
/// How long to wait for Hello before the connection counts as failed.
const HELLO_WITHIN: Duration = Duration::from_secs(20);

/// A session to resume.
struct Session {
    id: String,
    resume_url: String,
    seq: Option<u64>,
}

/// How a connection ended.
enum End {
    /// Open another and resume the session, if there is one.
    Resume,
    /// The session is over: open another on the first URL and identify.
    Fresh,
    /// Discord refused us for good (a bad token, intents it does not allow).
    Fatal(String),
    /// The engine stopped listening.
    Gone,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A random fraction in [0, 1) (the first heartbeat's jitter).
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}

/// `url` with the version and encoding the API base speaks.
fn with_query(url: &str) -> String {
    format!("{}/?v=10&encoding=json", url.trim_end_matches('/'))
}

/// The Gateway: connected, read, resumed or identified again, for as long as the engine listens.
pub(super) async fn gateway(cfg: Config, rest: Rest, tx: mpsc::UnboundedSender<In>) {
    let mut backoff = Backoff::default();
    let mut seen = Seen::new();
    let mut was_down = false;
    let mut first_url: Option<String> = None;
    let mut session: Option<Session> = None;
    loop {
        let url = match (&session, &first_url) {
            (Some(s), _) => s.resume_url.clone(),
            (None, Some(u)) => u.clone(),
            (None, None) => {
                match rest
                    .call(Method::GET, "/gateway/bot", "GET /gateway/bot", None, true)
                    .await
                {
                    Ok(v) => match v.get("url").and_then(Value::as_str) {
                        Some(u) => {
                            first_url = Some(u.to_owned());
                            u.to_owned()
                        }
                        None => {
                            eprintln!("askbus chat: discord: /gateway/bot gave no URL; retrying");
                            tokio::time::sleep(backoff.next()).await;
                            continue;
                        }
                    },
                    Err(Failure::Unauthorized(e)) => {
                        let _ = tx.send(In::Fatal(e));
                        return;
                    }
                    Err(Failure::RetryAfter(d)) => {
                        tokio::time::sleep(d).await;
                        continue;
                    }
                    Err(e) => {
                        if !was_down {
                            eprintln!("askbus chat: discord: {}; retrying", failure_text(e));
                            was_down = true;
                        }
                        tokio::time::sleep(backoff.next()).await;
                        continue;
                    }
                }
            }
        };
        let ws = match tokio_tungstenite::connect_async(with_query(&url)).await {
            Ok((ws, _)) => ws,
            Err(e) => {
                if !was_down {
                    eprintln!("askbus chat: discord: cannot open the gateway: {e}; retrying");
                    was_down = true;
                }
                // A resume URL that does not answer: start over on the first one.
                session = None;
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        let mut conn = Conn {
            ws,
            cfg: &cfg,
            tx: &tx,
            seen: &mut seen,
            session: &mut session,
            was_down: &mut was_down,
            backoff: &mut backoff,
        };
        match conn.run().await {
            End::Resume => {}
            End::Fresh => {
                session = None;
                // Discord asks for a pause of 1 to 5 seconds before identifying again.
                tokio::time::sleep(Duration::from_secs_f64(1.0 + 4.0 * jitter())).await;
            }
            End::Fatal(e) => {
                let _ = tx.send(In::Fatal(e));
                return;
            }
            End::Gone => return,
        }
    }
}

struct Conn<'a> {
    ws: Ws,
    cfg: &'a Config,
    tx: &'a mpsc::UnboundedSender<In>,
    seen: &'a mut Seen,
    session: &'a mut Option<Session>,
    was_down: &'a mut bool,
    backoff: &'a mut Backoff,
}

impl Conn<'_> {
    async fn send(&mut self, op: u64, d: Value) -> bool {
        let frame = json!({"op": op, "d": d}).to_string();
        self.ws.send(WsMessage::Text(frame.into())).await.is_ok()
    }

    fn seq(&self) -> Value {
        self.session
            .as_ref()
            .and_then(|s| s.seq)
            .map_or(Value::Null, Value::from)
    }

    /// Drops a connection so that the session stays resumable (any close code but 1000/1001).
    async fn drop_resumable(&mut self) {
        let _ = self
            .ws
            .close(Some(CloseFrame {
                code: CloseCode::Library(4000),
                reason: "reconnecting".into(),
            }))
            .await;
    }

    async fn run(&mut self) -> End {
        // Hello first: the heartbeat interval.
        let interval = match tokio::time::timeout(HELLO_WITHIN, self.next()).await {
            Ok(Some(Ok(v))) if v.get("op").and_then(Value::as_u64) == Some(HELLO) => {
                let ms = v
                    .pointer("/d/heartbeat_interval")
                    .and_then(Value::as_u64)
                    .unwrap_or(41_250)
                    .max(100);
                Duration::from_millis(ms)
            }
            Ok(Some(Err(end))) => return end,
            _ => {
                eprintln!("askbus chat: discord: no Hello from the gateway; reconnecting");
                tokio::time::sleep(self.backoff.next()).await;
                return End::Resume;
            }
        };
        let hello = match self.session.as_ref() {
            Some(s) => (
                RESUME,
                json!({"token": self.cfg.token, "session_id": s.id, "seq": s.seq}),
            ),
            None => (
                IDENTIFY,
                json!({"token": self.cfg.token, "intents": 0,
                    "properties": {"os": std::env::consts::OS, "browser": "askbus",
                        "device": "askbus"}}),
            ),
        };
        if !self.send(hello.0, hello.1).await {
            return End::Resume;
        }
        let mut beat_at = Instant::now() + interval.mul_f64(jitter());
        let mut acked = true;
        loop {
            let frame = tokio::select! {
                f = self.next() => f,
                _ = tokio::time::sleep_until(beat_at) => {
                    if !acked {
                        eprintln!("askbus chat: discord: no heartbeat ACK (a zombied connection); resuming");
                        self.drop_resumable().await;
                        return End::Resume;
                    }
                    acked = false;
                    beat_at = Instant::now() + interval;
                    let seq = self.seq();
                    if !self.send(HEARTBEAT, seq).await {
                        return End::Resume;
                    }
                    continue;
                }
            };
            let v = match frame {
                Some(Ok(v)) => v,
                Some(Err(end)) => return end,
                None => return End::Resume,
            };
            match v.get("op").and_then(Value::as_u64) {
                Some(DISPATCH) => {
                    if let Some(end) = self.dispatch(&v) {
                        return end;
                    }
                }
                Some(HEARTBEAT) => {
                    let seq = self.seq();
                    if !self.send(HEARTBEAT, seq).await {
                        return End::Resume;
                    }
                }
                Some(HEARTBEAT_ACK) => acked = true,
                Some(RECONNECT) => {
                    self.drop_resumable().await;
                    return End::Resume;
                }
                Some(INVALID_SESSION) => {
                    let resumable = v.get("d") == Some(&Value::Bool(true));
                    eprintln!(
                        "askbus chat: discord: invalid session ({}); reconnecting",
                        if resumable {
                            "resumable"
                        } else {
                            "starting over"
                        }
                    );
                    self.drop_resumable().await;
                    return if resumable { End::Resume } else { End::Fresh };
                }
                _ => {}
            }
        }
    }

    /// The next JSON payload; `Err` is how the connection ended, `None` a plain close.
    async fn next(&mut self) -> Option<Result<Value, End>> {
        loop {
            match self.ws.next().await {
                Some(Ok(WsMessage::Text(t))) => {
                    if let Ok(v) = serde_json::from_str::<Value>(t.as_str()) {
                        return Some(Ok(v));
                    }
                }
                Some(Ok(WsMessage::Close(frame))) => {
                    return Some(Err(closed(frame.map(|f| u16::from(f.code)))))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    eprintln!("askbus chat: discord: the gateway failed: {e}; resuming");
                    return None;
                }
                None => return None,
            }
        }
    }

    /// A Dispatch: the sequence number kept, the session learnt, interactions handed over.
    fn dispatch(&mut self, v: &Value) -> Option<End> {
        let seq = v.get("s").and_then(Value::as_u64);
        if let (Some(s), Some(session)) = (seq, self.session.as_mut()) {
            session.seq = Some(s);
        }
        let d = v.get("d").unwrap_or(&Value::Null);
        match v.get("t").and_then(Value::as_str) {
            Some("READY") => {
                let id = d.get("session_id").and_then(Value::as_str).unwrap_or("");
                let url = d
                    .get("resume_gateway_url")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                *self.session = (!id.is_empty() && !url.is_empty()).then(|| Session {
                    id: id.to_owned(),
                    resume_url: url.to_owned(),
                    seq,
                });
                self.connected();
            }
            Some("RESUMED") => self.connected(),
            Some("INTERACTION_CREATE") => {
                let id = d.get("id").and_then(Value::as_str).unwrap_or("");
                if id.is_empty() {
                    return None;
                }
                if !self.seen.first(id) {
                    eprintln!("askbus chat: refused a redelivered interaction (handled already)");
                    return None;
                }
                if let Some(event) = interaction(d) {
                    if self.tx.send(event).is_err() {
                        return Some(End::Gone);
                    }
                }
            }
            _ => {}
        }
        None
    }

    fn connected(&mut self) {
        *self.backoff = Backoff::default();
        if std::mem::take(self.was_down) {
            eprintln!("askbus chat: discord reachable again");
        }
    }
}

/// What a close code means: 4004 (authentication failed) and 4010 to 4014 (shard, version,
/// intents) are for good; 4007 (invalid seq) and 4009 (session timed out) need a new session;
/// anything else resumes.
fn closed(code: Option<u16>) -> End {
    match code {
        Some(4004) => End::Fatal("the gateway refused the bot token (4004)".into()),
        Some(c @ 4010..=4014) => End::Fatal(format!("the gateway closed with {c}")),
        Some(4007 | 4009) => End::Fresh,
        _ => End::Resume,
    }
}

/// Who made an interaction: `member.user` in a server, `user` in a direct message.
fn user(d: &Value) -> User {
    json_user(
        d.pointer("/member/user").or_else(|| d.get("user")),
        "global_name",
    )
}

/// The first text input's value in a modal submission (in a Label, or an Action Row).
fn input_value(components: &Value) -> Option<&str> {
    fn find(c: &Value) -> Option<&str> {
        if c.get("custom_id").and_then(Value::as_str) == Some(REPLY_INPUT) {
            if let Some(v) = c.get("value").and_then(Value::as_str) {
                return Some(v);
            }
        }
        c.get("component")
            .and_then(find)
            .or_else(|| c.get("components").and_then(input_value))
    }
    components.as_array()?.iter().find_map(find)
}

/// What an interaction means for the engine.
fn interaction(d: &Value) -> Option<In> {
    let id = d.get("id").and_then(Value::as_str)?;
    let token = d.get("token").and_then(Value::as_str)?;
    let custom_id = d.pointer("/data/custom_id").and_then(Value::as_str)?;
    match d.get("type").and_then(Value::as_u64)? {
        COMPONENT => Some(In::Tap {
            cursor: None,
            reply: handle(id, token, false),
            user: user(d),
            data: custom_id.to_owned(),
            msg: d
                .pointer("/message/id")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        MODAL_SUBMIT => {
            let reply_to = custom_id.strip_prefix(REPLY_MODAL)?;
            Some(In::Reply {
                cursor: None,
                user: user(d),
                reply_to: Some(reply_to.to_owned()),
                text: input_value(d.pointer("/data/components")?)
                    .unwrap_or("")
                    .to_owned(),
                ack: Some(handle(id, token, true)),
            })
        }
        _ => None,
    }
}
