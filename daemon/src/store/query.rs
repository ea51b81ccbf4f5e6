//! Reading the store for a start: the requests still pending and those still owed. The chain
//! check and `history`'s queries are the client crate's (`askbus::history::store`), which
//! `askbus history` shares.

use rusqlite::{Connection, Row};

pub use askbus::history::store::{history, verify, HistoryQuery};

/// A stored request, as a start reads it.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    pub correlation_id: String,
    pub kind: String,
    pub uid: u32,
    pub pid: Option<i32>,
    pub client: Option<String>,
    pub context: Option<String>,
    pub body: String,
    pub asked_at: i64,
    pub deadline_at: i64,
    pub timeout_ms: u64,
    /// An owed request's terminal frame.
    pub response: Option<String>,
}

/// What a start restores: requests still pending, and ended ones still owed to a producer.
#[derive(Debug, Default)]
pub struct Loaded {
    pub pending: Vec<StoredRequest>,
    pub owed: Vec<StoredRequest>,
}

/// An owed request's body and frame are the whole ones redaction kept apart, if it did.
const STORED: &str = "correlation_id, kind, uid, pid, client, context, \
                      COALESCE(owed_body, body), asked_at, \
                      deadline_at, timeout_ms, COALESCE(owed_response, response)";

fn stored(r: &Row<'_>) -> rusqlite::Result<StoredRequest> {
    Ok(StoredRequest {
        correlation_id: r.get(0)?,
        kind: r.get(1)?,
        uid: r.get(2)?,
        pid: r.get(3)?,
        client: r.get(4)?,
        context: r.get(5)?,
        body: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
        asked_at: r.get(7)?,
        deadline_at: r.get(8)?,
        timeout_ms: r.get::<_, i64>(9)? as u64,
        response: r.get(10)?,
    })
}

pub fn load(conn: &Connection) -> rusqlite::Result<Loaded> {
    let mut out = Loaded::default();
    let sql = format!("SELECT {STORED} FROM requests WHERE delivery = ?1 ORDER BY seq");
    let mut stmt = conn.prepare(&sql)?;
    out.pending = stmt
        .query_map(["pending"], stored)?
        .collect::<Result<_, _>>()?;
    out.owed = stmt
        .query_map(["owed"], stored)?
        .collect::<Result<_, _>>()?;
    Ok(out)
}
