//! The WebSocket bridge: each open tab gets its own UI connection to the daemon, and this
//! module carries frames between the two, reconnecting to the daemon when it goes away.
//!
//! One daemon connection per tab, rather than one shared connection fanned out to the tabs:
//! each tab is then a UI in the daemon's own eyes, so the daemon's guarantees hold per tab
//! with nothing re-implemented here. Two tabs race exactly as two terminals do (the first
//! answer wins, the other tab is told `ask-user-withdrawn` with reason `answered`, and its late
//! answer gets `not-pending`); `ask-user-ack` reaches only the tab that answered; a tab that
//! opens or reconnects gets the replay of every pending question. A shared connection would
//! have to route acks and errors back to the tab that answered and make up withdrawals for
//! the others. The cost is one Unix socket per tab, which is nothing.
//!
//! What the page is sent: the daemon's own UI frames (`ask-user-request`,
//! `ask-user-withdrawn`, `ask-user-ack`, `error`) as JSON text messages, plus
//! `{"type":"daemon","state":"connected","pending":N}` after each subscription and
//! `{"type":"daemon","state":"down","error":"…","retryMs":N}` while the daemon is unreachable.
//! What the page may send: `ask-user-response` frames only, checked with the daemon's own
//! parser before they are passed on; a page cannot ask, watch or cancel.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::{interval, sleep, Interval, MissedTickBehavior};

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::{parse_inbound, ErrorFrame, Inbound, ServerFrame};

/// First delay before reconnecting to the daemon; doubled up to `MAX_RETRY`.
const MIN_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(3);
/// Pings keep idle connections open through proxies (nginx drops them after 60 s by default)
/// and reveal a vanished phone.
const KEEPALIVE: Duration = Duration::from_secs(25);
/// WebSocket close code "going away".
const GOING_AWAY: u16 = 1001;

/// What every tab's bridge shares.
pub struct Bridge {
    pub socket: PathBuf,
    /// Becomes `true` when `askbus web` stops: tabs are closed with a reason.
    pub stopping: watch::Receiver<bool>,
}

enum End {
    TabClosed,
    DaemonGone(String),
}

