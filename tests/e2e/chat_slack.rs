//! `askbus chat slack` against the real daemon and a local stand-in of Slack (written here from
//! Slack's public API reference): the Web API methods it uses (`apps.connections.open` with the
//! app-level token; `chat.postMessage`, `chat.update`, `chat.postEphemeral`, `views.open` with
//! the bot token; 429 with `Retry-After`) and a Socket Mode WebSocket (`hello`, envelopes that
//! must be acked, redelivery of unacked envelopes on a new connection, `disconnect`). The
//! stand-in refuses what Slack refuses: more than 50 blocks, text objects over their limits,
//! button values over 2,000 characters, a wrong token. A person's clicks and modal submissions
//! are envelopes the test sends; every wait is on the stand-in's or the daemon's events.

use crate::chat_common::{
    allowed_by_rule, allowed_once, ask, chat_log, logged, policy_daemon, producer, shell_approval,
    state_holds, Chat, Shared,
};
use crate::harness as common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use common::Daemon;
use serde_json::{json, Value};
use tokio::sync::mpsc;

const APP_TOKEN: &str = "xapp-1-A0TEST-1-abcdef";
const BOT_TOKEN: &str = "xoxb-1-TEST-bot_token";
const CHANNEL: &str = "C0AGENTS";
const ALICE: &str = "U0ALICE";
const MALLORY: &str = "U0MALLORY";

#[derive(Debug, Clone)]
struct Message {
    text: String,
    blocks: Value,
    edits: usize,
}

#[derive(Default)]
struct St {
    messages: BTreeMap<String, Message>,
    next_ts: u64,
    /// Every Web API call: method and body.
    calls: Vec<(String, Value)>,
    /// chat.postEphemeral: (user, text).
    ephemerals: Vec<(String, String)>,
    /// views.open: (trigger_id, view).
    views: Vec<(String, Value)>,
    /// Envelopes sent and not yet acked: redelivered on the next connection, as Slack does.
    unacked: BTreeMap<String, Value>,
    acks: Vec<String>,
    next_envelope: u64,
    conn: Option<mpsc::UnboundedSender<String>>,
    connections: usize,
    /// The next N chat.postMessage calls get 429 with Retry-After: 1.
    rate_limit: u32,
    refused: Vec<String>,
}

/// The stand-in.
type Stand = Shared<St>;

impl Stand {
    async fn until<T>(&self, what: &str, f: impl FnMut(&St) -> Option<T>) -> T {
        self.until_or(what, f, |st| {
            format!("calls: {:#?}; acks {:?}", st.calls, st.acks)
        })
        .await
    }

    /// Sends an interactive envelope (now, or on the next connection); its id.
    fn envelope(&self, payload: Value) -> String {
        let id = {
            let mut st = self.st.lock().unwrap();
            st.next_envelope += 1;
            let id = format!("env-{}", st.next_envelope);
            let env = json!({"envelope_id": id, "type": "interactive", "payload": payload,
                "accepts_response_payload": false, "retry_attempt": 0, "retry_reason": ""});
            if let Some(c) = &st.conn {
                let _ = c.send(env.to_string());
            }
            st.unacked.insert(id.clone(), env);
            id
        };
        self.changed();
        id
    }

    /// The same envelope again, as Slack retries one (retry_attempt 1).
    fn redeliver(&self, id: &str, payload: Value) {
        let st = self.st.lock().unwrap();
        let env = json!({"envelope_id": id, "type": "interactive", "payload": payload,
            "accepts_response_payload": false, "retry_attempt": 1, "retry_reason": "timeout"});
        if let Some(c) = &st.conn {
            let _ = c.send(env.to_string());
        }
    }

    fn click(&self, user: &str, ts: &str, value: &str) -> String {
        let name = if user == ALICE { "alice" } else { "mallory" };
        self.envelope(json!({"type": "block_actions",
            "user": {"id": user, "username": name, "name": name, "team_id": "T0TEAM"},
            "api_app_id": "A0TEST", "team": {"id": "T0TEAM", "domain": "acme"},
            "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL, "is_ephemeral": false},
            "trigger_id": format!("trig-{}", fastrand::u32(..)),
            "channel": {"id": CHANNEL, "name": "agents"},
            "message": {"type": "message", "ts": ts},
            "response_url": "https://hooks.invalid/actions/x",
            "actions": [{"action_id": "b0", "block_id": "r0", "type": "button",
                "value": value, "action_ts": "1700000000.1"}]}))
    }

