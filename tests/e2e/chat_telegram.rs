//! `askbus chat telegram` against the real daemon and a local stand-in of the Telegram Bot API
//! (written here from the public API reference: `getUpdates` long polling with offsets,
//! `sendMessage`, `editMessageText`, `answerCallbackQuery`, 429 with `retry_after`). The
//! stand-in refuses what the real API refuses: callback data over 64 bytes, text over 4,096
//! characters after entity parsing, a wrong token. A person's taps and replies are updates the
//! test queues; every wait is on the stand-in's or the daemon's events, never a sleep.

use crate::chat_common::{
    allowed_by_rule, allowed_once, ask, chat_log, logged, policy_daemon, producer, shell_approval,
    state_holds, Chat, Shared,
};
use crate::harness as common;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::routing::post;
use axum::Router;
use common::Daemon;
use serde_json::{json, Value};

const TOKEN: &str = "123456:TEST-token_abc";
const CHAT: i64 = 4242;
const ALICE: i64 = 1001;
const MALLORY: i64 = 6666;

#[derive(Debug, Clone)]
struct Message {
    text: String,
    markup: Value,
    edits: usize,
}

#[derive(Default)]
struct St {
    messages: BTreeMap<i64, Message>,
    next_message: i64,
    updates: VecDeque<Value>,
    next_update: i64,
    /// Every call: method and body.
    calls: Vec<(String, Value)>,
    /// answerCallbackQuery calls: (id, text, show_alert).
    toasts: Vec<(String, String, bool)>,
    /// The next N sendMessage calls get 429 with retry_after 1.
    rate_limit: u32,
    /// The next getUpdates fails with 502 (a dropped gateway).
    fail_poll: bool,
    /// The next getUpdates ignores its offset once (a redelivery).
    redeliver: Vec<Value>,
    refused: Vec<String>,
}

/// The stand-in.
type Stand = Shared<St>;

impl Stand {
    /// Waits until `f` returns something.
    async fn until<T>(&self, what: &str, f: impl FnMut(&St) -> Option<T>) -> T {
        self.until_or(what, f, |_| String::new()).await
    }

    fn push_update(&self, mut u: Value) -> i64 {
        let id = {
            let mut st = self.st.lock().unwrap();
            st.next_update += 1;
            let id = st.next_update;
            u["update_id"] = json!(id);
            st.updates.push_back(u);
            id
        };
        self.changed();
        id
    }

    fn tap(&self, user: i64, msg: i64, data: &str) -> String {
        let qid = format!("cb{}", rand_id());
        self.push_update(json!({"callback_query": {"id": qid,
            "from": {"id": user, "is_bot": false, "first_name": if user == ALICE { "Alice" } else { "Mallory" }},
            "message": {"message_id": msg, "chat": {"id": CHAT, "type": "private"}},
            "chat_instance": "1", "data": data}}));
        qid
    }

    fn reply(&self, user: i64, to: i64, text: &str) {
        self.push_update(json!({"message": {"message_id": 900_000 + rand_id() as i64 % 1000,
            "from": {"id": user, "is_bot": false, "first_name": "Alice"},
            "chat": {"id": CHAT, "type": "private"}, "date": 0, "text": text,
            "reply_to_message": {"message_id": to, "chat": {"id": CHAT, "type": "private"}, "date": 0}}}));
    }

    /// The message whose text contains `needle` (and its id).
    async fn message(&self, needle: &str) -> (i64, Message) {
        self.until(&format!("a message with {needle:?}"), |st| {
            st.messages
                .iter()
                .find(|(_, m)| m.text.contains(needle))
                .map(|(id, m)| (*id, m.clone()))
        })
        .await
    }

    fn get(&self, id: i64) -> Message {
        self.st.lock().unwrap().messages[&id].clone()
    }

    async fn toast(&self, qid: &str) -> (String, bool) {
        self.until("the tap's answer", |st| {
            st.toasts
                .iter()
                .find(|t| t.0 == qid)
                .map(|t| (t.1.clone(), t.2))
        })
        .await
    }

