//! Moving the agent's stream to the editor without copying it through the proxy (Linux pipes):
//! `tee(2)` duplicates what is queued in the agent's pipe into a scratch pipe, whose copy is
//! read for the scan, and `splice(2)` then moves the run of lines that needs no look from the
//! agent's pipe to the editor's, page by page, without a copy. Where either side is not a pipe
//! (a file, a pty, a socket) the pump reads and writes as it always did.

use std::io::{self, ErrorKind};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::pump::Peek;

/// Whether `fd` is a pipe (a FIFO).
pub fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: fstat writes the stat it is given, for a descriptor we hold.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd.as_raw_fd(), &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO
    }
}

/// Asks for a pipe of `size` bytes on `fd` (best effort, nothing when `fd` is not a pipe): a
/// peer streaming updates then fills it in fewer, larger writes, and the proxy reads, tees or
/// splices it in fewer, larger calls.
pub fn widen_pipe(fd: BorrowedFd<'_>, size: usize) {
    if is_pipe(fd) {
        // SAFETY: F_SETPIPE_SZ only resizes a pipe's buffer (an error, e.g. over the user's
        // limit, leaves it as it was).
        unsafe {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int);
        }
    }
}

fn pipe_size(fd: RawFd) -> usize {
    // SAFETY: F_GETPIPE_SZ reads a pipe's size.
    let n = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    usize::try_from(n).unwrap_or(0)
}

/// A look at what is queued in a pipe before it is taken: `tee(2)` into a scratch pipe of the
/// same size, and a read of that copy.
pub struct Tee {
    from: RawFd,
    scratch_r: OwnedFd,
    scratch_w: OwnedFd,
}

impl Tee {
    /// For the pipe `from` (which must outlive it); `None` when it is not a pipe or no scratch
    /// pipe can be made.
    pub fn new(from: BorrowedFd<'_>) -> Option<Tee> {
        if !is_pipe(from) {
            return None;
        }
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two new descriptors into the array it is given; they are owned
        // from here on.
        let (scratch_r, scratch_w) = unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return None;
            }
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        // tee copies whole pipe buffers: the scratch pipe holds as many as the agent's.
        let want = pipe_size(from.as_raw_fd());
        if pipe_size(scratch_w.as_raw_fd()) < want {
            widen_pipe(scratch_w.as_fd(), want);
        }
        Some(Tee {
            from: from.as_raw_fd(),
            scratch_r,
            scratch_w,
        })
    }
}

impl Peek for Tee {
    /// Copies what is queued next in the pipe (up to `buf.len()` bytes) into `buf` without
    /// taking it; waits for some when there is none. `Ok(0)`: the pipe is empty and closed.
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // SAFETY: tee between two pipe descriptors we hold; it touches no memory of ours.
        let n = unsafe { libc::tee(self.from, self.scratch_w.as_raw_fd(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        let mut got = 0;
        while got < n {
            // SAFETY: read into the part of `buf` not yet filled, of its length.
            let r = unsafe {
                libc::read(
                    self.scratch_r.as_raw_fd(),
                    buf[got..n].as_mut_ptr().cast(),
                    n - got,
                )
            };
            match r {
                r if r > 0 => got += r as usize,
                0 => return Err(ErrorKind::UnexpectedEof.into()),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(n)
    }
}

/// Moves `len` bytes queued in the pipe `from` to the pipe `to` (splice(2): the pages move,
/// nothing is copied). `Err(n)`: it failed after `n` bytes (the other side is gone).
pub fn splice(from: BorrowedFd<'_>, to: RawFd, len: usize) -> Result<(), usize> {
    let mut moved = 0;
    while moved < len {
        // SAFETY: splice between two pipe descriptors we hold, without offsets (pipes have
        // none); it touches no memory of ours.
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len - moved,
                libc::SPLICE_F_MOVE,
            )
        };
        match n {
            n if n > 0 => moved += n as usize,
            n if n < 0 && io::Error::last_os_error().kind() == ErrorKind::Interrupted => {}
            // 0: `from` ended, which it cannot have with `len` bytes queued; or an error.
            _ => return Err(moved),
        }
    }
    Ok(())
}

/// Reads and drops `len` bytes of `from` (what a side that is gone was to be sent).
pub fn drain(from: BorrowedFd<'_>, mut len: usize) {
    let mut sink = vec![0u8; len.min(64 * 1024)];
    while len > 0 {
        let want = len.min(sink.len());
        // SAFETY: read into `sink`, at most its length.
        let n = unsafe { libc::read(from.as_raw_fd(), sink.as_mut_ptr().cast(), want) };
        match n {
            n if n > 0 => len -= n as usize,
            n if n < 0 && io::Error::last_os_error().kind() == ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn pipe() -> (std::fs::File, std::fs::File) {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two new descriptors, owned by the Files from here on.
        unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        }
    }

    #[test]
    fn a_look_leaves_the_bytes_queued_and_a_splice_moves_them_in_order() {
        let (agent_r, mut agent_w) = pipe();
        let (mut editor_r, editor_w) = pipe();
        agent_w.write_all(b"one\ntwo\nthr").unwrap();
        let mut tee = Tee::new(agent_r.as_fd()).expect("a pipe can be looked at");
        let mut buf = [0u8; 64];
        let n = tee.peek(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"one\ntwo\nthr");
        // Looked at again: still all there.
        assert_eq!(tee.peek(&mut buf).unwrap(), n);
        splice(agent_r.as_fd(), editor_w.as_raw_fd(), 8).unwrap();
        assert_eq!(tee.peek(&mut buf).unwrap(), 3, "the rest is still queued");
        agent_w.write_all(b"ee\n").unwrap();
        drop(agent_w);
        let n = tee.peek(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"three\n");
        drain(agent_r.as_fd(), n);
        assert_eq!(tee.peek(&mut buf).unwrap(), 0, "ended");
        drop(editor_w);
        let mut got = Vec::new();
        editor_r.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"one\ntwo\n");
    }

    #[test]
    fn only_a_pipe_is_looked_at() {
        let file = tempfile::tempfile().unwrap();
        assert!(!is_pipe(file.as_fd()));
        assert!(Tee::new(file.as_fd()).is_none());
    }
}
