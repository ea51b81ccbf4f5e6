//! Finding, on a UI connection of its own, the pending request a signed link is bound to
//! (its correlationId and `shownSha256`), reading the link's answer for it, and sending it.

use std::collections::BTreeMap;
use std::path::Path as FsPath;

use serde_json::Value;

use askbus::client::Connection;
use askbus::protocol::{ClientFrame, ServerFrame, ToolOutcome, UiApproval, UiRequest};

use super::{Refusal, DAEMON_WAIT};
use crate::links::Link;

/// A pending request as a UI sees it.
pub(super) enum Pending {
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
pub(super) async fn find_bound(
    socket: &FsPath,
    link: &Link,
) -> Result<(Connection, Pending), Refusal> {
    let (conn, pending) = find(socket, &link.id).await?.ok_or(Refusal::Ended)?;
    if pending.shown() != link.shown {
        return Err(Refusal::Stale);
    }
    Ok((conn, pending))
}

/// What a link's answer becomes on the bus.
#[derive(Clone)]
pub(super) enum Reply {
    Answers(BTreeMap<usize, String>),
    Dismiss,
    Decision(ToolOutcome),
}

/// Reads the link's answer body for this request.
pub(super) fn reply_for(pending: &Pending, body: &Value) -> Result<Reply, Refusal> {
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
            // askbus's own "Allow always" (its rule, `crate::always`) where the agent offers
            // no "always" of its own is one this approval offers too.
            if !a.outcomes.contains(&outcome) && crate::always::offer(a, outcome).is_none() {
                return Err(unfit("the link's decision is not one this approval offers"));
            }
            Ok(Reply::Decision(outcome))
        }
    }
}

/// A UI connection of its own with request `id` found pending, or `None` if it is not.
pub(super) async fn find(
    socket: &FsPath,
    id: &str,
) -> Result<Option<(Connection, Pending)>, Refusal> {
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
pub(super) async fn send(conn: &mut Connection, id: &str, reply: &Reply) -> Result<(), Refusal> {
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
