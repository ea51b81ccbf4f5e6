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
//! A tab's filter (`/ws?project=P&agent=A&session=S&node=N`, the page's own `?project=…`
//! passed on)
//! is the daemon's `subscribe` filter on the tab's connection: a filtered tab is never sent
//! another project's request, live or replayed, and the daemon refuses its answers to them.
//! A filter the daemon would refuse is refused here first (an `error` with code
//! `invalid-filter`, then the WebSocket is closed with 1008), so a typo never reads as
//! "askbusd is not running".
//!
//! What the page is sent: the daemon's own UI frames (`ask-user-request`,
//! `ask-user-withdrawn`, `ask-user-ack`, the approvals' `tool-confirmation-request`,
//! `-withdrawn`, `-ack`, and `error`) as JSON text messages, plus
//! `{"type":"daemon","state":"connected","pending":N,"filter":{…}}` after each subscription
//! and `{"type":"daemon","state":"down","error":"…","retryMs":N}` while the daemon is
//! unreachable. What the page may send: `ask-user-response` and `tool-confirmation-response`
//! frames only, checked with the daemon's own parser before they are passed on; a page
//! cannot ask, watch or cancel.
//!
//! "Allow always" goes through askbus's one path (`crate::always`): each
//! `tool-confirmation-request` reaches the page with `askbusAlways`, the "always" buttons it
//! may offer and the rule each writes (`rule`, and `everyProject` when the person may widen
//! it), so the page shows the rule before the tap. A decision with one of those outcomes (and
//! `anyProject: true` to widen) has its rule written here before it is passed on, with the
//! outcome the agent is sent (`proceed_once` for askbus's own "always" where the agent offers
//! none); the page is told `{"type":"rule-written","correlationId":…,"rule":…}`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::{interval, MissedTickBehavior};

use askbus::client::{UiAnswerer, UiEvent, UiSubscription, Update};
use askbus::protocol::{
    check_context_value, parse_inbound, ApprovalWithdrawn, Decision, ErrorFrame, Inbound,
    ServerFrame, SubscribeFilter, UiApproval,
};

use crate::always;

/// Pings keep idle connections open through proxies (nginx drops them after 60 s by default)
/// and reveal a vanished phone.
const KEEPALIVE: Duration = Duration::from_secs(25);
/// WebSocket close code "going away".
const GOING_AWAY: u16 = 1001;
/// WebSocket close code "policy violation": the page must not retry as it is (an invalid
/// filter; a signed-out session).
const POLICY: u16 = 1008;

/// What every tab's bridge shares.
pub struct Bridge {
    pub socket: PathBuf,
    /// Becomes `true` when `askbus web` stops: tabs are closed with a reason.
    pub stopping: watch::Receiver<bool>,
}

/// A tab's filter from its WebSocket query, checked as the daemon checks it (empty values
/// mean "any"); `Err` is the message the page is told.
pub fn filter(
    project: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    node: Option<String>,
) -> Result<SubscribeFilter, String> {
    let check = |name: &str, v: Option<String>| -> Result<Option<String>, String> {
        match v.filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => check_context_value(name, &v)
                .map(|()| Some(v))
                // The daemon words it as a context field; the page calls it a filter.
                .map_err(|e| e.replacen("context.", "filter ", 1)),
        }
    };
    Ok(SubscribeFilter {
        project: check("project", project)?,
        agent: check("agent", agent)?,
        session: check("session", session)?,
        node: check("node", node)?,
    })
}

