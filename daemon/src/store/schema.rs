//! The store's schema and its migrations. `PRAGMA user_version` is the schema version: 0 is
//! a new file, [`VERSION`] the current one, each earlier one migrated forward in one
//! transaction, a later one refused (a newer askbusd wrote it).

use rusqlite::Connection;

/// The schema this askbusd writes.
pub const VERSION: i64 = 4;

/// Version 1: the requests table as first written (kept so the migration from it is tested).
pub const V1: &str = "
CREATE TABLE requests (
    seq INTEGER PRIMARY KEY,
    correlation_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    uid INTEGER NOT NULL,
    pid INTEGER,
    client TEXT,
    node TEXT,
    project TEXT,
    agent TEXT,
    context TEXT,
    body TEXT,
    asked_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    shown_sha256 TEXT NOT NULL,
    ended_at INTEGER,
    reason TEXT,
    response TEXT,
    decided_by TEXT,
    delivery TEXT NOT NULL DEFAULT 'pending',
    chain INTEGER UNIQUE,
    prev_hash TEXT,
    hash TEXT
);
CREATE INDEX requests_id ON requests(correlation_id);
CREATE INDEX requests_asked ON requests(asked_at);
CREATE INDEX requests_open ON requests(delivery) WHERE delivery IN ('pending', 'owed');
";

/// Version 2: the chain's anchor (what retention removed), and the indexes `history`'s
/// filters use (project, agent and uid, each by time).
pub const V2: &str = "
CREATE TABLE chain_anchor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    chain INTEGER NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX requests_project ON requests(project, asked_at);
CREATE INDEX requests_agent ON requests(agent, asked_at);
CREATE INDEX requests_uid ON requests(uid, asked_at);
";

/// Version 3: the whole request and terminal frame a producer is still owed, kept apart from
/// the chained `body` and `response` (which `--history-text redact` redacts) until it is
/// delivered or abandoned, so a producer re-attaching is recognized and gets the very answer
/// even when the record keeps only their shape.
pub const V3: &str = "
ALTER TABLE requests ADD COLUMN owed_body TEXT;
ALTER TABLE requests ADD COLUMN owed_response TEXT;
";

/// Version 4: the responses just handed to a connected producer that `--history-text redact`
/// keeps whole for a short while (`owed_response` on a `delivered` row), found by time, so a
/// producer whose frame a crash cut off gets the very answer (see `query::IN_FLIGHT_MS`).
pub const V4: &str = "
CREATE INDEX requests_sent ON requests(ended_at)
    WHERE delivery = 'delivered' AND owed_response IS NOT NULL;
";

const STEPS: [&str; VERSION as usize] = [V1, V2, V3, V4];

/// What the file's version says.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    Current,
    /// An earlier version, migrated.
    Migrated(i64),
    /// Written by a newer askbusd.
    Newer(i64),
}

/// Brings the schema to [`VERSION`], one transaction per step.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<Found> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > VERSION {
        return Ok(Found::Newer(version));
    }
    if version == VERSION {
        return Ok(Found::Current);
    }
    for (i, step) in STEPS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
        tx.commit()?;
    }
    Ok(Found::Migrated(version))
}
