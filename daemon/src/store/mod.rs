//! The store: an embedded SQLite database (WAL) that keeps every accepted request, so pending
//! ones survive a restart and every decision is on record. This file opens it (path, owner,
//! permissions, the one-daemon lock, the schema) and owns the writer thread, which commits
//! what the broker asks to persist in groups (many operations per transaction and fsync) and
//! then tells the hub how far it got: the hub delivers an operation's frames only after its
//! writes are committed (the commit point, PROTOCOL.md "Durability"). `record` turns bodies
//! and rows into text and back, `query` answers `history`, checks the chain and loads what
//! a start restores.

mod query;
mod record;
pub mod schema;
mod writer;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::watch;

pub use query::{HistoryQuery, Loaded, StoredRequest};
pub use record::{rfc3339_ms, to_restored};
pub use writer::Clock;

use crate::broker::Durable;

/// Whether question text, answers and diffs are kept in ended records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryText {
    #[default]
    Keep,
    Redact,
}

/// When a commit reaches the disk (`store_sync`, SQLite's `synchronous` in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StoreSync {
    /// Every commit is fsynced before its frames go out: a power cut loses nothing any peer
    /// was told.
    #[default]
    Full,
    /// Commits are written to the WAL without an fsync (the WAL is synced at checkpoints): a
    /// crash or SIGKILL of askbusd loses nothing, a power cut or kernel panic can lose the
    /// commits since the last checkpoint.
    Normal,
}

impl StoreSync {
    fn pragma(self) -> &'static str {
        match self {
            StoreSync::Full => "FULL",
            StoreSync::Normal => "NORMAL",
        }
    }
}

/// What a store is opened with.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub path: PathBuf,
    /// Ended records older than this are removed (whole, from the old end of the chain).
    pub retention: Duration,
    pub history_text: HistoryText,
    pub sync: StoreSync,
}

/// Why the store cannot be opened: the daemon stops and says so. Nothing is truncated.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: cannot create its directory: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "store {path} belongs to uid {owner}, not to this askbusd's uid {own}: run askbusd as its owner, or give another file with --store"
    )]
    WrongOwner { path: PathBuf, owner: u32, own: u32 },
    #[error("store {path} is in use by another askbusd (pid {pid}): stop it, or give this one another file with --store")]
    Locked { path: PathBuf, pid: String },
    #[error("store {path} cannot be read: {source} (check its permissions; nothing was changed)")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("store {path} is not a usable askbus database: {source}. Nothing was changed: move the file aside to start with an empty store, or start with --no-store")]
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("store {path} has schema version {found}, newer than this askbusd's {ours}: run a newer askbusd, or give another file with --store")]
    Newer {
        path: PathBuf,
        found: i64,
        ours: i64,
    },
}

/// How much disk the store keeps in reserve for decisions when the disk fills.
const BALLAST_BYTES: u64 = 8 * 1024 * 1024;

/// The open store: the writer thread's queue, its progress, and a connection for reads.
pub struct Store {
    path: PathBuf,
    tx: Mutex<Option<mpsc::Sender<writer::Cmd>>>,
    /// The last operation group committed (the hub releases frames up to it).
    committed: watch::Receiver<u64>,
    /// Whether new requests may be accepted (false while writes fail).
    pub available: Arc<AtomicBool>,
    reader: Mutex<Connection>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    _lock: File,
    /// What was pending or owed when it was opened, for the broker to restore.
    loaded: Mutex<Option<Loaded>>,
    /// Set when the chain did not verify at start (`askbus doctor` says so).
    pub broken_chain: Option<String>,
}