/// Serves one tab until it closes, `askbus web` stops, or its session is signed out
/// (`revoked`).
pub async fn tab(
    mut ws: WebSocket,
    bridge: &Bridge,
    peer: SocketAddr,
    filter: Result<SubscribeFilter, String>,
    revoked: tokio_util::sync::CancellationToken,
) {
    let filter = match filter {
        Ok(f) => f,
        Err(message) => {
            let refusal = ServerFrame::Error(ErrorFrame {
                code: "invalid-filter".into(),
                message,
                correlation_id: None,
            });
            if send_json(&mut ws, &refusal).await.is_ok() {
                let frame = CloseFrame {
                    code: POLICY,
                    reason: "invalid filter".into(),
                };
                let _ = ws.send(Message::Close(Some(frame))).await;
            }
            return;
        }
    };
    let client = format!("askbus-web/{} ({peer})", env!("CARGO_PKG_VERSION"));
    let mut stopping = bridge.stopping.clone();
    let mut keepalive = interval(KEEPALIVE);
    keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // A person reads this tab: refusals are shown and retried too.
    let mut sub = UiSubscription::new(&bridge.socket, Some(&client))
        .via("web")
        .filtered(filter.clone())
        .persistent();
    // The live connection's answerer; `None` while the daemon is away.
    let mut answerer: Option<UiAnswerer> = None;
    // The approvals on the page, for the rule their "always" writes.
    let mut approvals: HashMap<String, Box<UiApproval>> = HashMap::new();
    loop {
        tokio::select! {
            update = sub.next() => {
                let message = match update {
                    Ok(Update::Connected((pending, live))) => {
                        answerer = Some(live);
                        json!({
                            "type": "daemon",
                            "state": "connected",
                            "pending": pending,
                            "filter": filter,
                        })
                    }
                    Ok(Update::Event(event)) => page_frame(event, &mut approvals),
                    Ok(Update::Down { error, retry_in }) => {
                        answerer = None;
                        approvals.clear();
                        down(&error.to_string(), retry_in)
                    }
                    // Not returned by a persistent subscription.
                    Err(e) => down(&e.to_string(), Duration::ZERO),
                };
                if send_json(&mut ws, &message).await.is_err() {
                    return;
                }
            }
            msg = ws.recv() => {
                let refusal = match page_message(msg) {
                    Page::Closed => return,
                    Page::Ignore => continue,
                    Page::Refused(err) => err,
                    Page::Answer(mut answer, any_project) => match &answerer {
                        Some(a) => {
                            match always_rule(&mut answer, &approvals, any_project) {
                                Ok(None) => {}
                                Ok(Some(written)) => {
                                    if send_json(&mut ws, &written).await.is_err() {
                                        return;
                                    }
                                }
                                Err(refusal) => {
                                    if send_json(&mut ws, &ServerFrame::Error(refusal)).await.is_err() {
                                        return;
                                    }
                                    continue;
                                }
                            }
                            // A failed send means the daemon went away; the subscription
                            // reports it next.
                            let _ = match &answer {
                                Answer::Question { correlation_id, cancelled: true, .. } => {
                                    a.dismiss(correlation_id).await
                                }
                                Answer::Question { correlation_id, answers, .. } => {
                                    a.answer(correlation_id, answers).await
                                }
                                Answer::Approval { correlation_id, decision } => {
                                    a.decide(correlation_id, decision).await
                                }
                            };
                            continue;
                        }
                        // The requests it answers died with the daemon.
                        None => ErrorFrame {
                            code: "unavailable".into(),
                            message: "askbusd is not running, so the request is no longer \
                                      pending"
                                .into(),
                            correlation_id: Some(answer.correlation_id().to_owned()),
                        },
                    },
                };
                if send_json(&mut ws, &ServerFrame::Error(refusal)).await.is_err() {
                    return;
                }
            }
            _ = keepalive.tick() => {
                if ws.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
            _ = until_stopping(&mut stopping) => {
                close(&mut ws, GOING_AWAY, "askbus web stopped").await;
                return;
            }
            _ = revoked.cancelled() => {
                close(&mut ws, POLICY, "signed out").await;
                return;
            }
        }
    }
}

/// The page's notice that the daemon is unreachable, and when the next attempt is.
fn down(error: &str, retry_in: Duration) -> serde_json::Value {
    json!({
        "type": "daemon",
        "state": "down",
        "error": error,
        "retryMs": retry_in.as_millis() as u64,
    })
}

/// A message from the page, classified.
enum Page {
    Closed,
    /// Pings, pongs, binary messages.
    Ignore,
    /// Not an answer: the page is told why, and nothing reaches the daemon.
    Refused(ErrorFrame),
    /// An answer, and whether an "always" rule is to be widened to every project.
    Answer(Answer, bool),
}

/// What the page may send: an answer to a question or a decision on an approval.
enum Answer {
    Question {
        correlation_id: String,
        answers: std::collections::BTreeMap<usize, String>,
        cancelled: bool,
    },
    Approval {
        correlation_id: String,
        decision: Decision,
    },
}

impl Answer {
    fn correlation_id(&self) -> &str {
        match self {
            Answer::Question { correlation_id, .. } | Answer::Approval { correlation_id, .. } => {
                correlation_id
            }
        }
    }
}

fn page_message(msg: Option<Result<Message, axum::Error>>) -> Page {
    let text = match msg {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Page::Closed,
        Some(Ok(Message::Text(text))) => text,
        Some(Ok(_)) => return Page::Ignore,
    };
    // `anyProject` is the page's own word to this bridge (widen an "always" rule), never the
    // daemon's: taken out before the frame is parsed as the daemon parses it.
    let mut any_project = false;
    let mut text = text.to_string();
    if let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(&text) {
        if let Some(v) = m.remove("anyProject") {
            any_project = v == serde_json::Value::Bool(true);
            text = serde_json::Value::Object(m).to_string();
        }
    }
    match parse_inbound(text.as_bytes()) {
        Ok(Inbound::AskUserResponse(r)) => Page::Answer(
            Answer::Question {
                correlation_id: r.correlation_id,
                answers: r.answers,
                cancelled: r.cancelled,
            },
            false,
        ),
        Ok(Inbound::ToolConfirmationResponse(r)) => Page::Answer(
            Answer::Approval {
                correlation_id: r.correlation_id,
                decision: r.decision,
            },
            any_project,
        ),
        Ok(_) => Page::Refused(ErrorFrame {
            code: "forbidden".into(),
            message: "the page may only send ask-user-response and tool-confirmation-response \
                      frames"
                .into(),
            correlation_id: None,
        }),
        Err(e) => Page::Refused(ErrorFrame::from(&e)),
    }
}

/// An "always" decision's rule, written before the decision goes on (with the outcome the
/// agent is sent put in its place); `Ok(Some)` is the page's notice that it was written, `Err`
/// the refusal when it was not (then nothing is sent).
fn always_rule(
    answer: &mut Answer,
    approvals: &HashMap<String, Box<UiApproval>>,
    any_project: bool,
) -> Result<Option<serde_json::Value>, ErrorFrame> {
    let Answer::Approval {
        correlation_id,
        decision: Decision::Decided { outcome, .. },
    } = answer
    else {
        return Ok(None);
    };
    // Not an "always", or an approval this tab was never shown (the daemon answers that).
    let Some(a) = approvals.get(correlation_id.as_str()) else {
        return Ok(None);
    };
    if !always::is_always(*outcome) {
        return Ok(None);
    }
    let refuse = |message: String| ErrorFrame {
        code: "invalid-decision".into(),
        message,
        correlation_id: Some(correlation_id.clone()),
    };
    let Some(offer) = always::offer(a, *outcome) else {
        return Err(refuse(format!(
            "\"{}\" is not offered for this approval",
            outcome.as_str()
        )));
    };
    let written = offer
        .apply(any_project)
        .map_err(|e| refuse(format!("the rule was not written, nothing was sent: {e}")))?;
    *outcome = offer.sent;
    Ok(written.map(|r| {
        json!({"type": "rule-written", "correlationId": correlation_id,
               "rule": always::describe(&r)})
    }))
}

/// An event as the page gets it: the daemon's frame, and an approval's "always" buttons
/// with the rule each writes (`askbusAlways`); `approvals` follows what is on the page.
fn page_frame(
    event: UiEvent,
    approvals: &mut HashMap<String, Box<UiApproval>>,
) -> serde_json::Value {
    match &event {
        UiEvent::Approval(a) => {
            approvals.insert(a.correlation_id.clone(), a.clone());
        }
        UiEvent::ApprovalWithdrawn { correlation_id, .. } => {
            approvals.remove(correlation_id);
        }
        UiEvent::ApprovalAck(ack) => {
            approvals.remove(&ack.correlation_id);
        }
        _ => {}
    }
    let offers = match &event {
        UiEvent::Approval(a) => Some(always::offers(a)),
        _ => None,
    };
    let mut v = serde_json::to_value(ui_frame(event)).expect("server frames serialize");
    if let (Some(offers), Some(m)) = (offers, v.as_object_mut()) {
        let list: Vec<serde_json::Value> = offers
            .iter()
            .map(|o| {
                json!({
                    "outcome": o.chosen.as_str(),
                    "sends": o.sent.as_str(),
                    "rule": o.rule(false).map(always::describe),
                    "everyProject": o.wide.as_ref().map(always::describe),
                })
            })
            .collect();
        m.insert("askbusAlways".into(), list.into());
    }
    v
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
            node: None,
            answered_by: None,
        },
        UiEvent::Ack {
            correlation_id,
            outcome,
        } => ServerFrame::AskUserAck {
            correlation_id,
            outcome,
        },
        UiEvent::Error(e) => ServerFrame::Error(e),
        UiEvent::Approval(a) => ServerFrame::ToolConfirmationRequest(*a),
        UiEvent::ApprovalWithdrawn {
            correlation_id,
            reason,
        } => ServerFrame::ToolConfirmationWithdrawn(ApprovalWithdrawn {
            correlation_id,
            reason,
            node: None,
            answered_by: None,
        }),
        UiEvent::ApprovalAck(a) => ServerFrame::ToolConfirmationAck(a),
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

async fn close(ws: &mut WebSocket, code: u16, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = ws.send(Message::Close(Some(frame))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn approval(outcomes: &[&str]) -> Box<UiApproval> {
        serde_json::from_value(
            json!({"type": "tool-confirmation-request", "correlationId": "a1",
            "toolCall": {"name": "run_shell_command", "args": {"command": "npm test"}},
            "outcomes": outcomes, "timeoutMs": 1000,
            "producer": {"uid": askbus::trust::effective_uid(), "pid": 1}}),
        )
        .expect("a UI approval frame")
    }

    fn decide(outcome: askbus::protocol::ToolOutcome) -> Answer {
        Answer::Approval {
            correlation_id: "a1".into(),
            decision: Decision::allow(outcome),
        }
    }

    #[test]
    fn the_page_is_told_each_always_buttons_rule_and_refused_one_not_offered() {
        use askbus::protocol::ToolOutcome::*;
        let mut approvals = HashMap::new();
        let frame = page_frame(
            UiEvent::Approval(approval(&["proceed_once", "cancel"])),
            &mut approvals,
        );
        let always = &frame["askbusAlways"];
        assert_eq!(always[0]["outcome"], "proceed_always", "{frame}");
        assert_eq!(always[0]["sends"], "proceed_once", "{frame}");
        assert!(
            always[0]["rule"].as_str().unwrap().starts_with(
                "allow run_shell_command commands starting \"npm\" in every project ("
            ),
            "{frame}"
        );
        assert_eq!(always[0]["everyProject"], Value::Null, "{frame}");
        // No rule for a server-wide "always" of a shell command: refused, nothing written.
        let mut answer = decide(ProceedAlwaysServer);
        let e = always_rule(&mut answer, &approvals, false).unwrap_err();
        assert_eq!(e.code, "invalid-decision");
        // Allow once, Deny, or an approval this tab never had: passed on as they are.
        for o in [ProceedOnce, Cancel] {
            assert_eq!(always_rule(&mut decide(o), &approvals, true).unwrap(), None);
        }
        approvals.clear();
        let mut answer = decide(ProceedAlways);
        assert_eq!(always_rule(&mut answer, &approvals, false).unwrap(), None);
        assert!(matches!(
            answer,
            Answer::Approval {
                decision: Decision::Decided {
                    outcome: ProceedAlways,
                    ..
                },
                ..
            }
        ));
    }
}