    /// How many messages were posted with `needle` in their text.
    fn posts_with(&self, needle: &str) -> usize {
        let st = self.st.lock().unwrap();
        st.messages
            .values()
            .filter(|m| m.text.contains(needle))
            .count()
    }

    fn sends(&self) -> usize {
        let st = self.st.lock().unwrap();
        st.calls.iter().filter(|c| c.0 == "sendMessage").count()
    }
}

fn rand_id() -> u64 {
    fastrand::u64(..1_000_000_000)
}

/// The callback data of the button labelled `label`.
fn button(m: &Message, label: &str) -> String {
    m.markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().unwrap().iter())
        .find(|b| b["text"] == label)
        .and_then(|b| b["callback_data"].as_str())
        .unwrap_or_else(|| panic!("no button {label:?} in {}", m.markup))
        .to_owned()
}

fn has_buttons(m: &Message) -> bool {
    m.markup["inline_keyboard"].as_array().is_some_and(|rows| {
        rows.iter()
            .any(|r| r.as_array().is_some_and(|r| !r.is_empty()))
    })
}

/// Text as Telegram counts it: tags stripped, entities decoded.
fn visible(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

type Reply = ([(axum::http::header::HeaderName, &'static str); 1], String);

fn j(v: Value) -> Reply {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
}

fn err(code: u16, desc: &str) -> Reply {
    j(json!({"ok": false, "error_code": code, "description": desc}))
}

/// Checks a message as the real API does.
fn check_message(body: &Value) -> Result<(), String> {
    let text = body["text"].as_str().unwrap_or("");
    let n = visible(text).chars().count();
    if n == 0 {
        return Err("Bad Request: message text is empty".into());
    }
    if n > 4096 {
        return Err("Bad Request: message is too long".into());
    }
    for row in body["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for b in row.as_array().into_iter().flatten() {
            if let Some(d) = b["callback_data"].as_str() {
                if d.is_empty() || d.len() > 64 {
                    return Err("Bad Request: BUTTON_DATA_INVALID".into());
                }
            }
        }
    }
    Ok(())
}

async fn api(
    State(s): State<Stand>,
    UrlPath((bot, method)): UrlPath<(String, String)>,
    raw: axum::body::Bytes,
) -> Reply {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    if bot != format!("bot{TOKEN}") {
        return err(401, "Unauthorized");
    }
    if method == "getUpdates" {
        return get_updates(s, body).await;
    }
    let reply = {
        let mut st = s.st.lock().unwrap();
        st.calls.push((method.clone(), body.clone()));
        match method.as_str() {
            "sendMessage" => {
                if st.rate_limit > 0 {
                    st.rate_limit -= 1;
                    j(json!({"ok": false, "error_code": 429,
                        "description": "Too Many Requests: retry after 1",
                        "parameters": {"retry_after": 1}}))
                } else if let Err(e) = check_message(&body) {
                    st.refused.push(e.clone());
                    err(400, &e)
                } else {
                    st.next_message += 1;
                    let id = st.next_message;
                    st.messages.insert(
                        id,
                        Message {
                            text: body["text"].as_str().unwrap_or("").to_owned(),
                            markup: body["reply_markup"].clone(),
                            edits: 0,
                        },
                    );
                    j(json!({"ok": true, "result": {"message_id": id, "date": 0,
                        "chat": {"id": CHAT, "type": "private"}, "text": visible(body["text"].as_str().unwrap_or(""))}}))
                }
            }
            "editMessageText" => {
                let id = body["message_id"].as_i64().unwrap_or(0);
                if let Err(e) = check_message(&body) {
                    st.refused.push(e.clone());
                    err(400, &e)
                } else if let Some(m) = st.messages.get_mut(&id) {
                    m.text = body["text"].as_str().unwrap_or("").to_owned();
                    m.markup = body["reply_markup"].clone();
                    m.edits += 1;
                    j(json!({"ok": true, "result": {"message_id": id}}))
                } else {
                    err(400, "Bad Request: message to edit not found")
                }
            }
            "answerCallbackQuery" => {
                let text = body["text"].as_str().unwrap_or("").to_owned();
                let alert = body["show_alert"].as_bool().unwrap_or(false);
                st.toasts.push((
                    body["callback_query_id"].as_str().unwrap_or("").to_owned(),
                    text,
                    alert,
                ));
                j(json!({"ok": true, "result": true}))
            }
            _ => err(404, "Not Found: method not found"),
        }
    };
    s.changed();
    reply
}

async fn get_updates(s: Stand, body: Value) -> Reply {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let mut rx = s.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        {
            let mut st = s.st.lock().unwrap();
            if std::mem::take(&mut st.fail_poll) {
                drop(st);
                s.changed();
                return err(502, "Bad Gateway");
            }
            if !st.redeliver.is_empty() {
                let again = std::mem::take(&mut st.redeliver);
                return j(json!({"ok": true, "result": again}));
            }
            // Confirmed updates (below the offset) are forgotten, as the API does.
            while st
                .updates
                .front()
                .is_some_and(|u| u["update_id"].as_i64().unwrap_or(0) < offset)
            {
                st.updates.pop_front();
            }
            if !st.updates.is_empty() {
                let out: Vec<Value> = st.updates.iter().cloned().collect();
                return j(json!({"ok": true, "result": out}));
            }
        }
        if tokio::time::timeout_at(deadline, rx.changed())
            .await
            .is_err()
        {
            return j(json!({"ok": true, "result": []}));
        }
    }
}

async fn stand_in() -> (Stand, String) {
    let stand = Stand::new("");
    let app = Router::new()
        .route("/{bot}/{method}", post(api))
        .with_state(stand.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (stand, base)
}

fn chat(d: &Daemon, base: &str, extra: &[&str]) -> Chat {
    let mut cmd = d.cli();
    cmd.args([
        "chat",
        "telegram",
        "--chat",
        &CHAT.to_string(),
        "--allow-user",
    ])
    .arg(ALICE.to_string())
    .args(["--api-base", base, "--poll-timeout", "5", "--state"])
    .arg(d.dir.path().join("chat.json"))
    .args(extra)
    .env("ASKBUS_TELEGRAM_TOKEN", TOKEN);
    Chat::spawn(d, cmd)
}

#[test]
fn every_kind_answered_from_telegram_through_the_daemon() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let (s, base) = stand_in().await;
        let _chat = chat(&d, &base, &[]);
        let mut p = producer(&d).await;

        // yesno: a stranger's tap is refused and logged, the request stays pending; Alice's
        // tap answers it through askbusd; the message is edited to the outcome.
        p.send(ask("q-yesno", json!([{"question": "Deploy to prod?", "header": "Deploy", "type": "yesno"}])))
            .await;
        let (mid, m) = s.message("Deploy to prod?").await;
        assert!(m.text.contains("gemini-cli"), "{}", m.text);
        assert!(m.text.contains("project shop"), "{}", m.text);
        assert!(m.text.contains("min left"), "{}", m.text);
        let yes = button(&m, "Yes");
        assert!(yes.len() <= 64);
        let q = s.tap(MALLORY, mid, &yes);
        let (text, alert) = s.toast(&q).await;
        assert!(alert && text.contains("not allowed"), "{text}");
        // Forged data (random, and a real button's data with one byte changed) answers nothing.
        let q = s.tap(ALICE, mid, "forged-data");
        assert!(s.toast(&q).await.0.contains("not valid"));
        let mut forged = yes.clone().into_bytes();
        forged[12] = if forged[12] == b'A' { b'B' } else { b'A' };
        let q = s.tap(ALICE, mid, &String::from_utf8(forged).unwrap());
        assert!(s.toast(&q).await.0.contains("not valid"));
        p.expect_silence(Duration::from_millis(200)).await;
        let q = s.tap(ALICE, mid, &yes);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "Yes"}), "{r}");
        assert_eq!(s.toast(&q).await.0, "");
        let m = s
            .until("the outcome edit", |st| {
                let m = &st.messages[&mid];
                m.text.contains("Answered in Telegram").then(|| m.clone())
            })
            .await;
        assert!(m.text.contains("Alice (1001)") && m.text.contains("Yes"), "{}", m.text);
        assert!(!has_buttons(&m), "{}", m.markup);
        // A replayed tap after the end answers nothing.
        let q = s.tap(ALICE, mid, &yes);
        assert!(s.toast(&q).await.0.contains("over"));
        p.expect_silence(Duration::from_millis(200)).await;
        let log = chat_log(&d);
        assert!(log.contains("refused a tap by Mallory (6666): not an allowed user"), "{log}");
        assert!(log.contains("forged callback data"), "{log}");

        // multiSelect: toggles (a replayed toggle from an older keyboard is refused), Done.
        p.send(ask("q-multi", json!([{"question": "Which checks?", "header": "Checks",
            "type": "choice", "multiSelect": true, "options": [
                {"label": "lint", "description": ""}, {"label": "test", "description": ""},
                {"label": "bench", "description": ""}]}])))
            .await;
        let (mid, m) = s.message("Which checks?").await;
        let lint = button(&m, "☐ lint");
        s.tap(ALICE, mid, &lint);
        let m = s
            .until("lint checked", |st| {
                let m = &st.messages[&mid];
                m.markup.to_string().contains("☑ lint").then(|| m.clone())
            })
            .await;
        let q = s.tap(ALICE, mid, &lint);
        assert!(s.toast(&q).await.0.contains("changed"));
        s.tap(ALICE, mid, &button(&m, "☐ bench"));
        let m = s
            .until("bench checked", |st| {
                let m = &st.messages[&mid];
                m.markup.to_string().contains("☑ bench").then(|| m.clone())
            })
            .await;
        s.tap(ALICE, mid, &button(&m, "Done"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "lint, bench"}), "{r}");

        // text: a reply to the message answers it.
        p.send(ask("q-text", json!([{"question": "Branch name?", "header": "Branch", "type": "text"}])))
            .await;
        let (mid, _) = s.message("Branch name?").await;
        s.reply(MALLORY, mid, "evil");
        s.reply(ALICE, mid, "feature/chat");
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "feature/chat"}), "{r}");

        // Several questions: a stepper, then Submit.
        p.send(ask("q-steps", json!([
            {"question": "Use a cache?", "header": "Cache", "type": "yesno"},
            {"question": "Which DB?", "header": "DB", "type": "choice", "options": [
                {"label": "SQLite", "description": "a file"}, {"label": "Postgres", "description": "a server"}]}])))
            .await;
        let (mid, m) = s.message("Use a cache?").await;
        s.tap(ALICE, mid, &button(&m, "No"));
        let m = s
            .until("step 2", |st| {
                let m = &st.messages[&mid];
                m.text.contains("Question 2 of 2").then(|| m.clone())
            })
            .await;
        s.tap(ALICE, mid, &button(&m, "Postgres"));
        let m = s
            .until("submit", |st| {
                let m = &st.messages[&mid];
                m.markup.to_string().contains("Submit").then(|| m.clone())
            })
            .await;
        s.tap(ALICE, mid, &button(&m, "Submit"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "No", "1": "Postgres"}), "{r}");

        // Approval: the command in a code block, Allow once / Allow always / Deny; Deny asks
        // for a reason with a force-reply prompt, answered by a reply.
        p.send(json!({"type": "tool-confirmation-request", "correlationId": "a-1",
            "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build"}},
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": "rm -rf build",
                "rootCommand": "rm", "rootCommands": ["rm"]},
            "outcomes": ["proceed_once", "proceed_always", "cancel"],
            "context": {"agent": "gemini-cli", "project": "shop"}}))
            .await;
        let (mid, m) = s.message("Confirm Shell Command").await;
        assert!(m.text.contains("<pre>rm -rf build</pre>"), "{}", m.text);
        button(&m, "Allow once");
        button(&m, "Allow always");
        s.tap(ALICE, mid, &button(&m, "Deny"));
        let (pid, prompt) = s.message("Why deny").await;
        let body = s
            .until("the prompt's call", |st| {
                st.calls
                    .iter()
                    .rev()
                    .find(|c| c.0 == "sendMessage" && c.1["reply_markup"]["force_reply"] == true)
                    .map(|c| c.1.clone())
            })
            .await;
        assert_eq!(body["reply_parameters"]["message_id"], mid, "{body}");
        assert!(prompt.text.contains("Confirm Shell Command"));
        let m = s
            .until("the deny row", |st| {
                let m = &st.messages[&mid];
                m.markup.to_string().contains("Deny without a reason").then(|| m.clone())
            })
            .await;
        let _ = m;
        s.reply(ALICE, pid, "not on a Friday");
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["outcome"], "cancel", "{r}");
        assert_eq!(r["message"], "not on a Friday", "{r}");
        let m = s
            .until("the approval's outcome", |st| {
                let m = &st.messages[&mid];
                m.text.contains("Decided in Telegram").then(|| m.clone())
            })
            .await;
        assert!(!has_buttons(&m));

        // Allow always maps to proceed_always.
        p.send(json!({"type": "tool-confirmation-request", "correlationId": "a-2",
            "toolCall": {"name": "run_shell_command", "args": {"command": "ls"}},
            "details": {"type": "exec", "title": "List files", "command": "ls",
                "rootCommand": "ls", "rootCommands": ["ls"]},
            "outcomes": ["proceed_once", "proceed_always", "cancel"]}))
            .await;
        let (mid, m) = s.message("List files").await;
        s.tap(ALICE, mid, &button(&m, "Allow always"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["outcome"], "proceed_always", "{r}");
        assert!(s.st.lock().unwrap().refused.is_empty());
    });
}

