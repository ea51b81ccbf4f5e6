//! The writer thread: group commit. It blocks for the first operation group, takes every
//! group queued behind it, writes them all in one transaction (one fsync), then publishes the
//! last group's number, which releases their frames. A failing write (disk full, I/O error)
//! is retried with the same groups until it succeeds: nothing accepted is dropped, new
//! requests are refused `store-unavailable` meanwhile, and the reserve file is given up so
//! the decisions already under way can still be stored. When idle it sweeps old records.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use askbus::history::{chain_hash, ChainFields, GENESIS};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use tokio::sync::watch;
use tokio::time::Instant;

use super::record::{body_text, redacted_body, redacted_response, shown_sha256};
use super::{epoch_ms, HistoryText, StoreOptions};
use crate::broker::{AskedRecord, Durable, EndedRecord};

/// Most groups one transaction takes.
const MAX_GROUPS: usize = 1024;
/// Records the retention sweep removes per transaction.
const SWEEP_BATCH: i64 = 500;

/// The clocks at one moment: maps the broker's monotonic instants to wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub instant: Instant,
    pub wall: SystemTime,
}

impl Clock {
    pub fn now() -> Clock {
        Clock {
            instant: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    fn ms(&self, at: Instant) -> i64 {
        let base = epoch_ms(self.wall);
        if at >= self.instant {
            base + (at - self.instant).as_millis() as i64
        } else {
            base - (self.instant - at).as_millis() as i64
        }
    }
}

pub enum Cmd {
    Write {
        seq: u64,
        clock: Clock,
        ops: Vec<Durable>,
    },
}

pub struct Writer {
    conn: Connection,
    opts: StoreOptions,
    ballast: PathBuf,
    ballast_bytes: u64,
    available: Arc<AtomicBool>,
    committed: watch::Sender<u64>,
    /// The chain's last link as committed: (position, hash).
    last: (i64, String),
}

impl Writer {
    pub fn new(
        conn: Connection,
        opts: StoreOptions,
        ballast: PathBuf,
        ballast_bytes: u64,
        available: Arc<AtomicBool>,
        committed: watch::Sender<u64>,
    ) -> rusqlite::Result<Writer> {
        let last = last_link(&conn)?;
        Ok(Writer {
            conn,
            opts,
            ballast,
            ballast_bytes,
            available,
            committed,
            last,
        })
    }

    pub fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let mut last_sweep = std::time::Instant::now() - Duration::from_secs(3600);
        loop {
            let unavailable = !self.available.load(Ordering::Relaxed);
            // While refusing, look for room again every second even when nothing is written.
            let idle = Duration::from_secs(if unavailable { 1 } else { 10 });
            let first = match rx.recv_timeout(idle) {
                Ok(c) => c,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if unavailable && self.recovered() {
                        tracing::info!(store = %self.opts.path.display(), "the store has room again; new requests are accepted");
                        self.available.store(true, Ordering::Relaxed);
                    }
                    if last_sweep.elapsed() > Duration::from_secs(60) {
                        last_sweep = std::time::Instant::now();
                        self.sweep();
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            let mut groups = vec![first];
            while groups.len() < MAX_GROUPS {
                match rx.try_recv() {
                    Ok(c) => groups.push(c),
                    Err(_) => break,
                }
            }
            let seq = groups
                .iter()
                .map(|Cmd::Write { seq, .. }| *seq)
                .max()
                .unwrap_or(0);
            let mut delay = Duration::from_millis(50);
            loop {
                match self.commit(&groups) {
                    Ok(last) => {
                        self.last = last;
                        break;
                    }
                    Err(e) => {
                        if self.available.swap(false, Ordering::Relaxed) {
                            tracing::error!(error = %e, store = %self.opts.path.display(), "the store cannot write; new requests are refused store-unavailable until it can");
                        }
                        // The reserve goes first: the decisions already under way need room.
                        let _ = std::fs::remove_file(&self.ballast);
                        std::thread::sleep(delay);
                        delay = (delay * 2).min(Duration::from_secs(2));
                    }
                }
            }
            self.committed.send_replace(seq);
            if !self.available.load(Ordering::Relaxed) && self.recovered() {
                tracing::info!(store = %self.opts.path.display(), "the store writes again; new requests are accepted");
                self.available.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether the disk has room again: the reserve could be put back.
    fn recovered(&self) -> bool {
        fill_ballast(&self.ballast, self.ballast_bytes)
    }

    fn commit(&mut self, groups: &[Cmd]) -> rusqlite::Result<(i64, String)> {
        let redact = self.opts.history_text == HistoryText::Redact;
        let tx = self.conn.transaction()?;
        let mut last = self.last.clone();
        for Cmd::Write { clock, ops, .. } in groups {
            for op in ops {
                match op {
                    Durable::Asked(a) => asked(&tx, clock, a)?,
                    Durable::Ended(e) => ended(&tx, clock, e, redact, &mut last)?,
                    Durable::Delivered(id) => {
                        tx.execute(
                            "UPDATE requests SET delivery = 'delivered', owed_body = NULL, owed_response = NULL \
                             WHERE correlation_id = ?1 AND delivery = 'owed'",
                            [&**id],
                        )?;
                    }
                    Durable::Abandoned(id) => {
                        tx.execute(
                            "UPDATE requests SET delivery = 'undelivered', owed_body = NULL, owed_response = NULL \
                             WHERE correlation_id = ?1 AND delivery = 'owed'",
                            [&**id],
                        )?;
                    }
                }
            }
        }
        if redact {
            forget_sent(&tx)?;
        }
        tx.commit()?;
        Ok(last)
    }

    /// Removes whole ended records older than the retention, from the old end of the chain,
    /// in small batches; the anchor keeps the hash of the last one removed.
    fn sweep(&mut self) {
        if self.opts.history_text == HistoryText::Redact {
            if let Err(e) = forget_sent(&self.conn) {
                tracing::warn!(error = %e, "dropping the whole text of handed-over responses failed");
            }
        }
        let cutoff = epoch_ms(SystemTime::now()) - self.opts.retention.as_millis() as i64;
        loop {
            match sweep_batch(&mut self.conn, cutoff) {
                Ok(0) => return,
                Ok(n) => tracing::debug!(removed = n, "history retention"),
                Err(e) => {
                    tracing::warn!(error = %e, "history retention sweep failed");
                    return;
                }
            }
        }
    }
}

/// Drops the whole text kept apart (under `--history-text redact`) of responses handed to
/// their producer longer ago than a crash could have cut them off (`query::IN_FLIGHT_MS`).
fn forget_sent(conn: &Connection) -> rusqlite::Result<usize> {
    let cutoff = epoch_ms(SystemTime::now()) - super::query::IN_FLIGHT_MS;
    conn.prepare_cached(
        "UPDATE requests SET owed_body = NULL, owed_response = NULL \
         WHERE delivery = 'delivered' AND owed_response IS NOT NULL AND ended_at < ?1",
    )?
    .execute([cutoff])
}

fn sweep_batch(conn: &mut Connection, cutoff: i64) -> rusqlite::Result<usize> {
    let tx = conn.transaction()?;
    let last: Option<(i64, String)> = {
        let mut stmt = tx.prepare(
            "SELECT chain, hash, ended_at FROM requests WHERE chain IS NOT NULL \
             ORDER BY chain LIMIT ?1",
        )?;
        let rows = stmt.query_map([SWEEP_BATCH], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut last = None;
        for row in rows {
            let (chain, hash, ended) = row?;
            if ended >= cutoff {
                break;
            }
            last = Some((chain, hash));
        }
        last
    };
    let Some((chain, hash)) = last else {
        return Ok(0);
    };
    let n = tx.execute(
        "DELETE FROM requests WHERE chain IS NOT NULL AND chain <= ?1",
        [chain],
    )?;
    tx.execute(
        "INSERT INTO chain_anchor (id, chain, hash) VALUES (1, ?1, ?2) \
         ON CONFLICT(id) DO UPDATE SET chain = excluded.chain, hash = excluded.hash",
        params![chain, hash],
    )?;
    tx.commit()?;
    Ok(n)
}

fn asked(tx: &Transaction<'_>, clock: &Clock, a: &AskedRecord) -> rusqlite::Result<()> {
    let context = a.context.as_deref();
    let field = |f: fn(&crate::protocol::RequestContext) -> &Option<String>| {
        context.and_then(|c| f(c).clone())
    };
    let kind = match a.body.kind() {
        crate::protocol::RequestKind::Question => "question",
        crate::protocol::RequestKind::Approval => "approval",
    };
    tx.prepare_cached(
        "INSERT INTO requests (correlation_id, kind, uid, pid, client, project, agent, \
         context, body, asked_at, deadline_at, timeout_ms, shown_sha256, delivery) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'pending')",
    )?
    .execute(params![
        &*a.id,
        kind,
        a.producer.uid,
        a.producer.pid,
        a.producer.client,
        field(|c| &c.project),
        field(|c| &c.agent),
        context.map(|c| serde_json::to_string(c).expect("a context serializes")),
        body_text(&a.body),
        clock.ms(a.accepted_at),
        clock.ms(a.deadline),
        a.timeout_ms as i64,
        shown_sha256(&a.id, &a.body, context),
    ])?;
    Ok(())
}

fn ended(
    tx: &Transaction<'_>,
    clock: &Clock,
    e: &EndedRecord,
    redact: bool,
    last: &mut (i64, String),
) -> rusqlite::Result<()> {
    type Row = (
        i64,
        String,
        i64,
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        i64,
        i64,
        i64,
        String,
    );
    let row: Option<Row> = tx
        .prepare_cached(
            "SELECT seq, kind, uid, pid, client, node, context, body, asked_at, deadline_at, \
             timeout_ms, shown_sha256 FROM requests \
             WHERE correlation_id = ?1 AND delivery = 'pending' ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([&*e.id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
                r.get(11)?,
            ))
        })
        .optional()?;
    let Some((
        seq,
        kind,
        uid,
        pid,
        client,
        node,
        context,
        body,
        asked_at,
        deadline,
        timeout,
        shown,
    )) = row
    else {
        // Not stored (it ended before the store knew it): nothing to end.
        return Ok(());
    };
    let mut response = e
        .response
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let mut body = body;
    // What the producer is owed stays whole (out of the chain) until it is delivered; one
    // just handed to it, for `IN_FLIGHT_MS` (a crash may cut it off: see `query::load`).
    let keep_owed = redact && response.is_some();
    let (owed_body, owed) = if keep_owed {
        (body.clone(), response.clone())
    } else {
        (None, None)
    };
    if redact {
        body = body.map(|b| redacted_body(&b, &kind));
        response = response.map(|r| redacted_response(&r));
    }
    let decided_by = serde_json::to_string(&e.decided_by).expect("decidedBy serializes");
    let ended_at = epoch_ms(clock.wall);
    let reason = e.end.as_str();
    let chain = last.0 + 1;
    let prev = last.1.clone();
    let hash = chain_hash(
        &prev,
        &ChainFields {
            chain,
            correlation_id: &e.id,
            kind: &kind,
            uid,
            pid,
            client: client.as_deref(),
            node: node.as_deref(),
            context: context.as_deref(),
            body: body.as_deref(),
            asked_at_ms: asked_at,
            deadline_ms: deadline,
            timeout_ms: timeout,
            shown_sha256: &shown,
            ended_at_ms: ended_at,
            reason,
            response: response.as_deref(),
            decided_by: Some(&decided_by),
        },
    );
    let delivery = match (&e.response, e.delivered) {
        (_, true) => "delivered",
        (Some(_), false) => "owed",
        (None, false) => "undelivered",
    };
    tx.prepare_cached(
        "UPDATE requests SET ended_at = ?2, reason = ?3, response = ?4, decided_by = ?5, \
         delivery = ?6, body = ?7, chain = ?8, prev_hash = ?9, hash = ?10, \
         owed_body = ?11, owed_response = ?12 WHERE seq = ?1",
    )?
    .execute(params![
        seq, ended_at, reason, response, decided_by, delivery, body, chain, prev, hash, owed_body,
        owed
    ])?;
    *last = (chain, hash);
    Ok(())
}

/// The chain's last link: its newest record's, else the anchor's, else the start.
fn last_link(conn: &Connection) -> rusqlite::Result<(i64, String)> {
    let newest: Option<(i64, String)> = conn
        .query_row(
            "SELECT chain, hash FROM requests WHERE chain IS NOT NULL ORDER BY chain DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some(l) = newest {
        return Ok(l);
    }
    let anchor = conn
        .query_row(
            "SELECT chain, hash FROM chain_anchor WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(anchor.unwrap_or((0, GENESIS.to_owned())))
}

/// Writes the reserve file (`bytes` of zeros); false when the disk has no room for it.
pub fn fill_ballast(path: &Path, bytes: u64) -> bool {
    use std::io::Write as _;
    if std::fs::metadata(path).is_ok_and(|m| m.len() == bytes) {
        return true;
    }
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(path)?;
        let chunk = vec![0u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.sync_all()
    };
    match write() {
        Ok(()) => true,
        Err(_) => {
            let _ = std::fs::remove_file(path);
            false
        }
    }
}
