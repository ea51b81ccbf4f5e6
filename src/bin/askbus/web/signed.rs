//! The signed-link routes of `askbus web` (links made by `askbus notify`, see `crate::links`):
//! `GET /a/TOKEN` shows what the link would answer and one button, and never acts (link
//! previewers and mail scanners fetch GETs); `POST /a/TOKEN` answers that one question with
//! that one answer, once; `GET /o/TOKEN` signs the browser in, once, and shows the question.
//! The token is the authority here, not a session; the Host/Origin checks still apply.
//!
//! Single use is kept here: a link's nonce is claimed before it acts and remembered until the
//! link expires, so a replay is refused even after the question ended. Each answer is sent on
//! a UI connection of its own named [`crate::links::ANSWERING_CLIENT`], so the bus can tell
//! link answers apart; once the daemon has acknowledged it, that connection also sends a
//! `notify-report` (sink `link`, result `answered`), so askbusd's
//! `askbus_notifications_total` and `askbus watch` count answers given from a pushed
//! notification beside the desktop clicks `askbus notify` reports itself.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use askbusd::client::Connection;
use askbusd::protocol::{
    ClientFrame, NotifyResult, ServerFrame, ToolOutcome, UiApproval, UiRequest,
};

use super::{auth, redirect, App};
use crate::links::{now_unix, KeyError, Link, LinkError, LinkKey, LinkKind};

/// How long the daemon may take to replay the pending requests or acknowledge an answer; past
/// it the person is told so (nothing was answered unless the daemon says so).
const DAEMON_WAIT: Duration = Duration::from_secs(10);

/// The key and the links already used.
pub struct Links {
    /// Loaded at start, or at the first link after a failed start (the socket's directory may
    /// not exist before askbusd first runs).
    key: Mutex<Option<Arc<LinkKey>>>,
    key_path: PathBuf,
    socket: PathBuf,
    /// Nonce → the link's expiry; pruned as links expire.
    used: Mutex<HashMap<String, u64>>,
    /// Answers given through links since the start.
    pub answered: AtomicU64,
}

impl Links {
    /// Loads the key at `key_path` (or makes it); a failure is said on stderr and retried at
    /// the first link, which is refused meanwhile.
    pub fn new(key_path: PathBuf, socket: PathBuf) -> Links {
        let links = Links {
            key: Mutex::new(None),
            key_path,
            socket,
            used: Mutex::new(HashMap::new()),
            answered: AtomicU64::new(0),
        };
        if let Err(e) = links.key() {
            eprintln!("askbus web: signed links (askbus notify) will not work until fixed: {e}");
        }
        links
    }

    fn key(&self) -> Result<Arc<LinkKey>, KeyError> {
        let mut key = self.key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = &*key {
            return Ok(k.clone());
        }
        let k = Arc::new(LinkKey::load_or_create(&self.key_path)?);
        *key = Some(k.clone());
        Ok(k)
    }

    fn verify(&self, token: &str, kind: LinkKind) -> Result<Link, Refusal> {
        let key = self.key().map_err(|e| {
            eprintln!("askbus web: refused a signed link: {e}");
            Refusal::NoKey
        })?;
        key.verify_kind(token, kind, now_unix())
            .map_err(Refusal::Link)
    }

    fn is_used(&self, link: &Link) -> bool {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&link.nonce)
    }

    /// Claims the link: `false` if it was used already.
    fn claim(&self, link: &Link) -> bool {
        let now = now_unix();
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.retain(|_, exp| *exp > now);
        used.insert(link.nonce.clone(), link.expires).is_none()
    }
}

/// Why a link did nothing, as the person is told.
#[derive(Debug)]
enum Refusal {
    Link(LinkError),
    Used,
    /// Answered elsewhere, withdrawn, timed out: not pending any more.
    Ended,
    /// The link's answer does not fit the request (an approval's outcome for a question…).
    Unfit(String),
    /// The daemon refused the answer (its error message).
    Daemon(String),
    /// askbusd is not reachable, or did not reply.
    Unavailable(String),
    /// The link key cannot be read (or is unsafe): no link can be checked. Why is said on
    /// stderr only: whoever holds a link (or makes one up) learns nothing of the machine.
    NoKey,
}