    /// Submits the last modal opened with `text`.
    async fn submit(&self, user: &str, text: &str) {
        let view = self
            .until("a modal", |st| st.views.last().map(|v| v.1.clone()))
            .await;
        self.envelope(json!({"type": "view_submission",
            "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0TEAM"},
            "api_app_id": "A0TEST", "trigger_id": "trig-submit",
            "view": {"id": "V0MODAL", "type": "modal", "callback_id": view["callback_id"],
                "private_metadata": view["private_metadata"],
                "state": {"values": {"reply": {"text": {"type": "plain_text_input", "value": text}}}}}}));
    }

    async fn message(&self, needle: &str) -> (String, Message) {
        self.until(&format!("a message with {needle:?}"), |st| {
            st.messages
                .iter()
                .find(|(_, m)| visible(&m.blocks).contains(needle))
                .map(|(ts, m)| (ts.clone(), m.clone()))
        })
        .await
    }

    async fn message_where(&self, ts: &str, what: &str, f: impl Fn(&Message) -> bool) -> Message {
        self.until(what, |st| {
            let m = &st.messages[ts];
            f(m).then(|| m.clone())
        })
        .await
    }

    async fn ephemeral(&self, user: &str, n: usize) -> String {
        self.until("an ephemeral notice", |st| {
            st.ephemerals
                .iter()
                .filter(|e| e.0 == user)
                .nth(n)
                .map(|e| e.1.clone())
        })
        .await
    }

    async fn acked(&self, id: &str) {
        self.until("the ack", |st| {
            st.acks.iter().any(|a| a == id).then_some(())
        })
        .await;
    }

    fn posts(&self) -> usize {
        let st = self.st.lock().unwrap();
        st.calls
            .iter()
            .filter(|c| c.0 == "chat.postMessage")
            .count()
    }

    fn drop_connection(&self) {
        if let Some(c) = self.st.lock().unwrap().conn.take() {
            let _ = c.send("\0close".into());
        }
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// What a person reads in a message: its text objects and preformatted text, in order.
fn visible(blocks: &Value) -> String {
    let mut out = Vec::new();
    for b in blocks.as_array().into_iter().flatten() {
        match b["type"].as_str().unwrap_or("") {
            "header" | "section" => out.push(unescape(b["text"]["text"].as_str().unwrap_or(""))),
            "context" => {
                for e in b["elements"].as_array().into_iter().flatten() {
                    out.push(unescape(e["text"].as_str().unwrap_or("")));
                }
            }
            "rich_text" => {
                for e in b["elements"].as_array().into_iter().flatten() {
                    for t in e["elements"].as_array().into_iter().flatten() {
                        out.push(unescape(t["text"].as_str().unwrap_or("")));
                    }
                }
            }
            _ => {}
        }
    }
    out.join("\n")
}

fn buttons(m: &Message) -> Vec<(String, Value)> {
    m.blocks
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().iter())
        .map(|e| {
            (
                unescape(e["text"]["text"].as_str().unwrap_or("")),
                e.clone(),
            )
        })
        .collect()
}

