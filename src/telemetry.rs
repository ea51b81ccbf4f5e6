//! Telemetry: one JSON line per ask-user-request, whatever its end, and the daemon-wide
//! counters that connections bump. The broker produces `Record`s; a dedicated thread writes
//! them, so a slow disk never stalls the broker and no record is dropped.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use serde::Serialize;
use tokio::sync::mpsc;

pub use crate::protocol::UiInfo;
use crate::protocol::{ErrorCode, ProducerInfo};

/// One request's end, with the reference tool's ask_user metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// RFC 3339 UTC, stamped when the record leaves the broker.
    pub ts: String,
    /// Which daemon saw it: room for several federated daemons.
    pub node: Arc<str>,
    /// `None` for a request refused before it had a usable correlationId.
    pub correlation_id: Option<String>,
    /// An `Outcome`, `producer-gone`, or `rejected`.
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    pub producer: ProducerInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui: Option<UiInfo>,
    pub latency_ms: u64,
    #[serde(rename = "question_types")]
    pub question_types: Vec<&'static str>,
    pub dismissed: bool,
    #[serde(rename = "empty_submission")]
    pub empty_submission: bool,
    #[serde(rename = "answer_count")]
    pub answer_count: usize,
}

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

enum Msg {
    Record(Record),
    Flush(std::sync::mpsc::Sender<()>),
}

/// Where records go. Cloning is cheap; sending never blocks.
#[derive(Clone)]
pub struct TelemetrySink {
    tx: Option<mpsc::UnboundedSender<Msg>>,
}

impl TelemetrySink {
    /// A sink that drops every record (`--no-telemetry`).
    pub fn disabled() -> Self {
        TelemetrySink { tx: None }
    }

    pub fn send(&self, record: Record) {
        if let Some(tx) = &self.tx {
            // The writer only goes away after shutdown, when no more records are produced.
            let _ = tx.send(Msg::Record(record));
        }
    }

    /// Blocks until every record sent before this call is written and flushed.
    pub fn flush_blocking(&self) {
        if let Some(tx) = &self.tx {
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            if tx.send(Msg::Flush(done_tx)).is_ok() {
                let _ = done_rx.recv();
            }
        }
    }
}

/// The writer thread; dropping every sink and calling `finish` drains it.
pub struct TelemetryWriter {
    path: PathBuf,
    thread: Option<JoinHandle<()>>,
}

impl TelemetryWriter {
    /// Opens (appending) `path`, creating its directory, and starts the writer thread.
    pub fn start(path: &Path, counters: Arc<Counters>) -> std::io::Result<(Self, TelemetrySink)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)?;
        end_torn_line(&mut file)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("askbusd-telemetry".into())
            .spawn(move || write_loop(file, rx, counters))?;
        Ok((
            TelemetryWriter {
                path: path.to_owned(),
                thread: Some(thread),
            },
            TelemetrySink { tx: Some(tx) },
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the thread to write everything; call after the last sink is dropped.
    pub fn finish(mut self) {
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

fn write_loop(file: File, mut rx: mpsc::UnboundedReceiver<Msg>, counters: Arc<Counters>) {
    let mut out = BufWriter::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(512);
    while let Some(first) = rx.blocking_recv() {
        if matches!(first, Msg::Record(_)) {
            // Gather before writing: while this thread sleeps, records queue without waking
            // it, so under load it costs one wake-up and one write per window, not per record.
            std::thread::sleep(GATHER);
        }
        let mut next = Some(first);
        // Write everything queued, then flush once: one syscall per window.
        while let Some(msg) = next {
            match msg {
                Msg::Record(record) => {
                    line.clear();
                    serde_json::to_writer(&mut line, &record).expect("records serialize");
                    line.push(b'\n');
                    match out.write_all(&line) {
                        Ok(()) => Counters::bump(&counters.telemetry_lines),
                        Err(e) => {
                            Counters::bump(&counters.telemetry_errors);
                            tracing::warn!(error = %e, "telemetry write failed");
                        }
                    }
                }
                Msg::Flush(done) => {
                    let _ = out.flush();
                    let _ = done.send(());
                }
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = out.flush() {
            Counters::bump(&counters.telemetry_errors);
            tracing::warn!(error = %e, "telemetry flush failed");
        }
    }
    let _ = out.flush();
}
