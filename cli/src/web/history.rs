//! The page's History view, server side: `GET /<sid>/history?…` (signed in, as every page
//! route) asks askbusd for the records with the daemon's `history` frame, on a connection of
//! askbus web's own uid, so the daemon's isolation by uid holds as it does for `askbus
//! history --daemon` (a user sees only their own requests, an operator all). The filters are
//! `askbus history`'s: `since`/`until` (RFC 3339 or a duration ago), `project`, `agent`,
//! `node`, `reason`, `kind`, `decidedBy`, `limit` (at most the daemon's page), `cursor` for
//! the next page; `id` for one record. The answer is JSON `{records, cursor}`, or `{error}`
//! with 400 (a filter the daemon or this module refuses) or 503 (askbusd unreachable). The
//! records go out as data: the page puts their text in as text.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use askbus::client::{ClientError, Connection};
use askbus::protocol::{HistoryFilter, MAX_HISTORY_LIMIT};

use super::App;

/// The History view's query, as the page's form sends it.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryQuery {
    id: Option<String>,
    since: Option<String>,
    until: Option<String>,
    project: Option<String>,
    agent: Option<String>,
    node: Option<String>,
    reason: Option<String>,
    kind: Option<String>,
    decided_by: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Records a page shows unless the form says how many (as `askbus history`'s table).
const DEFAULT_ROWS: u32 = 50;

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

fn refused(status: StatusCode, error: impl Into<String>) -> Response {
    json_response(status, json!({ "error": error.into() }))
}

/// The daemon's filter from the query: empty fields mean "any"; times as `askbus history`
/// reads them.
fn filter(q: &HistoryQuery, now: SystemTime) -> Result<HistoryFilter, String> {
    let text = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    let time = |name: &str, v: &Option<String>| -> Result<Option<String>, String> {
        text(v)
            .map(|t| {
                crate::history::when(t.trim(), now)
                    .map(askbus::history::rfc3339_ms)
                    .map_err(|e| format!("{name}: {e}"))
            })
            .transpose()
    };
    Ok(HistoryFilter {
        correlation_id: text(&q.id),
        since: time("since", &q.since)?,
        until: time("until", &q.until)?,
        project: text(&q.project),
        agent: text(&q.agent),
        node: text(&q.node),
        reason: text(&q.reason),
        kind: text(&q.kind),
        decided_by: text(&q.decided_by),
    })
}

/// `GET /<sid>/history`.
pub async fn history(State(app): State<Arc<App>>, Query(q): Query<HistoryQuery>) -> Response {
    let filter = match filter(&q, SystemTime::now()) {
        Ok(f) => f,
        Err(e) => return refused(StatusCode::BAD_REQUEST, e),
    };
    let limit = q.limit.unwrap_or(DEFAULT_ROWS).clamp(1, MAX_HISTORY_LIMIT);
    let cursor = q.cursor.filter(|c| !c.is_empty());
    let mut conn = match Connection::connect(&app.bridge.socket).await {
        Ok(c) => c,
        Err(e) => {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                crate::fail::report(&e.into()).0,
            )
        }
    };
    match conn.history(&filter, Some(limit), cursor.as_deref()).await {
        Ok((records, cursor)) => json_response(
            StatusCode::OK,
            json!({ "records": records, "cursor": cursor }),
        ),
        // The daemon's refusal (a filter it does not take, a store it has not): said as is.
        Err(ClientError::Rejected(e)) => refused(
            StatusCode::BAD_REQUEST,
            format!("{}: {}", e.code, e.message),
        ),
        Err(e) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::fail::report(&e.into()).0,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_as_askbus_history_reads_them() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(7200);
        let q = HistoryQuery {
            since: Some("1h".into()),
            project: Some("shop".into()),
            agent: Some(" ".into()),
            kind: Some("approval".into()),
            ..Default::default()
        };
        let f = filter(&q, now).unwrap();
        assert_eq!(f.since.as_deref(), Some("1970-01-01T01:00:00.000Z"));
        assert_eq!(f.project.as_deref(), Some("shop"));
        assert_eq!(f.agent, None);
        assert_eq!(f.kind.as_deref(), Some("approval"));
        let bad = HistoryQuery {
            until: Some("yesterday-ish".into()),
            ..Default::default()
        };
        assert!(filter(&bad, now).unwrap_err().starts_with("until: "));
    }
}
