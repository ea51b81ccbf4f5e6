//! Telemetry: one JSON line per ask-user-request, whatever its end, and the daemon-wide
//! counters that connections bump. The broker produces `Record`s; they are queued (moved, not
//! serialized) for a dedicated thread that serializes and writes them a window at a time, so
//! neither the disk nor the formatting is on the broker's path, and no record is dropped.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::SystemTime;

pub use record::Record;

use crate::protocol::ErrorCode;

pub mod record;

/// RFC 3339 UTC with milliseconds.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Daemon-wide counters kept outside the broker's lock.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    pub frames_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub queue_overflows: AtomicU64,
    pub telemetry_lines: AtomicU64,
    pub telemetry_errors: AtomicU64,
    errors: [AtomicU64; ErrorCode::ALL.len()],
}

impl Counters {
    pub fn count_error(&self, code: ErrorCode) {
        let i = ErrorCode::ALL.iter().position(|c| *c == code).unwrap_or(0);
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn errors(&self) -> impl Iterator<Item = (ErrorCode, u64)> + '_ {
        ErrorCode::ALL
            .iter()
            .zip(&self.errors)
            .map(|(c, n)| (*c, n.load(Ordering::Relaxed)))
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Lines serialized by the sinks, waiting for the writer thread.
#[derive(Default)]
struct Queue {
    records: Vec<Record>,
    /// Lines ever queued, and of those, written (or failed): what a flush waits on.
    queued_total: u64,
    done_total: u64,
    /// A flush is waiting: write without letting more lines gather first.
    hurry: bool,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// The writer waits here for lines (or a close).
    ready: Condvar,
    /// Flushes wait here for the writer to get past their lines.
    written: Condvar,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Serializing a record cannot panic; a poisoned queue is still the best there is.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where records go. Cloning is cheap; sending never blocks on the disk: the record is moved
/// into a queue that the writer thread empties.
#[derive(Clone)]
pub struct TelemetrySink {
    shared: Option<Arc<Shared>>,
}

impl TelemetrySink {
    /// A sink that drops every record (`--no-telemetry`).
    pub fn disabled() -> Self {
        TelemetrySink { shared: None }
    }

    pub fn send(&self, record: Record) {
        let Some(shared) = &self.shared else { return };
        let mut q = shared.queue();
        let was_empty = q.records.is_empty();
        q.records.push(record);
        q.queued_total += 1;
        if was_empty {
            // Only the first record of a window wakes the writer; the rest gather behind it.
            shared.ready.notify_one();
        }
    }

    /// Blocks until every record sent before this call is written and flushed.
    pub fn flush_blocking(&self) {
        let Some(shared) = &self.shared else { return };
        let mut q = shared.queue();
        let target = q.queued_total;
        q.hurry = true;
        shared.ready.notify_one();
        while q.done_total < target && !q.closed {
            q = shared.written.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Opens the telemetry file for appending so that nobody else can read it or redirect it:
/// its directory (created 0700, or 0750 with a group, when missing) must not be writable by
/// another user (owned by us or root, not group- or world-writable unless sticky); the
/// file is opened with `O_NOFOLLOW` (a planted symlink fails with `ELOOP` instead of being
/// followed, which a root daemon would otherwise append through to any file), must be a
/// regular file of ours with one link (a planted hard link or file is refused), and is
/// created 0600, or 0640 with `group` as its group; an existing file gets the same mode.
pub fn open_private(path: &Path, group: Option<u32>) -> std::io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    let refuse = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{why}; refusing to write telemetry there"),
        )
    };
    let uid = crate::paths::effective_uid();
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => Path::new("."),
    };
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(if group.is_some() { 0o750 } else { 0o700 })
            .create(dir)?;
    }
    // The directory itself may be reached through symlinks the admin chose (/var/lib →
    // elsewhere); what matters is who can change its entries.
    let d = std::fs::metadata(dir)?;
    let sticky = d.mode() & 0o1000 != 0;
    if d.uid() != uid && d.uid() != 0 {
        return Err(refuse(format!(
            "{} belongs to uid {}, who could swap the file",
            dir.display(),
            d.uid()
        )));
    }
    if d.mode() & 0o022 != 0 && !sticky {
        return Err(refuse(format!(
            "{} is writable by other users (mode {:04o})",
            dir.display(),
            d.mode() & 0o7777
        )));
    }
    // Said plainly here; O_NOFOLLOW below closes the race with a symlink planted after.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse(format!("{} is a symlink", path.display())));
    }
    let mode = if group.is_some() { 0o640 } else { 0o600 };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refuse(format!("{} is a symlink", path.display()))
            } else {
                e
            }
        })?;
    let m = file.metadata()?;
    if !m.file_type().is_file() {
        return Err(refuse(format!("{} is not a regular file", path.display())));
    }
    if m.uid() != uid {
        return Err(refuse(format!(
            "{} belongs to uid {}, not to askbusd's uid {uid}",
            path.display(),
            m.uid()
        )));
    }
    if m.nlink() != 1 {
        return Err(refuse(format!(
            "{} has {} hard links",
            path.display(),
            m.nlink()
        )));
    }
    if let Some(gid) = group {
        std::os::unix::fs::fchown(&file, None, Some(gid))?;
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    // O_NONBLOCK only kept a planted FIFO from blocking the open; writes are blocking.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fd = std::os::unix::io::AsRawFd::as_raw_fd(&file);
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    Ok(file)
}