#[test]
fn ended_elsewhere_spoofing_text_and_limits() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let (s, base) = stand_in().await;
        let _chat = chat(&d, &base, &[]);
        let mut p = producer(&d).await;
        let spoof = "Pick <a href=\"https://evil\">OK</a> \u{202E}evil\u{202C} @everyone <b>now</b>\u{200B}";
        p.send(ask("q-spoof", json!([{"question": spoof, "header": "Spoof", "type": "yesno"}])))
            .await;
        let (mid, m) = s.message("Pick").await;
        assert!(!m.text.contains("<a "), "{}", m.text);
        assert!(m.text.contains("&lt;a href=&quot;https://evil&quot;&gt;"), "{}", m.text);
        assert!(!m.text.contains('\u{202E}') && !m.text.contains('\u{200B}'), "{}", m.text);
        assert!(m.text.contains("@\u{2060}everyone"), "{}", m.text);
        // Another UI answers first: the message is edited, its buttons removed.
        let (mut ui, _) = d.ui().await;
        ui.recv_type("ask-user-request").await;
        ui.send(common::answer("q-spoof", json!({"0": "No"}))).await;
        p.recv_type("ask-user-response").await;
        let m = s
            .until("the ended edit", |st| {
                let m = &st.messages[&mid];
                m.text.contains("Answered elsewhere").then(|| m.clone())
            })
            .await;
        assert!(!has_buttons(&m));
        // A withdrawn one too.
        p.send(ask("q-gone", json!([{"question": "Still there?", "header": "X", "type": "yesno"}])))
            .await;
        let (mid, _) = s.message("Still there?").await;
        p.send(json!({"type": "ask-user-cancel", "correlationId": "q-gone"})).await;
        s.until("the withdrawn edit", |st| {
            st.messages[&mid].text.contains("Withdrawn").then_some(())
        })
        .await;
        // A question longer than a Telegram message is cut to fit; the stand-in would refuse more.
        let long = "word ".repeat(3000);
        p.send(ask("q-long", json!([{"question": long, "header": "Long", "type": "yesno"}])))
            .await;
        let (_, m) = s.message("Long").await;
        assert!(visible(&m.text).chars().count() <= 4096);
        assert!(s.st.lock().unwrap().refused.is_empty());
        // The stand-in fails a sender over the limits, as the real API does.
        let http = reqwest::Client::new();
        let url = format!("{base}/bot{TOKEN}/sendMessage");
        let r: Value = http
            .post(&url)
            .json(&json!({"chat_id": CHAT, "text": "x".repeat(4097)}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["error_code"], 400, "{r}");
        let r: Value = http
            .post(&url)
            .json(&json!({"chat_id": CHAT, "text": "x", "reply_markup": {"inline_keyboard":
                [[{"text": "b", "callback_data": "x".repeat(65)}]]}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["description"], "Bad Request: BUTTON_DATA_INVALID", "{r}");
        // The token is in no log line.
        assert!(!chat_log(&d).contains(TOKEN));
    });
}

