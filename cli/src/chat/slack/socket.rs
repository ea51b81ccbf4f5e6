//! Slack's Socket Mode: the WebSocket `apps.connections.open` hands out, read with every
//! envelope acked before it is handled (and one seen before applied once), pinged when
//! silent, and reopened with backoff; its taps, modal submissions and messages become the
//! engine's input.

use super::*;
use crate::chat::platform::json_user;

/// The socket: opened, read, acked, reopened, for as long as the engine listens.
pub(super) async fn socket(cfg: Config, tx: mpsc::UnboundedSender<In>) {
    let api = Api::new(&cfg.api_base);
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
pub(super) struct Gone;

pub(super) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads one connection until it ends (Ok: open another).
pub(super) async fn read(
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

/// What an interactive payload means for the engine.
pub(super) fn interactive(p: &Value) -> Vec<In> {
    let who = json_user(p.get("user"), "name");
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
                ack: None,
            }]
        }
        _ => Vec::new(),
    }
}