fn button(m: &Message, label: &str) -> String {
    buttons(m)
        .into_iter()
        .find(|b| b.0 == label)
        .and_then(|b| b.1["value"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no button {label:?} in {}", m.blocks))
}

/// Checks a message's blocks as Slack does (the limits of Block Kit's reference).
fn check_blocks(blocks: &Value) -> Result<(), String> {
    let blocks = blocks.as_array().ok_or("invalid_blocks: not an array")?;
    if blocks.len() > 50 {
        return Err("invalid_blocks: no more than 50 items allowed".into());
    }
    let text_ok = |t: &Value, max: usize| -> Result<(), String> {
        let s = t["text"].as_str().unwrap_or("");
        let n = unescape(s).chars().count();
        if n == 0 || n > max || !matches!(t["type"].as_str(), Some("plain_text" | "mrkdwn")) {
            return Err(format!(
                "invalid_blocks: text of {n} characters ({})",
                t["type"]
            ));
        }
        Ok(())
    };
    for b in blocks {
        match b["type"].as_str().unwrap_or("") {
            "header" => text_ok(&b["text"], 150)?,
            "section" => text_ok(&b["text"], 3000)?,
            "context" => {
                let e = b["elements"].as_array().ok_or("invalid_blocks: context")?;
                if e.is_empty() || e.len() > 10 {
                    return Err("invalid_blocks: context elements".into());
                }
                for t in e {
                    text_ok(t, 3000)?;
                }
            }
            "rich_text" => {}
            "actions" => {
                let e = b["elements"].as_array().ok_or("invalid_blocks: actions")?;
                if e.is_empty() || e.len() > 25 {
                    return Err("invalid_blocks: actions elements".into());
                }
                let mut ids = BTreeSet::new();
                for x in e {
                    text_ok(&x["text"], 75)?;
                    if !ids.insert(x["action_id"].as_str().unwrap_or("").to_owned()) {
                        return Err("invalid_blocks: duplicate action_id".into());
                    }
                    if x["value"].as_str().is_some_and(|v| v.len() > 2000) {
                        return Err("invalid_blocks: value too long".into());
                    }
                }
            }
            other => return Err(format!("invalid_blocks: unknown type {other}")),
        }
    }
    Ok(())
}

fn ok(v: Value) -> Response {
    let mut v = v;
    v["ok"] = json!(true);
    json_response(v)
}

fn json_response(v: Value) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn fail(error: &str) -> Response {
    json_response(json!({"ok": false, "error": error}))
}

async fn api(
    State(s): State<Stand>,
    UrlPath(method): UrlPath<String>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let want = if method == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    if auth != format!("Bearer {want}") {
        return fail(if auth.is_empty() {
            "not_authed"
        } else {
            "invalid_auth"
        });
    }
    let reply = {
        let mut st = s.st.lock().unwrap();
        st.calls.push((method.clone(), body.clone()));
        match method.as_str() {
            "apps.connections.open" => {
                let url = format!(
                    "{}/link/?ticket={}",
                    s.base.replace("http://", "ws://"),
                    st.calls.len()
                );
                ok(json!({"url": url}))
            }
            "chat.postMessage" => {
                if st.rate_limit > 0 {
                    st.rate_limit -= 1;
                    (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "").into_response()
                } else if body["channel"] != CHANNEL {
                    fail("channel_not_found")
                } else if let Err(e) = check_blocks(&body["blocks"]) {
                    st.refused.push(e.clone());
                    fail(&e)
                } else {
                    st.next_ts += 1;
                    let ts = format!("1700000000.{:06}", st.next_ts);
                    st.messages.insert(
                        ts.clone(),
                        Message {
                            text: body["text"].as_str().unwrap_or("").to_owned(),
                            blocks: body["blocks"].clone(),
                            edits: 0,
                        },
                    );
                    ok(json!({"channel": CHANNEL, "ts": ts, "message": {"ts": ts}}))
                }
            }
            "chat.update" => {
                let ts = body["ts"].as_str().unwrap_or("").to_owned();
                if let Err(e) = check_blocks(&body["blocks"]) {
                    st.refused.push(e.clone());
                    fail(&e)
                } else if body["channel"] != CHANNEL {
                    fail("channel_not_found")
                } else if let Some(m) = st.messages.get_mut(&ts) {
                    m.text = body["text"].as_str().unwrap_or("").to_owned();
                    m.blocks = body["blocks"].clone();
                    m.edits += 1;
                    ok(json!({"channel": CHANNEL, "ts": ts}))
                } else {
                    fail("message_not_found")
                }
            }
            "chat.postEphemeral" => {
                let user = body["user"].as_str().unwrap_or("").to_owned();
                let text = unescape(body["text"].as_str().unwrap_or(""));
                st.ephemerals.push((user, text));
                ok(json!({"message_ts": "1700000000.999999"}))
            }
            "views.open" => {
                let view = body["view"].clone();
                if view["title"]["text"]
                    .as_str()
                    .is_none_or(|t| t.chars().count() > 24)
                {
                    fail("invalid_arguments")
                } else {
                    st.views
                        .push((body["trigger_id"].as_str().unwrap_or("").to_owned(), view));
                    ok(json!({"view": {"id": "V0MODAL"}}))
                }
            }
            _ => fail("unknown_method"),
        }
    };
    s.changed();
    reply
}

async fn link(ws: WebSocketUpgrade, State(s): State<Stand>) -> Response {
    ws.on_upgrade(move |sock| serve_socket(s, sock))
}

async fn serve_socket(s: Stand, mut sock: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    {
        let mut st = s.st.lock().unwrap();
        st.connections += 1;
        let _ = tx.send(
            json!({"type": "hello", "num_connections": 1,
                "debug_info": {"host": "applink-stand-in", "approximate_connection_time": 18060},
                "connection_info": {"app_id": "A0TEST"}})
            .to_string(),
        );
        for env in st.unacked.values() {
            let _ = tx.send(env.to_string());
        }
        st.conn = Some(tx);
    }
    s.changed();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(m) if m == "\0close" => {
                    let _ = sock.send(WsMessage::Close(None)).await;
                    break;
                }
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
                    if let Some(id) = v["envelope_id"].as_str() {
                        let mut st = s.st.lock().unwrap();
                        st.unacked.remove(id);
                        st.acks.push(id.to_owned());
                        drop(st);
                        s.changed();
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    s.changed();
}

async fn stand_in() -> Stand {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stand = Stand::new(&base);
    let app = Router::new()
        .route("/api/{method}", post(api))
        .route("/link/", get(link))
        .with_state(stand.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    stand
}

fn chat(d: &Daemon, s: &Stand, extra: &[&str]) -> Chat {
    let mut cmd = d.cli();
    cmd.args(["chat", "slack", "--channel", CHANNEL, "--allow-user", ALICE])
        .arg("--api-base")
        .arg(format!("{}/api", s.base))
        .arg("--state")
        .arg(d.dir.path().join("chat.json"))
        .args(extra)
        .env("ASKBUS_SLACK_APP_TOKEN", APP_TOKEN)
        .env("ASKBUS_SLACK_BOT_TOKEN", BOT_TOKEN);
    Chat::spawn(d, cmd)
}

#[test]
fn every_kind_answered_from_slack_through_the_daemon() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        let _chat = chat(&d, &s, &[]);
        let mut p = producer(&d).await;

        // yesno: a stranger's click gets an ephemeral "not allowed" and changes nothing; forged
        // values answer nothing; Alice's click answers through askbusd; the message is updated
        // to the outcome without buttons.
        p.send(ask(
            "q-yesno",
            json!([{"question": "Deploy to prod?", "header": "Deploy", "type": "yesno"}]),
        ))
        .await;
        let (ts, m) = s.message("Deploy to prod?").await;
        let shown = visible(&m.blocks);
        assert!(
            shown.contains("gemini-cli") && shown.contains("project shop"),
            "{shown}"
        );
        assert!(shown.contains("min left"), "{shown}");
        assert_eq!(m.blocks[0]["type"], "header", "{}", m.blocks);
        let yes = button(&m, "Yes");
        let env = s.click(MALLORY, &ts, &yes);
        s.acked(&env).await;
        assert!(s.ephemeral(MALLORY, 0).await.contains("not allowed"));
        s.click(ALICE, &ts, "forged-value");
        assert!(s.ephemeral(ALICE, 0).await.contains("not valid"));
        let mut forged = yes.clone().into_bytes();
        forged[12] = if forged[12] == b'A' { b'B' } else { b'A' };
        s.click(ALICE, &ts, &String::from_utf8(forged).unwrap());
        assert!(s.ephemeral(ALICE, 1).await.contains("not valid"));
        p.expect_silence(Duration::from_millis(200)).await;
        s.click(ALICE, &ts, &yes);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "Yes"}), "{r}");
        let m = s
            .message_where(&ts, "the outcome", |m| {
                visible(&m.blocks).contains("Answered in Slack")
            })
            .await;
        assert!(
            visible(&m.blocks).contains("alice (U0ALICE)"),
            "{}",
            visible(&m.blocks)
        );
        assert!(buttons(&m).is_empty(), "{}", m.blocks);
        // The old button clicked again (a replay) answers nothing.
        s.click(ALICE, &ts, &yes);
        assert!(s.ephemeral(ALICE, 2).await.contains("over"));
        p.expect_silence(Duration::from_millis(200)).await;
        let log = chat_log(&d);
        assert!(
            log.contains("refused a tap by mallory (U0MALLORY): not an allowed user"),
            "{log}"
        );

        // multiSelect: toggles (a click on an older rendering is refused), Done.
        p.send(ask(
            "q-multi",
            json!([{"question": "Which checks?", "header": "Checks",
            "type": "choice", "multiSelect": true, "options": [
                {"label": "lint", "description": ""}, {"label": "test", "description": ""}]}]),
        ))
        .await;
        let (ts, m) = s.message("Which checks?").await;
        let lint = button(&m, "☐ lint");
        s.click(ALICE, &ts, &lint);
        let m = s
            .message_where(&ts, "lint checked", |m| {
                buttons(m).iter().any(|b| b.0 == "☑ lint")
            })
            .await;
        s.click(ALICE, &ts, &lint);
        assert!(s.ephemeral(ALICE, 3).await.contains("changed"));
        s.click(ALICE, &ts, &button(&m, "Done"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "lint"}), "{r}");

        // text: the Answer button opens a modal; its submission answers.
        p.send(ask(
            "q-text",
            json!([{"question": "Branch name?", "header": "Branch", "type": "text"}]),
        ))
        .await;
        let (ts, m) = s.message("Branch name?").await;
        s.click(ALICE, &ts, &button(&m, "✏️ Answer"));
        s.submit(ALICE, "feature/slack").await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "feature/slack"}), "{r}");

        // Approval: the command preformatted; Deny opens a modal for the reason.
        p.send(
            json!({"type": "tool-confirmation-request", "correlationId": "a-1",
            "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build"}},
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": "rm -rf build",
                "rootCommand": "rm", "rootCommands": ["rm"]},
            "outcomes": ["proceed_once", "proceed_always", "cancel"],
            "context": {"agent": "gemini-cli", "project": "shop"}}),
        )
        .await;
        let (ts, m) = s.message("Confirm Shell Command").await;
        let code = m
            .blocks
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "rich_text")
            .expect("a preformatted block");
        assert_eq!(code["elements"][0]["type"], "rich_text_preformatted");
        assert_eq!(code["elements"][0]["elements"][0]["text"], "rm -rf build");
        button(&m, "Allow once");
        button(&m, "Allow always");
        let views = s.st.lock().unwrap().views.len();
        s.click(ALICE, &ts, &button(&m, "Deny"));
        s.until("the reason modal", |st| {
            (st.views.len() > views).then_some(())
        })
        .await;
        s.message_where(&ts, "the deny row", |m| {
            buttons(m).iter().any(|b| b.0 == "Deny without a reason")
        })
        .await;
        s.submit(ALICE, "not on a Friday").await;
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (r["outcome"].as_str(), r["message"].as_str()),
            (Some("cancel"), Some("not on a Friday")),
            "{r}"
        );
        let m = s
            .message_where(&ts, "the decision", |m| {
                visible(&m.blocks).contains("Decided in Slack")
            })
            .await;
        assert!(buttons(&m).is_empty());
        assert!(
            s.st.lock().unwrap().refused.is_empty(),
            "{:?}",
            s.st.lock().unwrap().refused
        );
    });
}