/// Serves one tab until it closes (or `askbus web` stops).
pub async fn tab(mut ws: WebSocket, bridge: &Bridge, peer: SocketAddr) {
    let client = format!("askbus-web/{} ({peer})", env!("CARGO_PKG_VERSION"));
    let mut stopping = bridge.stopping.clone();
    let mut keepalive = interval(KEEPALIVE);
    keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut retry = MIN_RETRY;
    loop {
        let why = match Ui::subscribe(&bridge.socket, Some(&client)).await {
            Ok(ui) => {
                retry = MIN_RETRY;
                let hello = json!({
                    "type": "daemon",
                    "state": "connected",
                    "pending": ui.pending_at_subscribe(),
                });
                if send_json(&mut ws, &hello).await.is_err() {
                    return;
                }
                match pump(&mut ws, ui, &mut stopping, &mut keepalive).await {
                    End::TabClosed => return,
                    End::DaemonGone(why) => why,
                }
            }
            Err(e) => e.to_string(),
        };
        let down = json!({
            "type": "daemon",
            "state": "down",
            "error": why,
            "retryMs": retry.as_millis() as u64,
        });
        if send_json(&mut ws, &down).await.is_err() {
            return;
        }
        if !wait_while_down(&mut ws, retry, &mut stopping, &mut keepalive).await {
            return;
        }
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Carries frames both ways while the daemon connection lasts.
async fn pump(
    ws: &mut WebSocket,
    mut ui: Ui,
    stopping: &mut watch::Receiver<bool>,
    keepalive: &mut Interval,
) -> End {
    loop {
        tokio::select! {
            event = ui.next() => match event {
                Ok(Some(event)) => {
                    if send_json(ws, &ui_frame(event)).await.is_err() {
                        return End::TabClosed;
                    }
                }
                Ok(None) => return End::DaemonGone("askbusd closed the connection".into()),
                Err(e) => return End::DaemonGone(e.to_string()),
            },
            msg = ws.recv() => match page_message(msg) {
                Page::Closed => return End::TabClosed,
                Page::Ignore => {}
                Page::Refused(err) => {
                    if send_json(ws, &ServerFrame::Error(err)).await.is_err() {
                        return End::TabClosed;
                    }
                }
                Page::Answer { correlation_id, answers, cancelled } => {
                    let sent = if cancelled {
                        ui.dismiss(&correlation_id).await
                    } else {
                        ui.answer(&correlation_id, &answers).await
                    };
                    if let Err(e) = sent {
                        return End::DaemonGone(e.to_string());
                    }
                }
            },
            _ = keepalive.tick() => {
                if ws.send(Message::Ping(Default::default())).await.is_err() {
                    return End::TabClosed;
                }
            }
            _ = until_stopping(stopping) => {
                close(ws).await;
                return End::TabClosed;
            }
        }
    }
}

/// Waits `delay` before the next reconnection, still serving the tab: answers sent meanwhile
/// are refused (the questions they answer died with the daemon). `false` if the tab closed.
async fn wait_while_down(
    ws: &mut WebSocket,
    delay: Duration,
    stopping: &mut watch::Receiver<bool>,
    keepalive: &mut Interval,
) -> bool {
    let timer = sleep(delay);
    tokio::pin!(timer);
    loop {
        tokio::select! {
            _ = &mut timer => return true,
            msg = ws.recv() => {
                let refusal = match page_message(msg) {
                    Page::Closed => return false,
                    Page::Ignore => continue,
                    Page::Refused(err) => err,
                    Page::Answer { correlation_id, .. } => ErrorFrame {
                        code: "unavailable".into(),
                        message: "askbusd is not running, so the question is no longer pending"
                            .into(),
                        correlation_id: Some(correlation_id),
                    },
                };
                if send_json(ws, &ServerFrame::Error(refusal)).await.is_err() {
                    return false;
                }
            }
            _ = keepalive.tick() => {
                if ws.send(Message::Ping(Default::default())).await.is_err() {
                    return false;
                }
            }
            _ = until_stopping(stopping) => {
                close(ws).await;
                return false;
            }
        }
    }
}

/// A message from the page, classified.
enum Page {
    Closed,
    /// Pings, pongs, binary messages.
    Ignore,
    /// Not an answer: the page is told why, and nothing reaches the daemon.
    Refused(ErrorFrame),
    Answer {
        correlation_id: String,
        answers: std::collections::BTreeMap<usize, String>,
        cancelled: bool,
    },
}

fn page_message(msg: Option<Result<Message, axum::Error>>) -> Page {
    let text = match msg {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Page::Closed,
        Some(Ok(Message::Text(text))) => text,
        Some(Ok(_)) => return Page::Ignore,
    };
    match parse_inbound(text.as_bytes()) {
        Ok(Inbound::AskUserResponse(r)) => Page::Answer {
            correlation_id: r.correlation_id,
            answers: r.answers,
            cancelled: r.cancelled,
        },
        Ok(_) => Page::Refused(ErrorFrame {
            code: "forbidden".into(),
            message: "the page may only send ask-user-response frames".into(),
            correlation_id: None,
        }),
        Err(e) => Page::Refused(ErrorFrame::from(&e)),
    }
}

fn ui_frame(event: UiEvent) -> ServerFrame {
    match event {
        UiEvent::Request(r) => ServerFrame::AskUserRequest(r),
        UiEvent::Withdrawn {
            correlation_id,
            reason,
        } => ServerFrame::AskUserWithdrawn {
            correlation_id,
            reason,
        },
        UiEvent::Ack {
            correlation_id,
            outcome,
        } => ServerFrame::AskUserAck {
            correlation_id,
            outcome,
        },
        UiEvent::Error(e) => ServerFrame::Error(e),
    }
}

/// Resolves once `askbus web` is stopping (the `watch::Ref` it yields is not `Send`, so it is
/// dropped here rather than held by the `select!`).
async fn until_stopping(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

async fn send_json(ws: &mut WebSocket, value: &impl serde::Serialize) -> Result<(), axum::Error> {
    let text = serde_json::to_string(value).expect("frames serialize");
    ws.send(Message::Text(text.into())).await
}

async fn close(ws: &mut WebSocket) {
    let frame = CloseFrame {
        code: GOING_AWAY,
        reason: "askbus web stopped".into(),
    };
    let _ = ws.send(Message::Close(Some(frame))).await;
}
