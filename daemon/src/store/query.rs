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
    /// Ended ones whose response was handed to a connected producer in the last
    /// `IN_FLIGHT_MS` (10 s) before the newest end on record: the daemon stopped (or crashed) with
    /// that frame maybe still in its queue, so a producer that resends the request gets it.
    pub sent: Vec<StoredRequest>,
}

/// How long before the last end on record a response handed to a connected producer may still
/// not have left the daemon when it stopped: its frame waits behind the commit, then in the
/// connection's queue (milliseconds, unless the producer stopped reading). Such a request is
/// recorded `delivered`, but after a crash its producer may not have it, and resends it.
pub const IN_FLIGHT_MS: i64 = 10_000;

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

/// `redact`: the store keeps only the shape of ended records' text (`--history-text redact`),
/// so a handed-over response can be given again only while its whole text is kept apart.
pub fn load(conn: &Connection, redact: bool) -> rusqlite::Result<Loaded> {
    let mut out = Loaded::default();
    let sql = format!("SELECT {STORED} FROM requests WHERE delivery = ?1 ORDER BY seq");
    let mut stmt = conn.prepare(&sql)?;
    out.pending = stmt
        .query_map(["pending"], stored)?
        .collect::<Result<_, _>>()?;
    out.owed = stmt
        .query_map(["owed"], stored)?
        .collect::<Result<_, _>>()?;
    // Newest end first, along the chain (its index), stopping at the window's start.
    let sql = format!(
        "SELECT {STORED}, ended_at, delivery, owed_response IS NOT NULL FROM requests \
         WHERE chain IS NOT NULL ORDER BY chain DESC"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut since = None;
    while let Some(row) = rows.next()? {
        let ended: i64 = row.get(11)?;
        let since = *since.get_or_insert(ended - IN_FLIGHT_MS);
        if ended < since {
            break;
        }
        let delivery: String = row.get(12)?;
        let whole = !redact || row.get::<_, bool>(13)?;
        let r = stored(row)?;
        if delivery == "delivered" && r.response.is_some() && whole {
            out.sent.push(r);
        }
    }
    Ok(out)
}