#[test]
fn rate_limits_drops_redelivery_restart_and_digest() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let (s, base) = stand_in().await;
        s.st.lock().unwrap().rate_limit = 2;
        let mut c = chat(&d, &base, &["--max-messages", "3"]);
        let mut p = producer(&d).await;
        // Rate limited twice (retry_after 1): the message still arrives, once.
        p.send(ask(
            "r-1",
            json!([{"question": "First?", "header": "One", "type": "yesno"}]),
        ))
        .await;
        let (mid, m) = s.message("First?").await;
        assert_eq!(s.sends(), 3);
        // The poll connection drops; a tap queued meanwhile still arrives, once.
        s.st.lock().unwrap().fail_poll = true;
        s.changed();
        s.until("the failed poll", |st| (!st.fail_poll).then_some(()))
            .await;
        let no = button(&m, "No");
        let tap = {
            let qid = "cb-redeliver".to_owned();
            json!({"callback_query": {"id": qid, "from": {"id": ALICE, "first_name": "Alice"},
                "message": {"message_id": mid, "chat": {"id": CHAT}}, "data": no}})
        };
        let uid = s.push_update(tap.clone());
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["answers"], json!({"0": "No"}));
        // The same update delivered again (as after a lost confirmation) is not applied again.
        let mut again = tap;
        again["update_id"] = json!(uid);
        s.st.lock().unwrap().redeliver = vec![again];
        s.changed();
        logged(&d, "refused a redelivered update").await;

        // Restart: a pending request's message is not posted again.
        p.send(ask(
            "r-2",
            json!([{"question": "Second?", "header": "Two", "type": "yesno"}]),
        ))
        .await;
        let (mid2, _) = s.message("Second?").await;
        let before = s.sends();
        // The state file is written within 200 ms of a change.
        state_holds(&d, "r-2").await;
        let state = d.dir.path().join("chat.json");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
            0o600
        );
        drop(c);
        // A tap made while askbus chat is down waits at Telegram; the restarted chat's first
        // poll can bring it before askbusd's replay brings the request it names (askbusd is
        // stopped here so it does, every time): the tap is held for the replay, not refused
        // as over. Its buttons still work after the restart (same key, same handle).
        let m2 = s.get(mid2);
        s.tap(ALICE, mid2, &button(&m2, "Yes"));
        d.signal(libc::SIGSTOP);
        c = chat(&d, &base, &["--max-messages", "3"]);
        logged(&d, "waits for askbusd's replay").await;
        d.signal(libc::SIGCONT);
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "r-2");
        assert_eq!(s.sends(), before, "nothing posted again after the restart");

        // A burst: 3 messages of their own, the rest in one digest.
        for i in 0..30 {
            p.send(ask(
                &format!("b-{i}"),
                json!([{"question": format!("Burst {i}?"), "header": "B", "type": "yesno"}]),
            ))
            .await;
        }
        let (did, _) = s.message("27 more requests are waiting").await;
        assert_eq!(s.sends(), before + 4);
        // As one ends, the oldest in the digest gets its message.
        p.send(json!({"type": "ask-user-cancel", "correlationId": "b-0"}))
            .await;
        s.message("Burst 3?").await;
        s.until("the digest's count", |st| {
            st.messages[&did].text.contains("26 more").then_some(())
        })
        .await;
        drop(c);
    });
}

