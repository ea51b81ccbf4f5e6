//! `askbus history`: the record of every request askbusd accepted, read from its store file
//! directly (read-only, as the file's owner; the daemon may be running or not), and `askbus
//! history verify`, which checks the records' chain and names the first one that does not
//! fit. When the store file cannot be read (another uid's daemon, e.g. a system service), or
//! with `--daemon`, the records come from the daemon over its socket instead (the `history`
//! frame, page by page), which shows a user only their own requests. Text leaving for the
//! terminal goes through the one neutralizer (`term::sanitize`).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use askbus::history::store::{history, verify, HistoryQuery};
use askbus::history::{default_store_path, HistoryRecord};
use rusqlite::{Connection, OpenFlags};

use crate::term::sanitize;

/// Rows the readable table shows unless `--limit`.
const DEFAULT_ROWS: usize = 50;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One request: shown whole, with its timeline (`verify` checks the chain instead)
    id: Option<String>,
    /// The store file [default: as askbusd resolves it: $STATE_DIRECTORY/askbus.db, else
    /// $XDG_STATE_HOME/askbus/askbus.db, else ~/.local/state/askbus/askbus.db]
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
    /// Asked at or after TIME (RFC 3339) or a duration ago (2h, 1d)
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Asked at or before TIME (RFC 3339) or a duration ago
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only this project's requests (context.project)
    #[arg(long)]
    project: Option<String>,
    /// Only this agent's requests (`name` matches `name/version`)
    #[arg(long)]
    agent: Option<String>,
    /// Only requests asked on this node
    #[arg(long)]
    node: Option<String>,
    /// Only requests that ended so (answered, timeout, …, or pending)
    #[arg(long)]
    reason: Option<String>,
    /// Only questions or only approvals
    #[arg(long, value_parser = ["question", "approval"])]
    kind: Option<String>,
    /// Only requests decided by: human, rule, timeout, no-ui, producer, shutdown
    #[arg(long, value_name = "KIND")]
    decided_by: Option<String>,
    /// At most N records [default: 50 for the table; all for --json and --csv]
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// JSON Lines, newest first (the export)
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// CSV with a header, newest first (the export)
    #[arg(long)]
    csv: bool,
    /// Ask the running daemon over its socket instead of reading the store file (the default
    /// when the file cannot be read); it shows only your own requests unless you are an
    /// operator
    #[arg(long, conflicts_with = "store")]
    daemon: bool,
}

pub async fn run(args: Args, socket: &std::path::Path) -> Result<()> {
    let path = args.store.clone().unwrap_or_else(default_store_path);
    let verifying = args.id.as_deref() == Some("verify");
    // The file, unless it is not ours to read (then the daemon answers for it).
    let readable = args.store.is_some() || verifying || std::fs::File::open(&path).is_ok();
    if args.daemon || !readable {
        return from_daemon(args, socket).await;
    }
    let conn = open_store(&path)?;
    if verifying {
        return match verify(&conn).with_context(|| format!("cannot read {}", path.display()))? {
            Ok(n) => {
                println!("{}: the chain verifies ({n} records)", path.display());
                Ok(())
            }
            Err(broken) => bail!("{}: {}", path.display(), broken),
        };
    }
    let now = SystemTime::now();
    let q = HistoryQuery {
        id: args.id.clone(),
        since: args.since.as_deref().map(|t| when(t, now)).transpose()?,
        until: args.until.as_deref().map(|t| when(t, now)).transpose()?,
        project: args.project.clone(),
        agent: args.agent.clone(),
        node: args.node.clone(),
        reason: args.reason.clone(),
        kind: args.kind.clone(),
        decided_by: args.decided_by.clone(),
        uid: None,
        limit: args
            .limit
            .or((!args.json && !args.csv && args.id.is_none()).then_some(DEFAULT_ROWS)),
        cursor: None,
    };
    let (records, _) =
        history(&conn, &q).with_context(|| format!("cannot read {}", path.display()))?;
    if args.id.is_some() && records.is_empty() {
        bail!(
            "no record of {:?} in {}",
            args.id.clone().unwrap_or_default(),
            path.display()
        );
    }
    print(&args, &records)
}