#[test]
fn ended_elsewhere_spoofing_limits_drops_redelivery_restart_and_digest() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        s.st.lock().unwrap().rate_limit = 2;
        let mut c = chat(&d, &s, &["--max-messages", "3"]);
        let mut p = producer(&d).await;

        // Text that tries to spoof: markup stays text, bidi and zero-width are neutralised,
        // mentions are defused; rate limited twice, the message still comes, once.
        let spoof =
            "Pick <https://evil|OK> <!channel> \u{202E}evil\u{202C} @everyone *now*\u{200B}";
        p.send(ask(
            "q-spoof",
            json!([{"question": spoof, "header": "Spoof", "type": "yesno"}]),
        ))
        .await;
        let (ts, m) = s.message("Pick").await;
        assert_eq!(s.posts(), 3);
        let section = m
            .blocks
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "section")
            .unwrap();
        assert_eq!(section["text"]["type"], "plain_text");
        let raw = section["text"]["text"].as_str().unwrap();
        assert!(
            raw.contains("&lt;https://evil|OK&gt; &lt;!channel&gt;"),
            "{raw}"
        );
        assert!(
            !raw.contains('\u{202E}') && !raw.contains('\u{200B}'),
            "{raw}"
        );
        assert!(raw.contains("@\u{2060}everyone"), "{raw}");
        assert!(!m.text.contains('<'), "{}", m.text);
        // Another UI answers first: the message is updated, its buttons removed.
        let (mut ui, _) = d.ui().await;
        ui.recv_type("ask-user-request").await;
        ui.send(common::answer("q-spoof", json!({"0": "No"}))).await;
        p.recv_type("ask-user-response").await;
        let m = s
            .message_where(&ts, "the ended edit", |m| {
                visible(&m.blocks).contains("Answered elsewhere")
            })
            .await;
        assert!(buttons(&m).is_empty());

        // A long question fits Slack's limits (the stand-in refuses more).
        let long = "word ".repeat(3000);
        p.send(ask(
            "q-long",
            json!([{"question": long, "header": "Long", "type": "yesno"}]),
        ))
        .await;
        let (ts, m) = s.message("Long").await;
        assert!(s.st.lock().unwrap().refused.is_empty());
        let yes = button(&m, "Yes");

        // The socket drops; a click made meanwhile is delivered on the new connection, once.
        let before = s.st.lock().unwrap().connections;
        s.drop_connection();
        let env = s.click(ALICE, &ts, &yes);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "q-long");
        assert!(s.st.lock().unwrap().connections > before);
        s.acked(&env).await;
        // Slack retries the envelope (its ack was lost): acked again, not applied again.
        let acks = s.st.lock().unwrap().acks.len();
        s.redeliver(
            &env,
            json!({"type": "block_actions",
            "user": {"id": ALICE, "username": "alice"}, "trigger_id": "t",
            "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
            "actions": [{"action_id": "b0", "block_id": "r0", "type": "button", "value": yes}]}),
        );
        s.until("the second ack", |st| (st.acks.len() > acks).then_some(()))
            .await;
        logged(&d, "refused a redelivered envelope").await;
        // A `disconnect` (Slack refreshing the connection) opens a new one.
        let before = s.st.lock().unwrap().connections;
        {
            let st = s.st.lock().unwrap();
            let _ = st.conn.as_ref().unwrap().send(
                json!({"type": "disconnect", "reason": "refresh_requested",
                    "debug_info": {"host": "applink-stand-in"}})
                .to_string(),
            );
        }
        s.until("a new connection", |st| {
            (st.connections > before).then_some(())
        })
        .await;

        // Restart: a pending request's message is not posted again, and its buttons work.
        p.send(ask(
            "r-2",
            json!([{"question": "Second?", "header": "Two", "type": "yesno"}]),
        ))
        .await;
        let (ts2, m2) = s.message("Second?").await;
        let posts = s.posts();
        state_holds(&d, "r-2").await;
        drop(c);
        c = chat(&d, &s, &["--max-messages", "3"]);
        s.click(ALICE, &ts2, &button(&m2, "No"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "r-2");
        assert_eq!(s.posts(), posts, "nothing posted again after the restart");

        // A burst: 3 messages of their own, the rest in one digest.
        for i in 0..20 {
            p.send(ask(
                &format!("b-{i}"),
                json!([{"question": format!("Burst {i}?"), "header": "B", "type": "yesno"}]),
            ))
            .await;
        }
        s.message("17 more requests are waiting").await;
        assert_eq!(s.posts(), posts + 4);
        // The tokens are in no log line.
        let log = chat_log(&d);
        assert!(
            !log.contains(APP_TOKEN) && !log.contains(BOT_TOKEN),
            "{log}"
        );
        drop(c);
    });
}

