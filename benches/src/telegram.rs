//! A loopback stand-in of the Telegram Bot API for `askbus bench chat`, written from the Bot
//! API reference (<https://core.telegram.org/bots/api>): `POST /bot<token>/<method>` with a
//! JSON body, answered `{"ok":true,"result":…}` or `{"ok":false,"error_code":…,
//! "description":…}`. It serves what `askbus chat telegram` calls: `getUpdates` (a long poll
//! held for its `timeout`, then an empty list: the bench taps nothing), `sendMessage` and
//! `editMessageText` (checked as the real API checks them: the chat, at most 4,096 characters
//! of text, at most 64 bytes of callback data, a known message id) and `answerCallbackQuery`.
//! Every call is handed to the bench with the instant its body had been read, so a latency
//! is measured to the moment the message reached "Telegram".

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The token the stand-in accepts (it never leaves this machine).
pub const TOKEN: &str = "123456:bench-stand-in";
/// The chat the bench posts in.
pub const CHAT: i64 = 4242;
/// The Bot API's limits on a message's text (characters) and a button's callback data
/// (bytes).
const MAX_TEXT: usize = 4096;
const MAX_CALLBACK_DATA: usize = 64;
/// The longest long poll the real API holds.
const MAX_POLL: Duration = Duration::from_secs(50);

/// One call the chat made, as the stand-in saw it.
#[derive(Debug)]
pub struct Call {
    pub method: String,
    /// When its body had been read.
    pub at: Instant,
    /// The message it created or edited.
    pub message_id: Option<i64>,
    pub text: String,
    /// Buttons on the message after the call.
    pub buttons: usize,
}

#[derive(Default)]
struct Chat {
    next_id: i64,
    /// message id → its text and inline keyboard.
    messages: HashMap<i64, (String, Value)>,
}

#[derive(Clone)]
struct Shared {
    chat: Arc<Mutex<Chat>>,
    calls: mpsc::UnboundedSender<Call>,
}

/// Serves the stand-in on 127.0.0.1 (a free port) on the current runtime; its base URL (for
/// `--api-base`) and the calls as they come.
pub async fn serve() -> Result<(String, mpsc::UnboundedReceiver<Call>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Shared {
        chat: Arc::default(),
        calls: tx,
    };
    let app = axum::Router::new()
        .route("/{bot}/{method}", post(call))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .context("cannot listen on 127.0.0.1")?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}"), rx))
}

fn answer(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(result: Value) -> Response {
    answer(StatusCode::OK, json!({"ok": true, "result": result}))
}

fn error(code: u16, description: &str) -> Response {
    answer(
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        json!({"ok": false, "error_code": code, "description": description}),
    )
}

async fn call(
    State(s): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    if bot.strip_prefix("bot") != Some(TOKEN) {
        return error(401, "Unauthorized");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "Bad Request: can't parse JSON");
    };
    let handled = match method.as_str() {
        "getUpdates" => {
            let wait = body["timeout"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(wait).min(MAX_POLL)).await;
            return ok(json!([]));
        }
        "answerCallbackQuery" => return ok(json!(true)),
        "sendMessage" | "editMessageText" => message(&s, &method, &body),
        _ => return error(404, "Not Found: method not found"),
    };
    match handled {
        Ok((id, text, buttons)) => {
            let _ = s.calls.send(Call {
                method,
                at,
                message_id: Some(id),
                text: text.clone(),
                buttons,
            });
            ok(json!({"message_id": id, "date": 0, "text": text,
                "chat": {"id": CHAT, "type": "private"}}))
        }
        Err(description) => error(400, description),
    }
}

/// `sendMessage` or `editMessageText` checked and applied: the message's id, text and
/// buttons, or the API's description of why not.
fn message(s: &Shared, method: &str, body: &Value) -> Result<(i64, String, usize), &'static str> {
    if body["chat_id"].as_i64() != Some(CHAT) && body["chat_id"].as_str() != Some(&CHAT.to_string())
    {
        return Err("Bad Request: chat not found");
    }
    let text = body["text"]
        .as_str()
        .ok_or("Bad Request: message text is empty")?;
    if text.chars().count() > MAX_TEXT {
        return Err("Bad Request: message is too long");
    }
    let markup = body
        .pointer("/reply_markup/inline_keyboard")
        .cloned()
        .unwrap_or(json!([]));
    let keyboard = markup.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut buttons = 0;
    for b in keyboard.iter().filter_map(Value::as_array).flatten() {
        if let Some(data) = b.get("callback_data").and_then(Value::as_str) {
            if data.is_empty() || data.len() > MAX_CALLBACK_DATA {
                return Err("Bad Request: BUTTON_DATA_INVALID");
            }
        }
        buttons += 1;
    }
    let mut chat = s.chat.lock().expect("stand-in lock");
    let id = if method == "sendMessage" {
        chat.next_id += 1;
        chat.next_id
    } else {
        let id = body["message_id"]
            .as_i64()
            .ok_or("Bad Request: message to edit not found")?;
        match chat.messages.get(&id) {
            None => return Err("Bad Request: message to edit not found"),
            Some((old, buttons)) if old == text && *buttons == markup => {
                return Err("Bad Request: message is not modified")
            }
            Some(_) => id,
        }
    };
    chat.messages.insert(id, (text.to_owned(), markup));
    Ok((id, text.to_owned(), buttons))
}