/// The store file, read-only: the daemon may be writing it (WAL), so a busy moment waits.
fn open_store(path: &std::path::Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open the store {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// One request's record, found as `askbus history ID` finds it: in the store file when it is
/// ours to read, else (or with `daemon`) from the daemon, which shows a user only their own.
pub async fn one(
    id: &str,
    store: Option<PathBuf>,
    daemon: bool,
    socket: &std::path::Path,
) -> Result<HistoryRecord> {
    let path = store.clone().unwrap_or_else(default_store_path);
    let readable = store.is_some() || std::fs::File::open(&path).is_ok();
    if daemon || !readable {
        let filter = askbus::protocol::HistoryFilter {
            correlation_id: Some(id.to_owned()),
            ..Default::default()
        };
        let mut conn = askbus::client::Connection::connect(socket).await?;
        let (records, _) = conn.history(&filter, Some(1), None).await?;
        return records
            .into_iter()
            .next()
            .with_context(|| format!("no record of {id:?} that you may see"));
    }
    let conn = open_store(&path)?;
    let q = HistoryQuery {
        id: Some(id.to_owned()),
        limit: Some(1),
        ..Default::default()
    };
    let (records, _) =
        history(&conn, &q).with_context(|| format!("cannot read {}", path.display()))?;
    records
        .into_iter()
        .next()
        .with_context(|| format!("no record of {id:?} in {}", path.display()))
}

/// The records from the daemon (the `history` frame), paged through until `--limit` or the
/// last page.
async fn from_daemon(args: Args, socket: &std::path::Path) -> Result<()> {
    use askbus::protocol::{HistoryFilter, MAX_HISTORY_LIMIT};
    let now = SystemTime::now();
    let time = |t: &Option<String>| -> Result<Option<String>> {
        t.as_deref()
            .map(|t| when(t, now).map(askbus::history::rfc3339_ms))
            .transpose()
    };
    let filter = HistoryFilter {
        correlation_id: args.id.clone(),
        since: time(&args.since)?,
        until: time(&args.until)?,
        project: args.project.clone(),
        agent: args.agent.clone(),
        node: args.node.clone(),
        reason: args.reason.clone(),
        kind: args.kind.clone(),
        decided_by: args.decided_by.clone(),
    };
    let want = args
        .limit
        .or((!args.json && !args.csv && args.id.is_none()).then_some(DEFAULT_ROWS));
    let mut conn = askbus::client::Connection::connect(socket).await?;
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let left = want.map_or(MAX_HISTORY_LIMIT as usize, |w| w - records.len());
        let page = left.min(MAX_HISTORY_LIMIT as usize) as u32;
        let (mut got, next) = conn.history(&filter, Some(page), cursor.as_deref()).await?;
        records.append(&mut got);
        match next {
            Some(c) if want.is_none_or(|w| records.len() < w) => cursor = Some(c),
            _ => break,
        }
    }
    if args.id.is_some() && records.is_empty() {
        bail!(
            "no record of {:?} that you may see",
            args.id.unwrap_or_default()
        );
    }
    print(&args, &records)
}

fn print(args: &Args, records: &[HistoryRecord]) -> Result<()> {
    if args.json {
        for r in records {
            println!("{}", serde_json::to_string(r)?);
        }
    } else if args.csv {
        csv(records);
    } else if args.id.is_some() {
        for r in records {
            whole(r);
        }
    } else {
        table(records);
    }
    Ok(())
}

/// RFC 3339, or a duration ago, as ms since the epoch.
pub(crate) fn when(text: &str, now: SystemTime) -> Result<i64> {
    let at = match humantime::parse_duration(text) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(SystemTime::UNIX_EPOCH),
        Err(_) => humantime::parse_rfc3339_weak(text).with_context(|| {
            format!("{text:?} is neither a time (RFC 3339) nor a duration (2h)")
        })?,
    };
    Ok(at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64))
}