/// The help names the platforms that exist (Telegram, Slack, Discord) and no other: a
/// newcomer who reads a platform's name there finds its `askbus chat PLATFORM`.
#[test]
fn help_names_only_the_platforms_that_exist() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(common::cli_bin())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let chat = help(&["chat", "--help"]);
    for platform in ["telegram", "slack", "discord"] {
        assert!(chat.contains(platform), "{chat}");
        help(&["chat", platform, "--help"]);
    }
    let top = help(&["--help"]);
    let line = top
        .lines()
        .find(|l| l.trim_start().starts_with("chat "))
        .unwrap_or_else(|| panic!("{top}"));
    assert!(line.contains("Telegram, Slack or Discord"), "{line}");
    for args in [&["--help"][..], &["chat", "--help"]] {
        let text = help(args).to_lowercase();
        for absent in ["whatsapp", "matrix", "teams"] {
            assert!(!text.contains(absent), "{args:?}: {text}");
        }
    }
}

/// What a tap on "Allow always" (`wide`: on "Allow always, every project") leaves: the daemon,
/// its rule file, the stand-in, the chat and the producer, once the tap has written the rule
/// the message showed before it (checked here, as is the message's outcome) and askbusd has
/// sent the decision.
struct Tapped {
    d: Daemon,
    _admin: tempfile::TempDir,
    s: Stand,
    _chat: Chat,
    p: common::Raw,
}

