//! One side of the relay's output (the agent's stdin, the editor's stdout): a buffered writer
//! that flushes when the reader has nothing more queued, and closes for good once a write
//! fails.

use std::io::{BufWriter, Write};
use std::sync::Mutex;

/// One side's input: a buffered writer that flushes when the reader has nothing more queued,
/// so a burst is written in few syscalls and a lone line at once.
pub struct Out {
    w: Mutex<Option<BufWriter<Box<dyn Write + Send>>>>,
}

impl Out {
    pub fn new(w: Box<dyn Write + Send>) -> Out {
        Out {
            w: Mutex::new(Some(BufWriter::with_capacity(64 * 1024, w))),
        }
    }

    /// Writes one line; false once this side is closed or gone.
    pub fn write(&self, line: &[u8], flush: bool) -> bool {
        let mut guard = self.w.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = guard.as_mut() else {
            return false;
        };
        let ok = w.write_all(line).is_ok() && (!flush || w.flush().is_ok());
        if !ok {
            *guard = None;
        }
        ok
    }

    /// Writes `bytes` straight to this side (after what is buffered), flushed: a large run
    /// goes out in one write, without a copy into the buffer.
    pub fn write_through(&self, bytes: &[u8]) -> bool {
        let mut guard = self.w.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = guard.as_mut() else {
            return false;
        };
        let ok = w.flush().is_ok() && w.get_mut().write_all(bytes).is_ok();
        if !ok {
            *guard = None;
        }
        ok
    }

    pub fn flush(&self) {
        if let Some(w) = self.w.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let _ = w.flush();
        }
    }

    /// Flushes and closes it (the agent's stdin, once the editor's is closed).
    pub fn close(&self) {
        if let Some(mut w) = self.w.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = w.flush();
        }
    }
}
