//! The signed-link routes of `askbus web` (links made by `askbus notify`, see `crate::links`):
//! `GET /a/TOKEN` shows what the link would answer and one button, and never acts (link
//! previewers and mail scanners fetch GETs); `POST /a/TOKEN` answers that one question with
//! that one answer, once; `GET /o/TOKEN` shows the request, view only, as often as it is
//! opened until the request ends. No link ever opens a web session: a link previewer that
//! fetches one gets that one page and nothing else. The token is the authority here, not a
//! session; the Host/Origin checks still apply.
//!
//! A link is bound to the request itself: the request found pending under the link's
//! correlationId must have the link's `shownSha256`, so a stale link never answers a later
//! request that reuses the id. A link pushed redacted shows nothing of the request's text
//! (command, path, tool, questions) on its pages either.
//!
//! Single use is kept here: an answer link's nonce is claimed before it acts and remembered
//! until the link expires, in memory and in a 0600 file beside the link key (`.used`), so a
//! replay is refused even after the question ended and after `askbus web` restarts. The file
//! lives exactly as long as the key it belongs to: a new key voids every old link anyway. Each answer is sent on
//! a UI connection of its own named [`crate::links::ANSWERING_CLIENT`], so the bus can tell
//! link answers apart; once the daemon has acknowledged it, that connection also sends a
//! `notify-report` (sink `link`, result `answered`), so askbusd's
//! `askbus_notifications_total` and `askbus watch` count answers given from a pushed
//! notification beside the desktop clicks `askbus notify` reports itself.

use std::collections::{BTreeMap, HashMap};
use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use askbus::client::Connection;
use askbus::protocol::{
    ClientFrame, NotifyResult, ServerFrame, ToolOutcome, UiApproval, UiRequest,
};

use super::App;
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
    /// Nonce → the link's expiry; pruned as links expire. `None` until the used-links file
    /// was read (answer links are refused meanwhile).
    used: Mutex<Option<HashMap<String, u64>>>,
    /// `<key>.used`: one line `EXPIRY NONCE` per answer link used.
    used_path: PathBuf,
    /// Answers given through links since the start.
    pub answered: AtomicU64,
}

impl Links {
    /// Loads the key at `key_path` (or makes it); a failure is said on stderr and retried at
    /// the first link, which is refused meanwhile.
    pub fn new(key_path: PathBuf, socket: PathBuf) -> Links {
        let mut used_path = key_path.clone().into_os_string();
        used_path.push(".used");
        let links = Links {
            key: Mutex::new(None),
            key_path,
            socket,
            used: Mutex::new(None),
            used_path: used_path.into(),
            answered: AtomicU64::new(0),
        };
        if let Err(e) = links.key() {
            eprintln!("askbus web: signed links (askbus notify) will not work until fixed: {e}");
        }
        if let Err(e) = links.used_map() {
            eprintln!("askbus web: answer links will not work until fixed: {e}");
        }
        links
    }

    /// The used links, read from the file (and the file compacted) at the first need.
    fn used_map(&self) -> Result<std::sync::MutexGuard<'_, Option<HashMap<String, u64>>>, String> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.is_none() {
            *used = Some(load_used(&self.used_path, now_unix())?);
        }
        Ok(used)
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

    fn is_used(&self, link: &Link) -> Result<bool, Refusal> {
        let used = self.used_map().map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        Ok(used.as_ref().is_some_and(|u| u.contains_key(&link.nonce)))
    }

    /// Claims the link, on disk before anything acts on it: `Err(Used)` if it was used
    /// already.
    fn claim(&self, link: &Link) -> Result<(), Refusal> {
        let now = now_unix();
        let mut guard = self.used_map().map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        let used = guard.as_mut().expect("loaded");
        used.retain(|_, exp| *exp > now);
        if used.contains_key(&link.nonce) {
            return Err(Refusal::Used);
        }
        append_used(&self.used_path, &link.nonce, link.expires).map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        used.insert(link.nonce.clone(), link.expires);
        Ok(())
    }
}

