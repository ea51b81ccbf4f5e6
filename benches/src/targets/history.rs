//! The store's history targets (issue 28): a `history` query filtered by project and one day
//! over a million records, and a daemon's memory not growing with its history (it lives on
//! disk). The million records are written straight into a store file (one transaction, the
//! chain hashed as the daemon hashes it) that askbusd created and then opens, not asked one by
//! one through the socket: what is measured is the query and the open, not the filling.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use askbus::history::{chain_hash, rfc3339_ms, ChainFields, GENESIS};
use rusqlite::{params, Connection};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{stats, SETTLE};
use crate::load::{self, Reader};
use crate::report::median;
use crate::spawn::{Kind, Target, TempDir};
use crate::{client_runtime, proc};

/// Projects the records are spread over (each query names one).
const PROJECTS: usize = 20;
/// Days they are spread over, inside the daemon's default retention of 30 days (older ended
/// records would be removed at open).
const DAYS: i64 = 28;
const DAY_MS: i64 = 86_400_000;
/// Queries timed (each a different project and day).
const QUERIES: usize = 21;

/// What the history rows measured.
pub(super) struct History {
    pub(super) records: usize,
    pub(super) fill_s: f64,
    pub(super) store_mib: f64,
    /// Median of the `history` frame's round trip (ms), and of the same query on the file.
    pub(super) socket_ms: f64,
    pub(super) direct_ms: f64,
    /// Records in each answer (the page: 100).
    pub(super) answered: usize,
    pub(super) ready_ms: f64,
    pub(super) rss_kib: u64,
    pub(super) rss_empty_kib: u64,
}