/// The writer thread; dropping it writes what is queued and stops the thread.
pub struct TelemetryWriter {
    path: PathBuf,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl TelemetryWriter {
    /// Opens (appending) `path` safely (see [`open_private`]), creating its directory, and
    /// starts the writer thread.
    pub fn start(
        path: &Path,
        group: Option<u32>,
        counters: Arc<Counters>,
    ) -> std::io::Result<(Self, TelemetrySink)> {
        let mut file = open_private(path, group)?;
        end_torn_line(&mut file)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            written: Condvar::new(),
        });
        let thread = std::thread::Builder::new()
            .name("askbusd-telemetry".into())
            .spawn({
                let shared = shared.clone();
                move || write_loop(file, &shared, &counters)
            })?;
        Ok((
            TelemetryWriter {
                path: path.to_owned(),
                shared: shared.clone(),
                thread: Some(thread),
            },
            TelemetrySink {
                shared: Some(shared),
            },
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TelemetryWriter {
    fn drop(&mut self) {
        self.shared.queue().closed = true;
        self.shared.ready.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A daemon killed during a write can leave a torn last line (a write of the buffer is cut
/// at a page, not at a record); end it, so that the first record written now starts a line of
/// its own instead of being glued to the torn one.
fn end_torn_line(file: &mut File) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(());
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        // O_APPEND: this lands at the end whatever the read position.
        file.write_all(b"\n")?;
    }
    Ok(())
}

/// How long the writer lets records gather before writing them: the most a record waits to
/// reach the file (a graceful shutdown writes everything; a crash loses at most this much).
const GATHER: std::time::Duration = std::time::Duration::from_millis(10);

/// A drained buffer larger than this is freed rather than kept for the next window.
const KEPT_CAPACITY: usize = 256 * 1024;

fn write_loop(mut file: File, shared: &Shared, counters: &Counters) {
    let mut records = Vec::new();
    let mut out = Vec::new();
    let mut ts_text = (SystemTime::UNIX_EPOCH, Vec::new());
    loop {
        let mut q = shared.queue();
        while q.records.is_empty() && !q.closed {
            q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        if q.records.is_empty() {
            return; // closed, and everything written
        }
        if !q.hurry && !q.closed {
            // Gather: while this thread sleeps, lines queue without waking it, so under load
            // it costs one wake-up and one write per window, not one per record.
            drop(q);
            std::thread::sleep(GATHER);
            q = shared.queue();
        }
        q.hurry = false;
        std::mem::swap(&mut records, &mut q.records);
        let upto = q.queued_total;
        drop(q);
        let lines = records.len() as u64;
        for record in records.drain(..) {
            record.write_line(&mut out, &mut ts_text);
        }
        match file.write_all(&out) {
            Ok(()) => {
                counters.telemetry_lines.fetch_add(lines, Ordering::Relaxed);
            }
            Err(e) => {
                counters
                    .telemetry_errors
                    .fetch_add(lines, Ordering::Relaxed);
                tracing::warn!(error = %e, lines, "telemetry write failed; records lost");
            }
        }
        out.clear();
        if out.capacity() > KEPT_CAPACITY {
            out = Vec::new();
            records = Vec::new();
        }
        shared.queue().done_total = upto;
        shared.written.notify_all();
    }
}