impl Refusal {
    fn response(&self) -> Response {
        let (status, title, text) = match self {
            Refusal::Link(LinkError::Expired) => (
                StatusCode::GONE,
                "Link expired",
                "This link has expired; nothing was answered.".to_owned(),
            ),
            Refusal::Link(e) => (
                StatusCode::FORBIDDEN,
                "Invalid link",
                format!("{}; nothing was answered.", capitalized(&e.to_string())),
            ),
            Refusal::Used => (
                StatusCode::CONFLICT,
                "Link already used",
                "This link was already used; it works once. Nothing more was answered.".into(),
            ),
            Refusal::Ended => (
                StatusCode::CONFLICT,
                "Already answered",
                "This question was already answered, or has ended (withdrawn or timed out); \
                 nothing was answered."
                    .into(),
            ),
            Refusal::Unfit(why) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid link",
                format!("{why}; nothing was answered."),
            ),
            Refusal::Daemon(why) => (
                StatusCode::CONFLICT,
                "Not answered",
                format!("askbusd refused the answer: {why}"),
            ),
            Refusal::NoKey => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Signed links unavailable",
                "askbus web cannot check signed links now (its output says why); nothing was \
                 answered."
                    .into(),
            ),
            Refusal::Unavailable(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "askbusd unavailable",
                format!("{why}; nothing was answered. Try the link again once askbusd is up."),
            ),
        };
        html(status, title, &format!("<p>{}</p>", esc(&text)))
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A pending request as a UI sees it.
enum Pending {
    Question(UiRequest),
    Approval(Box<UiApproval>),
}

/// What a link's answer becomes on the bus.
enum Reply {
    Answers(BTreeMap<usize, String>),
    Dismiss,
    Decision(ToolOutcome),
}

/// Reads the link's answer body for this request.
fn reply_for(pending: &Pending, body: &Value) -> Result<Reply, Refusal> {
    let unfit = |why: &str| Refusal::Unfit(why.to_owned());
    match pending {
        Pending::Question(_) => {
            if body.get("cancelled").and_then(Value::as_bool) == Some(true) {
                return Ok(Reply::Dismiss);
            }
            let answers = body
                .get("answers")
                .and_then(Value::as_object)
                .ok_or_else(|| unfit("the link carries no answers for this question"))?;
            answers
                .iter()
                .map(|(k, v)| match (k.parse::<usize>(), v.as_str()) {
                    (Ok(i), Some(text)) => Ok((i, text.to_owned())),
                    _ => Err(unfit("the link's answers are not index → text")),
                })
                .collect::<Result<_, _>>()
                .map(Reply::Answers)
        }
        Pending::Approval(a) => {
            let outcome: ToolOutcome = body
                .get("outcome")
                .cloned()
                .and_then(|o| serde_json::from_value(o).ok())
                .ok_or_else(|| unfit("the link carries no decision for this approval"))?;
            if !a.outcomes.contains(&outcome) {
                return Err(unfit("the link's decision is not one this approval offers"));
            }
            Ok(Reply::Decision(outcome))
        }
    }
}

/// A UI connection of its own with request `id` found pending, or `None` if it is not.
async fn find(
    socket: &std::path::Path,
    id: &str,
) -> Result<Option<(Connection, Pending)>, Refusal> {
    let unavailable = |e: askbusd::client::ClientError| {
        Refusal::Unavailable(format!(
            "cannot reach askbusd: {}",
            crate::fail::report(&e.into()).0
        ))
    };
    let mut conn = Connection::connect(socket).await.map_err(unavailable)?;
    let client = format!(
        "{}/{}",
        crate::links::ANSWERING_CLIENT,
        env!("CARGO_PKG_VERSION")
    );
    conn.send(&ClientFrame::Subscribe {
        client: Some(&client),
        filter: None,
    })
    .await
    .map_err(unavailable)?;
    let search = async {
        let mut left: Option<u64> = None;
        loop {
            if left == Some(0) {
                return Ok(None);
            }
            let frame = conn.recv().await.map_err(unavailable)?;
            let found = match frame {
                None => return Err(Refusal::Unavailable("askbusd closed the connection".into())),
                Some(ServerFrame::Subscribed { pending }) => {
                    left = Some(pending);
                    continue;
                }
                Some(ServerFrame::AskUserRequest(r)) => {
                    (r.correlation_id == id).then_some(Pending::Question(r))
                }
                Some(ServerFrame::ToolConfirmationRequest(a)) => {
                    (a.correlation_id == id).then(|| Pending::Approval(Box::new(a)))
                }
                Some(ServerFrame::Error(e)) if left.is_none() => {
                    return Err(Refusal::Daemon(e.message));
                }
                Some(_) => continue,
            };
            if found.is_some() {
                return Ok(found);
            }
            left = left.map(|n| n.saturating_sub(1));
        }
    };
    let found = tokio::time::timeout(DAEMON_WAIT, search)
        .await
        .map_err(|_| {
            Refusal::Unavailable("askbusd did not list its pending requests in time".into())
        })??;
    Ok(found.map(|p| (conn, p)))
}

