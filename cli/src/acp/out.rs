//! One side of the relay's output (the agent's stdin, the editor's stdout): a buffered writer
//! that flushes when the reader has nothing more queued, closes for good once a write fails,
//! and keeps whole lines whole: while a line over the bound goes through in pieces, the
//! proxy's own lines wait for its end. Into a pipe, runs of the agent's lines are spliced
//! (`splice`), under the same lock as every write.

use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Mutex;

use super::splice;

struct Inner {
    w: Option<BufWriter<Box<dyn Write + Send>>>,
    /// Inside a line that goes through in pieces.
    partial: bool,
    /// Lines written meanwhile, for after it.
    held: Vec<u8>,
}

/// One side's input: a buffered writer that flushes when the reader has nothing more queued,
/// so a burst is written in few syscalls and a lone line at once.
pub struct Out {
    inner: Mutex<Inner>,
    /// This side's descriptor when it is a pipe: runs of the agent's lines are spliced into it.
    splice_to: Option<RawFd>,
}

impl Out {
    pub fn new(w: Box<dyn Write + Send>) -> Out {
        Out {
            inner: Mutex::new(Inner {
                w: Some(BufWriter::with_capacity(64 * 1024, w)),
                partial: false,
                held: Vec::new(),
            }),
            splice_to: None,
        }
    }

    /// The proxy's stdout: runs of the agent's lines are spliced into it when it is a pipe.
    pub fn file(f: std::fs::File) -> Out {
        let splice_to = splice::is_pipe(f.as_fd()).then(|| f.as_raw_fd());
        Out {
            splice_to,
            ..Out::new(Box::new(f))
        }
    }

    /// Whether [`Out::splice_run`] can move bytes into this side.
    pub fn can_splice(&self) -> bool {
        self.splice_to.is_some()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one line; false once this side is closed or gone.
    pub fn write(&self, line: &[u8], flush: bool) -> bool {
        let mut guard = self.inner();
        let inner = &mut *guard;
        let Some(w) = inner.w.as_mut() else {
            return false;
        };
        if inner.partial {
            inner.held.extend_from_slice(line);
            return true;
        }
        let ok = w.write_all(line).is_ok() && (!flush || w.flush().is_ok());
        if !ok {
            inner.w = None;
        }
        ok
    }

    /// Writes `bytes` straight to this side (after what is buffered), flushed: a large run
    /// goes out in one write, without a copy into the buffer.
    pub fn write_through(&self, bytes: &[u8]) -> bool {
        let mut guard = self.inner();
        let Some(w) = guard.w.as_mut() else {
            return false;
        };
        let ok = w.flush().is_ok() && w.get_mut().write_all(bytes).is_ok();
        if !ok {
            guard.w = None;
        }
        ok
    }

    /// Writes `held` (the start of a line, already read), then moves the next `len` bytes
    /// queued in the pipe `from` to this side with splice(2), under the lock, so no line of the
    /// proxy's own comes between. The `len` bytes are always taken from `from`: once this side
    /// is gone (a failed write or splice, as with [`Out::write_through`]) the rest is read and
    /// dropped. False once this side is closed or gone.
    pub fn splice_run(&self, held: &[u8], from: BorrowedFd<'_>, len: usize) -> bool {
        let mut guard = self.inner();
        let inner = &mut *guard;
        let mut moved = 0;
        let ok = match (inner.w.as_mut(), self.splice_to) {
            (Some(w), Some(to)) => {
                w.flush().is_ok()
                    && w.get_mut().write_all(held).is_ok()
                    && match splice::splice(from, to, len) {
                        Ok(()) => {
                            moved = len;
                            true
                        }
                        Err(n) => {
                            moved = n;
                            false
                        }
                    }
            }
            _ => false,
        };
        if !ok {
            inner.w = None;
            splice::drain(from, len - moved);
        }
        ok
    }

    /// Writes a piece of a line that goes through in pieces; `last` ends it, and the lines
    /// held meanwhile follow it.
    pub fn write_piece(&self, piece: &[u8], last: bool) -> bool {
        let mut guard = self.inner();
        let inner = &mut *guard;
        let Some(w) = inner.w.as_mut() else {
            return false;
        };
        let mut ok = w.flush().is_ok() && w.get_mut().write_all(piece).is_ok();
        inner.partial = !last;
        if last {
            if !piece.ends_with(b"\n") && !inner.held.is_empty() {
                // The stream ended inside it: what follows starts a line of its own.
                ok = ok && w.write_all(b"\n").is_ok();
            }
            let held = std::mem::take(&mut inner.held);
            ok = ok && w.write_all(&held).is_ok() && w.flush().is_ok();
        }
        if !ok {
            inner.w = None;
        }
        ok
    }

    pub fn flush(&self) {
        if let Some(w) = self.inner().w.as_mut() {
            let _ = w.flush();
        }
    }

    /// Flushes and closes it (the agent's stdin, once the editor's is closed).
    pub fn close(&self) {
        let mut guard = self.inner();
        let inner = &mut *guard;
        if let Some(mut w) = inner.w.take() {
            if !inner.held.is_empty() {
                let _ = w.write_all(b"\n").and_then(|()| w.write_all(&inner.held));
            }
            let _ = w.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_written_inside_a_long_one_waits_for_its_end() {
        let sink = Shared::default();
        let out = Out::new(Box::new(sink.clone()));
        assert!(out.write(b"one\n", true));
        assert!(out.write_piece(b"lo", false));
        assert!(out.write(b"mine\n", true));
        assert!(out.write_piece(b"ng\n", true));
        assert!(out.write(b"two\n", true));
        assert_eq!(&*sink.0.lock().unwrap(), b"one\nlong\nmine\ntwo\n");
    }
}