/// "Allow always" shows the exact rule before the click; the click writes that rule (as the
/// chat process's user, into its policy file) and sends the decision through the daemon; the
/// next identical call is allowed by the daemon with no UI, a different one is asked.
#[test]
fn allow_always_shows_and_writes_the_rule_the_daemon_then_applies() {
    common::rt().block_on(async {
        let (d, _admin, file) = policy_daemon();
        let s = stand_in().await;
        let _chat = chat(&d, &s, &[]);
        let mut p = producer(&d).await;
        let rule = format!(
            "allow run_shell_command commands starting \"npm\" in project shop ({}, user tier, \
             priority 4.95)",
            file.display()
        );

        p.send(shell_approval("first", "npm run build", "shop"))
            .await;
        let (ts, m) = s.message("npm run build").await;
        let shown = visible(&m.blocks);
        assert!(
            shown.contains(&format!("Allow always: writes the rule: {rule}")),
            "{shown}"
        );
        assert!(!file.exists(), "no rule before the click");
        s.click(ALICE, &ts, &button(&m, "Allow always"));
        allowed_once(&mut p, "first").await;
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(written.contains("commandPrefix = \"npm\""), "{written}");
        assert!(written.contains("askbusProject = \"shop\""), "{written}");
        let m = s
            .message_where(&ts, "the decision", |m| {
                visible(&m.blocks).contains("Decided in Slack")
            })
            .await;
        assert!(
            visible(&m.blocks).contains(&format!("Allow always, writing the rule: {rule}")),
            "{}",
            m.blocks
        );
        assert!(buttons(&m).is_empty());

        // The same call again: the daemon allows it by the rule, never shown in the chat.
        allowed_by_rule(&mut p, "next", "npm test", "shop").await;
        // A different command, and the same in another project: asked in the chat.
        p.send(shell_approval("other", "rm -rf out", "shop")).await;
        s.message("rm -rf out").await;
        p.send(shell_approval("elsewhere", "npm test", "web")).await;
        let (_, m) = s.message("project web").await;
        assert!(visible(&m.blocks).contains("npm test"), "{}", m.blocks);
        let npm_test_posts =
            s.st.lock()
                .unwrap()
                .messages
                .values()
                .filter(|m| visible(&m.blocks).contains("npm test"))
                .count();
        assert_eq!(npm_test_posts, 1, "the rule's call was never posted");
    });
}