/// Sends the reply and waits for the daemon's verdict.
async fn send(conn: &mut Connection, id: &str, reply: &Reply) -> Result<(), Refusal> {
    let none = BTreeMap::new();
    let frame = match reply {
        Reply::Answers(a) => ClientFrame::AskUserResponse {
            correlation_id: id,
            answers: a,
            cancelled: false,
        },
        Reply::Dismiss => ClientFrame::AskUserResponse {
            correlation_id: id,
            answers: &none,
            cancelled: true,
        },
        Reply::Decision(o) => ClientFrame::ToolConfirmationResponse {
            correlation_id: id,
            confirmed: Some(*o != ToolOutcome::Cancel),
            outcome: Some(*o),
            message: None,
            payload: None,
            dismissed: false,
        },
    };
    let unavailable = |e: askbusd::client::ClientError| {
        Refusal::Unavailable(format!(
            "askbusd went away: {}",
            crate::fail::report(&e.into()).0
        ))
    };
    conn.send(&frame).await.map_err(unavailable)?;
    let verdict = async {
        loop {
            match conn.recv().await.map_err(unavailable)? {
                None => return Err(Refusal::Unavailable("askbusd closed the connection".into())),
                Some(ServerFrame::AskUserAck { correlation_id, .. }) if correlation_id == id => {
                    return Ok(())
                }
                Some(ServerFrame::ToolConfirmationAck(a)) if a.correlation_id == id => {
                    return Ok(())
                }
                Some(ServerFrame::AskUserWithdrawn { correlation_id, .. })
                    if correlation_id == id =>
                {
                    return Err(Refusal::Ended)
                }
                Some(ServerFrame::ToolConfirmationWithdrawn(w)) if w.correlation_id == id => {
                    return Err(Refusal::Ended)
                }
                Some(ServerFrame::Error(e)) if e.correlation_id.as_deref() == Some(id) => {
                    return Err(if e.code == "not-pending" {
                        Refusal::Ended
                    } else {
                        Refusal::Daemon(e.message)
                    });
                }
                Some(_) => {}
            }
        }
    };
    tokio::time::timeout(DAEMON_WAIT, verdict)
        .await
        .map_err(|_| {
            Refusal::Unavailable("askbusd did not acknowledge the answer in time".into())
        })?
}

/// `GET /a/TOKEN`: what the link would answer, and one button. Never acts.
pub async fn confirm_page(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let links = &app.links;
    let link = match links.verify(&token, LinkKind::Answer) {
        Ok(l) => l,
        Err(r) => return r.response(),
    };
    if links.is_used(&link) {
        return Refusal::Used.response();
    }
    let pending = match find(&links.socket, &link.id).await {
        Ok(Some((_, p))) => p,
        Ok(None) => return Refusal::Ended.response(),
        Err(r) => return r.response(),
    };
    let body = link.answer.clone().unwrap_or(Value::Null);
    let reply = match reply_for(&pending, &body) {
        Ok(r) => r,
        Err(r) => return r.response(),
    };
    let mut html_body = describe(&pending, &reply);
    html_body.push_str(
        "<form method=post><p><button type=submit autofocus>Send this answer</button></p></form>\
         <p><small>The link works once. Nothing is sent until you press the button.</small></p>",
    );
    html(StatusCode::OK, "Answer an agent", &html_body)
}