/// Opens the used-links file as only its owner may have it (this user's, mode 0600, not a
/// link): anyone else who could write it could make a used link usable again.
fn open_used(path: &FsPath, write: bool) -> Result<Option<std::fs::File>, String> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(libc::O_NOFOLLOW).mode(0o600);
    if write {
        o.append(true).create(true);
    }
    let f = match o.open(path) {
        Ok(f) => f,
        Err(e) if !write && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("used-links file {}: {e}", path.display())),
    };
    let meta = f
        .metadata()
        .map_err(|e| format!("used-links file {}: {e}", path.display()))?;
    let uid = askbus::trust::effective_uid();
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "used-links file {} is not a private file of yours (uid {uid}, mode 0600): remove it",
            path.display()
        ));
    }
    Ok(Some(f))
}

/// Reads the used links still unexpired at `now`, and rewrites the file with only those.
fn load_used(path: &FsPath, now: u64) -> Result<HashMap<String, u64>, String> {
    let mut used = HashMap::new();
    let Some(f) = open_used(path, false)? else {
        return Ok(used);
    };
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| format!("used-links file {}: {e}", path.display()))?;
        if let Some((exp, nonce)) = line.split_once(' ') {
            if let Ok(exp) = exp.parse::<u64>() {
                if exp > now && !nonce.is_empty() {
                    used.insert(nonce.to_owned(), exp);
                }
            }
        }
    }
    // Compacted under a temporary name, then renamed over: a crash leaves one whole file.
    let tmp = path.with_extension("used.tmp");
    let _ = std::fs::remove_file(&tmp);
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        for (nonce, exp) in &used {
            writeln!(f, "{exp} {nonce}")?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("used-links file {}: {e}", path.display()));
    }
    Ok(used)
}

/// Records a used link durably (written and synced before the answer is sent).
fn append_used(path: &FsPath, nonce: &str, expires: u64) -> Result<(), String> {
    let mut f = open_used(path, true)?.expect("created");
    let io = |e: std::io::Error| format!("used-links file {}: {e}", path.display());
    // A nonce is base64url: no space or newline can break the line format.
    writeln!(f, "{expires} {nonce}").map_err(io)?;
    f.sync_data().map_err(io)
}

