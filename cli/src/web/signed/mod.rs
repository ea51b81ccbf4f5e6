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
//!
//! This module owns the three routes and why a link did nothing (`Refusal`); `used` the link
//! key and the single-use record, `bus` finding the request a link is bound to and sending
//! its answer, `page` the HTML the person sees.

mod bus;
mod page;
mod used;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use askbus::client::Connection;
use askbus::protocol::{ClientFrame, NotifyResult};

use super::App;
use crate::links::{LinkError, LinkKind};
use bus::{find_bound, reply_for, send};
use page::{describe, esc, html};
pub use used::Links;

/// How long the daemon may take to replay the pending requests or acknowledge an answer; past
/// it the person is told so (nothing was answered unless the daemon says so).
const DAEMON_WAIT: Duration = Duration::from_secs(10);

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
        send(&mut conn, &link.id, &always_first(&pending, &reply)?).await?;
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

/// An "always" decision's rule (in the request's project), written before the decision is
/// sent, and the reply the agent is then sent (`proceed_once` for askbus's own "always");
/// any other reply as it is.
fn always_first(pending: &bus::Pending, reply: &bus::Reply) -> Result<bus::Reply, Refusal> {
    let (bus::Pending::Approval(a), bus::Reply::Decision(o)) = (pending, reply) else {
        return Ok(reply.clone());
    };
    let Some(offer) = crate::always::offer(a, *o) else {
        return Ok(reply.clone());
    };
    offer
        .apply(false)
        .map_err(|e| Refusal::Unfit(format!("the rule was not written ({e})")))?;
    Ok(bus::Reply::Decision(offer.sent))
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
