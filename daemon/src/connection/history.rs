//! `history` queries on a connection: read off the broker's path (SQLite on the blocking
//! pool), one at a time per connection and answered in the order asked, through the same
//! ordered reply path as the connection's other replies. A peer sees only the records of its
//! own requests unless it is an operator (as with `pending`).

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::hub::Hub;
use crate::outbox::{Batch, Outbox};
use crate::protocol::{
    encode, ErrorCode, FrameError, HistoryQueryFrame, ServerFrame, DEFAULT_HISTORY_LIMIT,
};
use crate::store::HistoryQuery;

/// Queries a connection may have waiting for their answers; past this it is told so.
pub const MAX_QUEUED: usize = 4;

/// Starts the connection's history worker; it ends when the sender is dropped.
pub fn spawn(
    hub: Arc<Hub>,
    peer: crate::broker::PeerId,
    outbox: Outbox,
) -> mpsc::Sender<HistoryQueryFrame> {
    let (tx, mut rx) = mpsc::channel::<HistoryQueryFrame>(MAX_QUEUED);
    tokio::spawn(async move {
        while let Some(q) = rx.recv().await {
            let frame = answer(&hub, peer, q).await;
            let Some(frame) = hub.reply_in_order(peer, frame) else {
                continue;
            };
            let mut batch = Batch::new();
            if outbox.push(&frame, &mut batch).is_err() {
                outbox.cancel();
                return;
            }
            batch.flush();
        }
    });
    tx
}

/// The `history` (or `error`) frame answering `q` for `peer`.
async fn answer(hub: &Hub, peer: crate::broker::PeerId, q: HistoryQueryFrame) -> bytes::Bytes {
    let error =
        |code: ErrorCode, msg: String| encode(&ServerFrame::error(&FrameError::new(code, msg)));
    let Some(store) = hub.store() else {
        return error(
            ErrorCode::StoreUnavailable,
            "this askbusd runs without a store (--no-store): it keeps no history".into(),
        );
    };
    let Some(info) = hub.run(|b, _, _| b.peer_info(peer).cloned()) else {
        return error(ErrorCode::InvalidFrame, "the connection is closing".into());
    };
    let query = match to_query(q, (!info.rights.operator).then_some(info.uid)) {
        Ok(query) => query,
        Err(msg) => return error(ErrorCode::InvalidFrame, msg),
    };
    let read = tokio::task::spawn_blocking(move || store.history(&query)).await;
    match read {
        Ok(Ok((records, next))) => encode(&ServerFrame::History {
            records: records
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect(),
            cursor: next.map(|(at, seq)| format!("{at}.{seq}")),
        }),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "a history query failed");
            error(
                ErrorCode::StoreUnavailable,
                format!("the store could not be read: {e}"),
            )
        }
        Err(e) => error(
            ErrorCode::StoreUnavailable,
            format!("the history query did not finish: {e}"),
        ),
    }
}

/// The store query a frame asks for, limited to `uid`'s records when it is set.
fn to_query(q: HistoryQueryFrame, uid: Option<u32>) -> Result<HistoryQuery, String> {
    use askbus::history::parse_rfc3339_ms;
    let time = |t: Option<String>| t.as_deref().and_then(parse_rfc3339_ms);
    let cursor = match q.cursor.as_deref() {
        None => None,
        Some(c) => {
            let parsed = c
                .split_once('.')
                .and_then(|(at, seq)| Some((at.parse().ok()?, seq.parse().ok()?)));
            Some(parsed.ok_or_else(|| format!("cursor {c:?} is not one a history answer gave"))?)
        }
    };
    let f = q.filter;
    Ok(HistoryQuery {
        id: f.correlation_id,
        since: time(f.since),
        until: time(f.until),
        project: f.project,
        agent: f.agent,
        node: f.node,
        reason: f.reason,
        kind: f.kind,
        decided_by: f.decided_by,
        uid,
        limit: Some(q.limit.unwrap_or(DEFAULT_HISTORY_LIMIT) as usize),
        cursor,
    })
}