/// Why a link did nothing, as the person is told.
#[derive(Debug)]
enum Refusal {
    Link(LinkError),
    Used,
    /// Answered elsewhere, withdrawn, timed out: not pending any more.
    Ended,
    /// A request of the same correlationId is pending, but not the one the link was made for.
    Stale,
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
            Refusal::Stale => (
                StatusCode::CONFLICT,
                "Not this request",
                "This link was made for an earlier request with the same id, which has ended; \
                 the one waiting now is another. Nothing was answered."
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

impl Pending {
    /// Its `shownSha256`, which a link must carry to act on it.
    fn shown(&self) -> String {
        match self {
            Pending::Question(r) => askbus::protocol::shown_sha256(&r.shown()),
            Pending::Approval(a) => askbus::protocol::shown_sha256(&a.shown()),
        }
    }
}

/// The request `link` was made for, pending, on a UI connection of its own.
async fn find_bound(socket: &FsPath, link: &Link) -> Result<(Connection, Pending), Refusal> {
    let (conn, pending) = find(socket, &link.id).await?.ok_or(Refusal::Ended)?;
    if pending.shown() != link.shown {
        return Err(Refusal::Stale);
    }
    Ok((conn, pending))
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
async fn find(socket: &FsPath, id: &str) -> Result<Option<(Connection, Pending)>, Refusal> {
    let unavailable = |e: askbus::client::ClientError| {
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
        via: Some("link"),
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
            user: None,
        },
        Reply::Dismiss => ClientFrame::AskUserResponse {
            correlation_id: id,
            answers: &none,
            cancelled: true,
            user: None,
        },
        Reply::Decision(o) => ClientFrame::ToolConfirmationResponse {
            correlation_id: id,
            confirmed: Some(*o != ToolOutcome::Cancel),
            outcome: Some(*o),
            message: None,
            payload: None,
            dismissed: false,
            user: None,
        },
    };
    let unavailable = |e: askbus::client::ClientError| {
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
    match links.is_used(&link) {
        Ok(false) => {}
        Ok(true) => return Refusal::Used.response(),
        Err(r) => return r.response(),
    }
    let pending = match find_bound(&links.socket, &link).await {
        Ok((_, p)) => p,
        Err(r) => return r.response(),
    };
    let body = link.answer.clone().unwrap_or(Value::Null);
    let reply = match reply_for(&pending, &body) {
        Ok(r) => r,
        Err(r) => return r.response(),
    };
    let mut html_body = describe(&pending, Some(&reply), link.redacted);
    html_body.push_str(
        "<form method=post class=actions><button type=submit class=primary autofocus>Send this \
         answer</button></form>\
         <p class=hint>The link works once. Nothing is sent until you press the button.</p>",
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
    // Claimed (on disk) before anything is sent: two presses, or a press and a replay, race
    // here and only one goes on, whatever restarts in between.
    if let Err(r) = links.claim(&link) {
        return r.response();
    }
    let result = async {
        let (mut conn, pending) = find_bound(&links.socket, &link).await?;
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
            let mut body = String::from("<p class=\"notice\"><strong>Answered.</strong></p>");
            body.push_str(&describe(&pending, Some(&reply), link.redacted));
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

/// `GET /o/TOKEN`: the request, view only, for as long as it is pending (a second tap on the
/// phone shows it again). It opens no session and answers nothing: a link previewer that
/// fetches it sees this one page, and a redacted link's page shows none of the request's text.
pub async fn open(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let link = match app.links.verify(&token, LinkKind::Open) {
        Ok(l) => l,
        Err(r) => return r.response(),
    };
    let pending = match find_bound(&app.links.socket, &link).await {
        Ok((_, p)) => p,
        Err(Refusal::Ended | Refusal::Stale) => {
            return html(
                StatusCode::GONE,
                "No longer waiting",
                "<p>This request has ended: it was answered, withdrawn or timed out. There is \
                 nothing left to see here.</p>",
            )
        }
        Err(r) => return r.response(),
    };
    let mut body = describe(&pending, None, link.redacted);
    body.push_str(
        "<p class=hint>View only. Answer with the notification's buttons, or in askbus web \
         (signed in from its own sign-in link).</p>",
    );
    html(StatusCode::OK, "Waiting for you", &body)
}

/// An approval's outcome as a person reads it.
fn outcome_words(o: ToolOutcome) -> &'static str {
    match o {
        ToolOutcome::ProceedOnce => "Allow once",
        ToolOutcome::ProceedAlways => "Allow always (this session)",
        ToolOutcome::ProceedAlwaysAndSave => "Allow always, and save the rule",
        ToolOutcome::ProceedAlwaysServer => "Allow every tool of this server",
        ToolOutcome::ProceedAlwaysTool => "Allow this tool always",
        ToolOutcome::ModifyWithEditor => "Modify in an editor",
        ToolOutcome::Cancel => "Deny",
    }
}

/// Who asks: the context's agent, else the producer's client name.
fn asker(context: Option<&askbus::protocol::RequestContext>, client: Option<&str>) -> String {
    context
        .and_then(|c| c.agent.clone())
        .or_else(|| client.map(str::to_owned))
        .unwrap_or_else(|| "An agent".into())
}

/// The request (and the answer the link gives, if any) as HTML, in the web page's classes.
/// `redacted`: who asks and the answer only, nothing of the request's text.
fn describe(pending: &Pending, reply: Option<&Reply>, redacted: bool) -> String {
    let mut out = String::from("<div class=dialog>");
    let hidden = "<p class=hint>The details are hidden: this link came from a redacted \
                  notification. Sign in to askbus web on a device you trust to see them.</p>";
    match pending {
        Pending::Question(r) => {
            let agent = asker(r.context.as_deref(), r.producer.client.as_deref());
            let questions = r.questions.as_array().cloned().unwrap_or_default();
            out += &format!(
                "<p class=from><span class=agent>{}</span> asks {}:</p>",
                esc(&agent),
                if questions.len() == 1 {
                    "a question".to_owned()
                } else {
                    format!("{} questions", questions.len())
                }
            );
            if redacted {
                out += hidden;
            }
            for (i, q) in questions.iter().enumerate() {
                let text = q.get("question").and_then(Value::as_str).unwrap_or("");
                let header = q.get("header").and_then(Value::as_str).unwrap_or("");
                out += "<section class=question>";
                if !redacted {
                    out += &format!(
                        "<span class=chip>{}</span><h2 class=qtext>{}</h2>",
                        esc(header),
                        esc(text)
                    );
                    let options = q.get("options").and_then(Value::as_array);
                    if let Some(options) = options.filter(|o| !o.is_empty()) {
                        out += "<ul class=options>";
                        for o in options {
                            let label = o.get("label").and_then(Value::as_str).unwrap_or("");
                            let desc = o.get("description").and_then(Value::as_str).unwrap_or("");
                            out += &format!(
                                "<li class=opt><span class=label>{}</span> <span class=desc>{}</span></li>",
                                esc(label),
                                esc(desc)
                            );
                        }
                        out += "</ul>";
                    }
                }
                match reply {
                    Some(Reply::Answers(a)) => match a.get(&i) {
                        Some(ans) => {
                            out += &format!("<p>Answer: <strong>{}</strong></p>", esc(ans))
                        }
                        None => out += "<p>Answer: <em>(none)</em></p>",
                    },
                    Some(Reply::Dismiss) => {
                        out += "<p>Answer: <strong>dismiss the question</strong></p>"
                    }
                    _ => {}
                }
                out += "</section>";
            }
        }
        Pending::Approval(a) => {
            let agent = asker(a.context.as_ref(), a.producer.client.as_deref());
            out += &format!(
                "<p class=from><span class=agent>{}</span> asks for your approval:</p>",
                esc(&agent)
            );
            if redacted {
                out += hidden;
            } else {
                out += "<div class=approval-body>";
                out += &approval_html(a);
                out += "</div>";
            }
            if let Some(Reply::Decision(o)) = reply {
                out += &format!("<p>Decision: <strong>{}</strong></p>", outcome_words(*o));
            }
        }
    }
    out += "</div>";
    out
}

/// What an approval asks, by its details' type: the command, the file and its diff, the MCP
/// tool, the fetch prompt; else the tool call's arguments.
fn approval_html(a: &UiApproval) -> String {
    let d = a.details.as_ref();
    let s = |k: &str| {
        d.and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let tool = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("a tool");
    let args = || {
        a.tool_call
            .get("args")
            .map(|v| {
                format!(
                    "<pre class=json>{}</pre>",
                    esc(&serde_json::to_string_pretty(v).unwrap_or_default())
                )
            })
            .unwrap_or_default()
    };
    match d.and_then(|d| d.get("type")).and_then(Value::as_str) {
        Some("exec") => {
            let cmd = if s("command").is_empty() {
                a.tool_call
                    .pointer("/args/command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            } else {
                s("command")
            };
            format!(
                "<p class=kind>Run a shell command</p><pre class=cmd>{}</pre>",
                esc(cmd)
            )
        }
        Some("edit") => {
            let mut out = format!(
                "<p class=kind>Change a file</p><p class=file><strong class=file-name>{}</strong></p>",
                esc(if s("fileName").is_empty() { s("filePath") } else { s("fileName") })
            );
            if !s("filePath").is_empty() {
                out += &format!("<p class=path><code>{}</code></p>", esc(s("filePath")));
            }
            out += "<pre class=diff>";
            for line in s("fileDiff").lines() {
                let class = if line.starts_with("+++") || line.starts_with("---") {
                    "d-meta"
                } else if line.starts_with('+') {
                    "d-add"
                } else if line.starts_with('-') {
                    "d-del"
                } else if line.starts_with("@@") {
                    "d-hunk"
                } else {
                    "d-ctx"
                };
                out += &format!("<span class={class}>{}</span>\n", esc(line));
            }
            out += "</pre>";
            out
        }
        Some("mcp") => format!(
            "<p class=kind>Call an MCP tool</p><p>Tool <code>{}</code> of server <code>{}</code></p>{}",
            esc(if s("toolName").is_empty() { tool } else { s("toolName") }),
            esc(s("serverName")),
            args()
        ),
        Some("info") => {
            let mut out = format!(
                "<p class=kind>Fetch from the web</p><p class=prompt>{}</p>",
                esc(s("prompt"))
            );
            let urls = d.and_then(|d| d.get("urls")).and_then(Value::as_array);
            if let Some(urls) = urls.filter(|u| !u.is_empty()) {
                out += "<ul class=urls>";
                for u in urls.iter().filter_map(Value::as_str) {
                    out += &format!("<li><code>{}</code></li>", esc(u));
                }
                out += "</ul>";
            }
            out
        }
        _ => format!(
            "<p class=kind>Run <code>{}</code></p>{}",
            esc(tool),
            args()
        ),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A link page, styled by the web page's own stylesheet (`/links.css`, no session needed).
fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport \
         content=\"width=device-width, initial-scale=1\"><link rel=stylesheet href=\"/links.css\">\
         <title>askbus: {t}</title><header class=bar><span class=brand>askbus</span></header>\
         <main><div class=dialog-area><h1>{t}</h1>{body}</div></main>\n",
        t = esc(title)
    );
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}