/// An approval of `npm run build` in project shop, its "Allow always" (or its widened twin)
/// tapped by Alice.
async fn allow_always_tapped(wide: bool) -> Tapped {
    let (d, admin, file) = policy_daemon();
    let (s, base) = stand_in().await;
    let chat = chat(&d, &base, &[]);
    let mut p = producer(&d).await;
    let rule = |scope: &str| {
        format!(
            "allow run_shell_command commands starting \"npm\" {scope} ({}, user tier, \
             priority 4.95)",
            file.display()
        )
    };
    let (shop, every) = (rule("in project shop"), rule("in every project"));

    p.send(shell_approval("first", "npm run build", "shop"))
        .await;
    let (mid, m) = s.message("npm run build").await;
    let shown = visible(&m.text);
    for line in [
        format!("Allow always: writes the rule: {shop}"),
        format!("Allow always, every project: writes the rule: {every}"),
    ] {
        assert!(shown.contains(&line), "{line} not in {shown}");
    }
    assert!(!file.exists(), "no rule before the tap");
    let label = if wide {
        "Allow always, every project"
    } else {
        "Allow always"
    };
    let data = button(&m, label);
    assert!(data.len() <= 64, "{data}");
    s.tap(ALICE, mid, &data);
    allowed_once(&mut p, "first").await;
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("commandPrefix = \"npm\""), "{written}");
    assert_eq!(
        written.contains("askbusProject = \"shop\""),
        !wide,
        "{written}"
    );
    let m = s
        .until("the outcome edit", |st| {
            let m = &st.messages[&mid];
            m.text.contains("Decided in Telegram").then(|| m.clone())
        })
        .await;
    let written_rule = if wide { &every } else { &shop };
    assert!(
        visible(&m.text).contains(&format!("Allow always, writing the rule: {written_rule}")),
        "{}",
        m.text
    );
    assert!(!has_buttons(&m));
    Tapped {
        d,
        _admin: admin,
        s,
        _chat: chat,
        p,
    }
}