/// The countdown in words is kept true: an open request's message is updated when its words
/// change (here from "1 min left" to "less than a minute left", a short timeout driving it;
/// the test waits on the stand-in's update), its buttons unchanged and still good; a request
/// that ended is never updated again.
#[test]
fn the_countdown_is_edited_as_time_passes_and_not_after_the_end() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let s = stand_in().await;
        let _chat = chat(&d, &s, &[]);
        let mut p = producer(&d).await;
        let timed = |id: &str, question: &str, ms: u64| {
            let mut a = ask(
                id,
                json!([{"question": question, "header": "Go", "type": "yesno"}]),
            );
            a["timeoutMs"] = json!(ms);
            a
        };
        // Ended first: its words would change 2.5 s in, had it not ended.
        p.send(timed("short", "Ship the short one?", 62_500)).await;
        let (bts, b) = s.message("Ship the short one?").await;
        assert!(visible(&b.blocks).contains("1 min left"), "{}", b.blocks);
        s.click(ALICE, &bts, &button(&b, "Yes"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "short", "{r}");
        let ended = s
            .message_where(&bts, "the outcome update", |m| {
                visible(&m.blocks).contains("Answered in Slack")
            })
            .await;

        // Open: its words change 5 s in.
        p.send(timed("long", "Ship the long one?", 65_000)).await;
        let (ats, a) = s.message("Ship the long one?").await;
        assert!(visible(&a.blocks).contains("1 min left"), "{}", a.blocks);
        assert_eq!(a.edits, 0);
        let edited = s
            .message_where(&ats, "the countdown update", |m| {
                visible(&m.blocks).contains("less than a minute left")
            })
            .await;
        assert_eq!(edited.edits, 1, "one update for the one change of words");
        assert_eq!(buttons(&edited), buttons(&a), "the same buttons");
        let b = s.st.lock().unwrap().messages[&bts].clone();
        assert_eq!(b.edits, ended.edits, "an ended request is not updated");
        assert!(!visible(&b.blocks).contains("less than a minute"));
        // The buttons drawn before the update still answer.
        s.click(ALICE, &ats, &button(&a, "No"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(
            (r["correlationId"].clone(), r["answers"].clone()),
            (json!("long"), json!({"0": "No"})),
            "{r}"
        );
        assert!(s.st.lock().unwrap().refused.is_empty());
    });
}