fn decided(r: &HistoryRecord) -> String {
    let Some(d) = &r.decided_by else {
        return String::new();
    };
    let kind = d["kind"].as_str().unwrap_or("");
    match d["via"].as_str() {
        Some(via) => format!("{kind}/{via}"),
        None => kind.to_owned(),
    }
}

fn what(r: &HistoryRecord) -> String {
    if r.kind == "approval" {
        let tool = r
            .tool_call
            .as_ref()
            .and_then(|t| t["name"].as_str())
            .unwrap_or("?");
        return format!("approve {tool}");
    }
    r.questions
        .as_ref()
        .and_then(|q| q[0]["question"].as_str())
        .unwrap_or("")
        .to_owned()
}

fn outcome(r: &HistoryRecord) -> String {
    if let Some(d) = &r.decision {
        return d["outcome"].as_str().unwrap_or("").to_owned();
    }
    match &r.answers {
        Some(a) => a.to_string(),
        None => String::new(),
    }
}

fn table(records: &[HistoryRecord]) {
    println!(
        "{:<24} {:<24} {:<8} {:<13} {:<14} {:<16} WHAT",
        "ASKED", "ID", "KIND", "REASON", "DECIDED BY", "ANSWER"
    );
    for r in records {
        let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
        println!(
            "{:<24} {:<24} {:<8} {:<13} {:<14} {:<16} {}",
            r.asked_at,
            sanitize(&cut(&r.correlation_id, 24)),
            r.kind,
            r.reason,
            sanitize(&decided(r)),
            sanitize(&cut(&outcome(r), 16)),
            sanitize(&cut(&what(r), 60)),
        );
    }
}

fn whole(r: &HistoryRecord) {
    let project = r
        .context
        .as_ref()
        .and_then(|c| c["project"].as_str())
        .unwrap_or("-");
    println!("{} ({})", sanitize(&r.correlation_id), r.kind);
    println!("  project     {}", sanitize(project));
    println!(
        "  producer    uid {} pid {} {}",
        r.producer.uid,
        r.producer.pid.map_or("-".into(), |p| p.to_string()),
        sanitize(r.producer.client.as_deref().unwrap_or(""))
    );
    println!("  asked       {}", r.asked_at);
    println!("  deadline    {}", r.deadline);
    match &r.ended_at {
        Some(at) => println!("  ended       {at}  {}", r.reason),
        None => println!("  pending"),
    }
    if !decided(r).is_empty() {
        println!("  decided by  {}", sanitize(&decided(r)));
    }
    println!("  delivered   {}", if r.delivered { "yes" } else { "no" });
    println!("  shown       {}", r.shown_sha256);
    println!("  asked what  {}", sanitize(&what(r)));
    let answer = outcome(r);
    if !answer.is_empty() {
        println!("  answer      {}", sanitize(&answer));
    }
}

fn csv(records: &[HistoryRecord]) {
    let field = |s: &str| -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    println!("correlationId,kind,askedAt,endedAt,reason,uid,pid,client,project,agent,decidedBy,answer,shownSha256,delivered");
    for r in records {
        let ctx = |k: &str| {
            r.context
                .as_ref()
                .and_then(|c| c[k].as_str())
                .unwrap_or("")
                .to_owned()
        };
        let row = [
            r.correlation_id.clone(),
            r.kind.clone(),
            r.asked_at.clone(),
            r.ended_at.clone().unwrap_or_default(),
            r.reason.clone(),
            r.producer.uid.to_string(),
            r.producer.pid.map(|p| p.to_string()).unwrap_or_default(),
            r.producer.client.clone().unwrap_or_default(),
            ctx("project"),
            ctx("agent"),
            decided(r),
            outcome(r),
            r.shown_sha256.clone(),
            r.delivered.to_string(),
        ];
        let line: Vec<String> = row.iter().map(|s| field(s)).collect();
        println!("{}", line.join(","));
    }
}