/// `POST /a/TOKEN`: answers once.
pub async fn answer(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let links = &app.links;
    let link = match links.verify(&token, LinkKind::Answer) {
        Ok(l) => l,
        Err(r) => return r.response(),
    };
    // Claimed before anything is sent: two presses, or a press and a replay, race here and
    // only one goes on.
    if !links.claim(&link) {
        return Refusal::Used.response();
    }
    let result = async {
        let (mut conn, pending) = find(&links.socket, &link.id).await?.ok_or(Refusal::Ended)?;
        let body = link.answer.clone().unwrap_or(Value::Null);
        let reply = reply_for(&pending, &body)?;
        send(&mut conn, &link.id, &reply).await?;
        report_answered(&mut conn, &link.id).await;
        Ok::<_, Refusal>((pending, reply))
    }
    .await;
    match result {
        Ok((pending, reply)) => {
            let n = links.answered.fetch_add(1, Ordering::Relaxed) + 1;
            println!(
                "askbus web: answered {} from a signed link ({n} so far)",
                crate::term::sanitize(&link.id)
            );
            let mut body = String::from("<p><strong>Answered.</strong></p>");
            body.push_str(&describe(&pending, &reply));
            html(StatusCode::OK, "Answered", &body)
        }
        Err(r) => r.response(),
    }
}

/// Tells askbusd the answer came from a notification's link. The answer is already in (the
/// daemon acknowledged it), so a report that cannot be sent costs a count, never the answer:
/// it is said on stderr and the person still sees "Answered".
async fn report_answered(conn: &mut Connection, id: &str) {
    let ids = [id.to_owned()];
    let frame = ClientFrame::NotifyReport {
        sink: "link",
        result: NotifyResult::Answered,
        correlation_ids: &ids,
        error: None,
    };
    if let Err(e) = conn.send(&frame).await {
        eprintln!(
            "askbus web: the answer from a signed link was not counted as answered from a \
             notification: {}",
            crate::fail::report(&e.into()).0
        );
    }
}

/// `GET /o/TOKEN`: signs this browser in (once) and shows the question.
pub async fn open(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let link = match app.links.verify(&token, LinkKind::Open) {
        Ok(l) => l,
        Err(r) => return r.response(),
    };
    if !app.links.claim(&link) {
        return Refusal::Used.response();
    }
    let code = match app.sessions.new_code() {
        Ok(c) => c,
        Err(_) => {
            return Refusal::Unavailable("cannot read the OS's random source".into()).response()
        }
    };
    // Through the sign-in step, so the session cookie is scoped to the page's directory.
    redirect(&format!(
        "../{}/login?code={code}&q={}",
        app.sessions.sid(),
        auth::percent_encode(&link.id)
    ))
}

/// The question (or approval) and the answer the link gives, as HTML.
fn describe(pending: &Pending, reply: &Reply) -> String {
    let mut out = String::new();
    match (pending, reply) {
        (Pending::Question(r), _) => {
            let agent = r
                .context
                .as_ref()
                .and_then(|c| c.agent.clone())
                .or_else(|| r.producer.client.clone())
                .unwrap_or_else(|| "An agent".into());
            out += &format!("<p>{} asks:</p>", esc(&agent));
            let questions = r.questions.as_array().cloned().unwrap_or_default();
            for (i, q) in questions.iter().enumerate() {
                let text = q.get("question").and_then(Value::as_str).unwrap_or("");
                let header = q.get("header").and_then(Value::as_str).unwrap_or("");
                out += &format!("<section><h2>{}</h2><p>{}</p>", esc(header), esc(text));
                match reply {
                    Reply::Answers(a) => match a.get(&i) {
                        Some(ans) => {
                            out += &format!("<p>Answer: <strong>{}</strong></p>", esc(ans))
                        }
                        None => out += "<p>Answer: <em>(none)</em></p>",
                    },
                    Reply::Dismiss => out += "<p>Answer: <strong>dismiss the question</strong></p>",
                    Reply::Decision(_) => {}
                }
                out += "</section>";
            }
        }
        (Pending::Approval(a), _) => {
            let agent = a
                .context
                .as_ref()
                .and_then(|c| c.agent.clone())
                .or_else(|| a.producer.client.clone())
                .unwrap_or_else(|| "An agent".into());
            let tool = a
                .tool_call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("a tool");
            out += &format!(
                "<p>{} asks to run <strong>{}</strong>:</p><pre>{}</pre>",
                esc(&agent),
                esc(tool),
                esc(&serde_json::to_string_pretty(&a.tool_call).unwrap_or_default())
            );
            if let Reply::Decision(o) = reply {
                let o = serde_json::to_value(o)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                out += &format!("<p>Decision: <strong>{}</strong></p>", esc(&o));
            }
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width, \
         initial-scale=1\"><title>askbus: {t}</title><h1>{t}</h1>{body}\n",
        t = esc(title)
    );
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}
