//! Reading a store file (feature `store`): the chain check and `history`'s queries, shared by
//! askbusd (which checks the chain at start and answers queries) and `askbus history`, which
//! reads the file directly. The indexes the daemon's schema creates make a query by project
//! and day over a million records a range scan.

use rusqlite::{params_from_iter, types::Value as Sql, Connection, Row};
use serde_json::Value;

use super::{chain_hash, rfc3339_ms, ChainFields, HistoryRecord, GENESIS};

/// Checks the chain from its anchor: `Ok(records checked)`, or `Err` naming the first record
/// that does not fit, by its correlationId.
pub fn verify(conn: &Connection) -> rusqlite::Result<Result<u64, String>> {
    let anchor: Option<(i64, String)> = conn
        .query_row(
            "SELECT chain, hash FROM chain_anchor WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let (mut expect, mut prev) = match anchor {
        Some((chain, hash)) => (chain + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    let mut stmt = conn.prepare(
        "SELECT chain, correlation_id, kind, uid, pid, client, node, context, body, asked_at, \
         deadline_at, timeout_ms, shown_sha256, ended_at, reason, response, decided_by, \
         prev_hash, hash FROM requests WHERE chain IS NOT NULL ORDER BY chain",
    )?;
    let mut rows = stmt.query([])?;
    let mut n = 0;
    while let Some(r) = rows.next()? {
        let id: String = r.get(1)?;
        let chain: i64 = r.get(0)?;
        let s = |i: usize| r.get::<_, Option<String>>(i);
        let (client, node, context, body) = (s(5)?, s(6)?, s(7)?, s(8)?);
        let (response, decided_by) = (s(15)?, s(16)?);
        let (kind, shown, reason): (String, String, String) = (r.get(2)?, r.get(12)?, r.get(14)?);
        let fields = ChainFields {
            chain,
            correlation_id: &id,
            kind: &kind,
            uid: r.get(3)?,
            pid: r.get(4)?,
            client: client.as_deref(),
            node: node.as_deref(),
            context: context.as_deref(),
            body: body.as_deref(),
            asked_at_ms: r.get(9)?,
            deadline_ms: r.get(10)?,
            timeout_ms: r.get(11)?,
            shown_sha256: &shown,
            ended_at_ms: r.get(13)?,
            reason: &reason,
            response: response.as_deref(),
            decided_by: decided_by.as_deref(),
        };
        let (stored_prev, stored_hash): (Option<String>, Option<String>) = (r.get(17)?, r.get(18)?);
        let fits = chain == expect
            && stored_prev.as_deref() == Some(prev.as_str())
            && stored_hash.as_deref() == Some(chain_hash(&prev, &fields).as_str());
        if !fits {
            return Ok(Err(format!(
                "record {id} (chain position {chain}) does not fit the chain"
            )));
        }
        prev = stored_hash.unwrap_or_default();
        expect += 1;
        n += 1;
    }
    Ok(Ok(n))
}

/// A `history` query: every set field must match.
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    pub id: Option<String>,
    /// `askedAt` bounds, ms since the epoch.
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub project: Option<String>,
    /// An agent name, matched as the subscribe filter does (`name` or `name/…`).
    pub agent: Option<String>,
    pub node: Option<String>,
    pub reason: Option<String>,
    pub kind: Option<String>,
    pub decided_by: Option<String>,
    /// Only this producer uid's records (everyone but operators).
    pub uid: Option<u32>,
    pub limit: Option<usize>,
    /// Records after this one in the order answered (the previous page's cursor: its last
    /// record's `askedAt` in ms and its row).
    pub cursor: Option<Cursor>,
}

/// Where a page ended: its last record's `askedAt` (ms) and row; the next page starts after it.
pub type Cursor = (i64, i64);

/// The records `q` matches, newest first, and the cursor of the next page when there is one.
pub fn history(
    conn: &Connection,
    q: &HistoryQuery,
) -> rusqlite::Result<(Vec<HistoryRecord>, Option<Cursor>)> {
    let mut sql = String::from(
        "SELECT seq, correlation_id, kind, uid, pid, client, node, context, body, asked_at, \
         deadline_at, ended_at, reason, response, decided_by, shown_sha256, delivery \
         FROM requests WHERE 1=1",
    );
    let mut args: Vec<Sql> = Vec::new();
    fn cond(sql: &mut String, args: &mut Vec<Sql>, part: &str, v: Sql) {
        sql.push_str(part);
        args.push(v);
    }
    if let Some(v) = &q.id {
        cond(
            &mut sql,
            &mut args,
            " AND correlation_id = ?",
            Sql::Text(v.clone()),
        );
    }
    if let Some(v) = q.since {
        cond(&mut sql, &mut args, " AND asked_at >= ?", Sql::Integer(v));
    }
    if let Some(v) = q.until {
        cond(&mut sql, &mut args, " AND asked_at <= ?", Sql::Integer(v));
    }
    if let Some(v) = &q.project {
        cond(
            &mut sql,
            &mut args,
            " AND project = ?",
            Sql::Text(v.clone()),
        );
    }
    if let Some(v) = &q.agent {
        cond(
            &mut sql,
            &mut args,
            " AND (agent = ? OR agent LIKE ? ESCAPE '\\')",
            Sql::Text(v.clone()),
        );
        let like = v
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        args.push(Sql::Text(format!("{like}/%")));
    }
    if let Some(v) = &q.node {
        cond(&mut sql, &mut args, " AND node = ?", Sql::Text(v.clone()));
    }
    if let Some(v) = &q.reason {
        if v == "pending" {
            sql.push_str(" AND ended_at IS NULL");
        } else {
            cond(&mut sql, &mut args, " AND reason = ?", Sql::Text(v.clone()));
        }
    }
    if let Some(v) = &q.kind {
        cond(&mut sql, &mut args, " AND kind = ?", Sql::Text(v.clone()));
    }
    if let Some(v) = &q.decided_by {
        cond(
            &mut sql,
            &mut args,
            " AND json_extract(decided_by, '$.kind') = ?",
            Sql::Text(v.clone()),
        );
    }
    if let Some(v) = q.uid {
        cond(&mut sql, &mut args, " AND uid = ?", Sql::Integer(v.into()));
    }
    if let Some((at, seq)) = q.cursor {
        sql.push_str(" AND (asked_at < ? OR (asked_at = ? AND seq < ?))");
        args.extend([Sql::Integer(at), Sql::Integer(at), Sql::Integer(seq)]);
    }
    sql.push_str(" ORDER BY asked_at DESC, seq DESC");
    let limit = q.limit.map(|n| n.min(i64::MAX as usize - 1));
    if let Some(n) = limit {
        sql.push_str(&format!(" LIMIT {}", n + 1));
    }
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(params_from_iter(args))?;
    let mut out = Vec::new();
    let mut seqs = Vec::new();
    while let Some(r) = rows.next()? {
        seqs.push((r.get::<_, i64>(9)?, r.get::<_, i64>(0)?));
        out.push(to_record(r)?);
    }
    let cursor = match limit {
        Some(n) if out.len() > n => {
            out.truncate(n);
            n.checked_sub(1).and_then(|i| seqs.get(i).copied())
        }
        _ => None,
    };
    Ok((out, cursor))
}

fn to_record(r: &Row<'_>) -> rusqlite::Result<HistoryRecord> {
    let json = |i: usize| -> rusqlite::Result<Option<Value>> {
        Ok(r.get::<_, Option<String>>(i)?
            .and_then(|t| serde_json::from_str(&t).ok()))
    };
    let kind: String = r.get(2)?;
    let body = json(8)?;
    let response = json(13)?;
    let reason: Option<String> = r.get(12)?;
    let (mut questions, mut tool_call, mut details) = (None, None, None);
    match (&*kind, body) {
        ("approval", Some(b)) => {
            tool_call = b.get("toolCall").cloned();
            details = b.get("details").cloned();
        }
        (_, b) => questions = b,
    }
    let answered = matches!(reason.as_deref(), Some("answered"));
    let (mut answers, mut decision) = (None, None);
    if let Some(resp) = &response {
        if kind == "approval" {
            if matches!(reason.as_deref(), Some("answered" | "dismissed")) {
                let mut d = serde_json::json!({
                    "outcome": resp.get("outcome"),
                    "confirmed": resp.get("confirmed"),
                });
                if let Some(m) = resp.get("message") {
                    d["message"] = m.clone();
                }
                // With modify_with_editor the payload is what the person approved instead
                // (the edited content): the record of the decision must show it.
                if let Some(p) = resp.get("payload") {
                    d["payload"] = p.clone();
                }
                decision = Some(d);
            }
        } else if answered {
            answers = resp.get("answers").cloned();
        }
    }
    Ok(HistoryRecord {
        correlation_id: r.get(1)?,
        kind,
        asked_at: rfc3339_ms(r.get(9)?),
        ended_at: r.get::<_, Option<i64>>(11)?.map(rfc3339_ms),
        deadline: rfc3339_ms(r.get(10)?),
        reason: reason.unwrap_or_else(|| "pending".into()),
        producer: crate::protocol::ProducerInfo {
            uid: r.get(3)?,
            pid: r.get(4)?,
            client: r.get(5)?,
        },
        node: r.get(6)?,
        context: json(7)?,
        questions,
        tool_call,
        details,
        answers,
        decision,
        decided_by: json(14)?,
        shown_sha256: r.get(15)?,
        delivered: r.get::<_, String>(16)? == "delivered",
    })
}