impl Store {
    /// Opens (or creates) the store at `opts.path` and starts its writer thread.
    pub fn open(opts: &StoreOptions) -> Result<Store, StoreError> {
        let path = opts.path.clone();
        let dir = path.parent().unwrap_or(Path::new("."));
        if !dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::Directory {
                    path: path.clone(),
                    source,
                })?;
        }
        let own = crate::paths::effective_uid();
        let unreadable = |source| StoreError::Unreadable {
            path: path.clone(),
            source,
        };
        match fs::metadata(&path) {
            Ok(m) if m.uid() != own => {
                return Err(StoreError::WrongOwner {
                    path,
                    owner: m.uid(),
                    own,
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created 0600 before SQLite opens it (SQLite would follow the umask).
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(unreadable)?;
            }
            Err(e) => return Err(unreadable(e)),
        }
        File::open(&path).map_err(unreadable)?;
        let lock = lock(&path)?;
        let corrupt = |source| StoreError::Corrupt {
            path: path.clone(),
            source,
        };
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(corrupt)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(corrupt)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(corrupt)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(mode, "the store could not switch to WAL mode");
        }
        // FULL: a transaction is on disk when its commit returns, so a power cut loses nothing
        // the daemon acted on (group commit pays the fsync once per group). NORMAL trades
        // the power cut's last commits for no fsync on the commit path.
        conn.pragma_update(None, "synchronous", opts.sync.pragma())
            .map_err(corrupt)?;
        match schema::migrate(&mut conn).map_err(corrupt)? {
            schema::Found::Newer(found) => {
                return Err(StoreError::Newer {
                    path,
                    found,
                    ours: schema::VERSION,
                })
            }
            schema::Found::Migrated(from) => {
                tracing::info!(from, to = schema::VERSION, "store schema migrated")
            }
            schema::Found::Current => {}
        }
        for suffix in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{suffix}", path.display()));
            let _ = fs::set_permissions(&side, fs::Permissions::from_mode(0o600));
        }
        let broken_chain = match query::verify(&conn).map_err(corrupt)? {
            Ok(_) => None,
            Err(broken) => {
                tracing::warn!(
                    store = %path.display(),
                    "the history chain does not verify: {broken} (the evidence is kept as it is)"
                );
                Some(broken)
            }
        };
        let loaded =
            query::load(&conn, opts.history_text == HistoryText::Redact).map_err(corrupt)?;
        let reader = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(corrupt)?;
        reader
            .busy_timeout(Duration::from_secs(5))
            .map_err(corrupt)?;
        let ballast = PathBuf::from(format!("{}.reserve", path.display()));
        writer::fill_ballast(&ballast, BALLAST_BYTES);
        let available = Arc::new(AtomicBool::new(true));
        let (tx, rx) = mpsc::channel();
        let (committed_tx, committed) = watch::channel(0);
        let w = writer::Writer::new(
            conn,
            opts.clone(),
            ballast,
            BALLAST_BYTES,
            available.clone(),
            committed_tx,
        )
        .map_err(corrupt)?;
        let thread = std::thread::Builder::new()
            .name("askbus-store".into())
            .spawn(move || w.run(rx))
            .map_err(unreadable)?;
        Ok(Store {
            path,
            tx: Mutex::new(Some(tx)),
            committed,
            available,
            reader: Mutex::new(reader),
            thread: Mutex::new(Some(thread)),
            _lock: lock,
            loaded: Mutex::new(Some(loaded)),
            broken_chain,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was pending or owed at open (taken once, by the restore).
    pub fn take_loaded(&self) -> Option<Loaded> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Queues operation group `seq` for the writer.
    pub fn write(&self, seq: u64, clock: Clock, ops: Vec<Durable>) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = tx.as_ref() {
            let _ = tx.send(writer::Cmd::Write { seq, clock, ops });
        }
    }

    /// Follows the groups committed.
    pub fn committed(&self) -> watch::Receiver<u64> {
        self.committed.clone()
    }

    pub fn is_available(&self) -> bool {
        self.available.load(Ordering::Relaxed)
    }

    /// Records matching `q`, newest first, and the cursor of the next page.
    pub fn history(
        &self,
        q: &HistoryQuery,
    ) -> rusqlite::Result<(
        Vec<askbus::history::HistoryRecord>,
        Option<askbus::history::store::Cursor>,
    )> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        query::history(&conn, q)
    }

    /// Commits everything queued and stops the writer (at shutdown).
    pub fn close(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Takes the one-daemon lock beside the store (`<file>.lock`, holding the owner's pid).
fn lock(path: &Path) -> Result<File, StoreError> {
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let unreadable = |source| StoreError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(unreadable)?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut pid = String::new();
        let _ = f.read_to_string(&mut pid);
        let pid = pid.trim();
        return Err(StoreError::Locked {
            path: path.to_owned(),
            pid: if pid.is_empty() {
                "unknown".into()
            } else {
                pid.to_owned()
            },
        });
    }
    f.set_len(0).map_err(unreadable)?;
    f.rewind().map_err(unreadable)?;
    writeln!(f, "{}", std::process::id()).map_err(unreadable)?;
    Ok(f)
}

/// Milliseconds since the Unix epoch.
pub fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