/// "Allow always" shows the exact rule before the tap; the tap writes that rule (as the chat
/// process's user, into its policy file) and sends the decision through the daemon; the
/// next identical call is allowed by the daemon with no UI, a different one is asked.
#[test]
fn allow_always_shows_and_writes_the_rule_the_daemon_then_applies() {
    common::rt().block_on(async {
        // Every field bound: the chat and the admin dir live to the end.
        let Tapped {
            d,
            _admin,
            s,
            _chat,
            mut p,
        } = allow_always_tapped(false).await;
        assert!(chat_log(&d).contains("wrote the rule"), "{}", chat_log(&d));

        // The same call again: the daemon allows it by the rule, never shown in the chat.
        allowed_by_rule(&mut p, "next", "npm test", "shop").await;
        // A different command, and the same in another project: asked in the chat.
        p.send(shell_approval("other", "rm -rf out", "shop")).await;
        s.message("rm -rf out").await;
        p.send(shell_approval("elsewhere", "npm test", "web")).await;
        let (_, m) = s.message("project web").await;
        assert!(visible(&m.text).contains("npm test"), "{}", m.text);
        let npm_test_posts = s.posts_with("npm test");
        assert_eq!(npm_test_posts, 1, "the rule's call was never posted");
    });
}

/// "Allow always, every project" (the web page's widening, in the chat): the message shows the
/// wider rule beside the project's before the tap; the tap writes the wider one, so the same
/// call in another project is allowed by the daemon with no UI, and nothing is posted for it.
#[test]
fn allow_always_widened_to_every_project_writes_the_wider_rule() {
    common::rt().block_on(async {
        let Tapped {
            d: _d,
            _admin,
            s,
            _chat,
            mut p,
        } = allow_always_tapped(true).await;
        // The same call in another project: the daemon allows it by the wider rule.
        allowed_by_rule(&mut p, "web", "npm test", "web").await;
        // A different command is still asked in the chat, and npm test was never posted.
        p.send(shell_approval("other", "rm -rf out", "web")).await;
        s.message("rm -rf out").await;
        let npm_test_posts = s.posts_with("npm test");
        assert_eq!(npm_test_posts, 0, "the wider rule's call was never posted");
    });
}