pub(super) fn history(bin: &Path, records: usize) -> Result<History> {
    let dir = TempDir::new()?;
    let store = dir.0.join("store.db");
    let kind = |path: &Path| Kind::Askbusd {
        bin: bin.to_owned(),
        telemetry: false,
        args: vec!["--store".into(), path.display().to_string()],
        policies: None,
    };
    // An empty store: its schema, and the memory of a daemon with no history.
    let empty = Target::start(&kind(&store))?;
    std::thread::sleep(SETTLE);
    let rss_empty_kib = proc::memory(empty.pid())?.rss_kib;
    empty.stop()?;

    let now = askbus_now_ms();
    let first_day = (now / DAY_MS - DAYS) * DAY_MS;
    let t = Instant::now();
    fill(&store, records, first_day)?;
    let fill_s = t.elapsed().as_secs_f64();
    let store_mib = std::fs::metadata(&store)?.len() as f64 / (1024.0 * 1024.0);

    // The same queries straight on the file (what `askbus history --store` does).
    let queries: Vec<(String, i64)> = (0..QUERIES)
        .map(|i| {
            (
                format!("p{}", (i * 7) % PROJECTS),
                first_day + ((i as i64 * 5) % DAYS) * DAY_MS,
            )
        })
        .collect();
    let conn = Connection::open_with_flags(&store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut direct = Vec::new();
    let mut answered = Vec::new();
    for (project, day) in &queries {
        let q = askbus::history::store::HistoryQuery {
            project: Some(project.clone()),
            since: Some(*day),
            until: Some(day + DAY_MS - 1),
            limit: Some(100),
            ..Default::default()
        };
        let t = Instant::now();
        let (found, _) = askbus::history::store::history(&conn, &q)?;
        direct.push(t.elapsed().as_secs_f64() * 1000.0);
        answered.push(found.len());
    }
    drop(conn);

    // The daemon on it: start to ready (the chain is checked at open), its memory, and the
    // `history` frame.
    let t0 = Instant::now();
    let mut target = Target::spawn(&kind(&store))?;
    target
        .wait_ready()
        .context("askbusd did not start on the store")?;
    let ready_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let socket = target.socket().to_owned();
    let rt = client_runtime(1)?;
    let socket_ms = rt.block_on(async {
        let (rd, mut wr) = load::connect(&socket).await?.into_split();
        let mut rd = Reader::new(rd);
        let mut times = Vec::new();
        for ((project, day), want) in queries.iter().zip(&answered) {
            let frame = serde_json::json!({
                "type": "history",
                "filter": {
                    "project": project,
                    "since": rfc3339_ms(*day),
                    "until": rfc3339_ms(day + DAY_MS - 1),
                },
                "limit": 100,
            })
            .to_string();
            let mut out = Vec::new();
            crate::wire::write_frame(frame.as_bytes(), &mut out);
            let t = Instant::now();
            wr.write_all(&out).await?;
            loop {
                let f = rd.frame().await?;
                let v: Value = serde_json::from_slice(&f)?;
                match v["type"].as_str() {
                    Some("history") => {
                        let got = v["records"].as_array().map_or(0, Vec::len);
                        if got != *want {
                            bail!("the daemon answered {got} records, the file {want}");
                        }
                        break;
                    }
                    Some("error") => bail!("history refused: {v}"),
                    _ => {}
                }
            }
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        stats(&socket).await?;
        Ok::<_, anyhow::Error>(median(times))
    })?;
    std::thread::sleep(SETTLE);
    let rss_kib = proc::memory(target.pid())?.rss_kib;
    target.stop_within(Duration::from_secs(60))?;
    Ok(History {
        records,
        fill_s,
        store_mib,
        socket_ms,
        direct_ms: median(direct),
        answered: median(answered.iter().map(|&n| n as f64).collect()) as usize,
        ready_ms,
        rss_kib,
        rss_empty_kib,
    })
}

/// Milliseconds since the epoch, now.
fn askbus_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Writes `n` ended, answered records into the store at `path` (created by askbusd, so its
/// schema), spread evenly over [`PROJECTS`] projects and [`DAYS`] days from `first_day`, each
/// chained to the one before as the daemon chains them, in one transaction.
fn fill(path: &Path, n: usize, first_day: i64) -> Result<()> {
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        bail!("askbusd left no schema in {}", path.display());
    }
    let uid = i64::from(askbus::trust::effective_uid());
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO requests (correlation_id, kind, uid, pid, client, project, agent, \
             context, body, asked_at, deadline_at, timeout_ms, shown_sha256, ended_at, reason, \
             response, decided_by, delivery, chain, prev_hash, hash) \
             VALUES (?1, 'question', ?2, 4242, 'askbus-bench', ?3, 'bench', ?4, ?5, ?6, ?7, \
             60000, ?8, ?9, 'answered', ?10, ?11, 'delivered', ?12, ?13, ?14)",
        )?;
        let body = r#"[{"question":"Which database should the new service use?","header":"Database","type":"choice","options":[{"label":"SQLite","description":"A single file; nothing to run"},{"label":"PostgreSQL","description":"A server; best for many writers"}],"multiSelect":false}]"#;
        let decided_by = r#"{"kind":"ui","via":"askbus-bench"}"#;
        let shown = "0".repeat(64);
        let span = DAYS * DAY_MS;
        let mut prev = GENESIS.to_owned();
        for i in 0..n {
            let id = format!("h-{i}");
            let project = format!("p{}", i % PROJECTS);
            let context = format!(r#"{{"project":"{project}","agent":"bench"}}"#);
            let asked = first_day + (i as i64 * span) / n as i64;
            let response = format!(
                r#"{{"type":"ask-user-response","correlationId":"{id}","answers":{{"0":"SQLite"}}}}"#
            );
            let chain = i as i64 + 1;
            let hash = chain_hash(
                &prev,
                &ChainFields {
                    chain,
                    correlation_id: &id,
                    kind: "question",
                    uid,
                    pid: Some(4242),
                    client: Some("askbus-bench"),
                    node: None,
                    context: Some(&context),
                    body: Some(body),
                    asked_at_ms: asked,
                    deadline_ms: asked + 60_000,
                    timeout_ms: 60_000,
                    shown_sha256: &shown,
                    ended_at_ms: asked + 1_000,
                    reason: "answered",
                    response: Some(&response),
                    decided_by: Some(decided_by),
                },
            );
            insert.execute(params![
                id,
                uid,
                project,
                context,
                body,
                asked,
                asked + 60_000,
                shown,
                asked + 1_000,
                response,
                decided_by,
                chain,
                prev,
                hash,
            ])?;
            prev = hash;
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    Ok(())
}