/// The countdown in words is kept true: an open request's message is edited when its words
/// change (here from "1 min left" to "less than a minute left", a short timeout driving it;
/// the test waits on the stand-in's edit), its buttons unchanged and still good; a request
/// that ended is never edited again.
#[test]
fn the_countdown_is_edited_as_time_passes_and_not_after_the_end() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let (s, base) = stand_in().await;
        let _chat = chat(&d, &base, &[]);
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
        let (bid, b) = s.message("Ship the short one?").await;
        assert!(visible(&b.text).contains("1 min left"), "{}", b.text);
        s.tap(ALICE, bid, &button(&b, "Yes"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "short", "{r}");
        let ended = s
            .until("the outcome edit", |st| {
                let m = &st.messages[&bid];
                m.text.contains("Answered in Telegram").then(|| m.clone())
            })
            .await;

        // Open: its words change 5 s in.
        p.send(timed("long", "Ship the long one?", 65_000)).await;
        let (aid, a) = s.message("Ship the long one?").await;
        assert!(visible(&a.text).contains("1 min left"), "{}", a.text);
        assert_eq!(a.edits, 0);
        let edited = s
            .until("the countdown edit", |st| {
                let m = &st.messages[&aid];
                m.text
                    .contains("less than a minute left")
                    .then(|| m.clone())
            })
            .await;
        assert_eq!(edited.edits, 1, "one edit for the one change of words");
        assert_eq!(edited.markup, a.markup, "the same buttons");
        let b = s.get(bid);
        assert_eq!(
            b.edits, ended.edits,
            "an ended request is not edited: {}",
            b.text
        );
        assert!(!b.text.contains("less than a minute"), "{}", b.text);
        // The buttons drawn before the edit still answer.
        s.tap(ALICE, aid, &button(&a, "No"));
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(
            (r["correlationId"].clone(), r["answers"].clone()),
            (json!("long"), json!({"0": "No"})),
            "{r}"
        );
        assert!(s.st.lock().unwrap().refused.is_empty());
    });
}

/// A rule that cannot be written sends nothing: the person is told, the request stays
/// pending and its buttons come back.
#[test]
fn allow_always_whose_rule_cannot_be_written_sends_nothing() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let (s, base) = stand_in().await;
        let _chat = chat(&d, &base, &[]);
        let mut p = producer(&d).await;
        let dir = d.dir.path().join("askbus/policies");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("askbus-rules.toml");
        std::fs::write(&file, "this is [not toml").unwrap();

        p.send(shell_approval("first", "npm run build", "shop"))
            .await;
        let (mid, m) = s.message("npm run build").await;
        let q = s.tap(ALICE, mid, &button(&m, "Allow always"));
        let (text, alert) = s.toast(&q).await;
        assert!(alert && text.contains("rule was not written"), "{text}");
        p.expect_silence(Duration::from_millis(200)).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "this is [not toml");
        let m = s
            .until("the buttons back", |st| {
                let m = &st.messages[&mid];
                (m.edits > 0 && m.markup.to_string().contains("Allow always")).then(|| m.clone())
            })
            .await;
        s.tap(ALICE, mid, &button(&m, "Allow once"));
        let r = p.recv_type("tool-confirmation-response").await;
        assert_eq!(r["outcome"], "proceed_once", "{r}");
        assert!(
            chat_log(&d).contains("the rule was not written"),
            "{}",
            chat_log(&d)
        );
    });
}
