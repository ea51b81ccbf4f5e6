//! Reading each side's stream: large reads handed on as runs of complete lines, and the bound
//! on a line's length. A line longer than the bound (no newline within `max_line` bytes) is
//! handed on in pieces of at most one read buffer as they arrive, so a peer that never writes
//! a newline costs at most `max_line` bytes of memory, never more.

use std::io::{ErrorKind, Read};

/// The default bound on one line: far above any real ACP message (a prompt with an embedded
/// image, a diff of a large file), far below what would hurt a machine.
pub const MAX_LINE_DEFAULT: usize = 64 << 20;

/// What a pump does with what it reads.
pub trait Sink {
    /// A run of complete lines (each ends with `\n`); `more`: bytes of the next one are
    /// already read. False stops the pump.
    fn lines(&mut self, lines: &[u8], more: bool) -> bool;
    /// A piece of a line over the bound: `first` starts it, `last` ends it (with its `\n`, or
    /// at the end of the stream). False stops the pump.
    fn long(&mut self, piece: &[u8], first: bool, last: bool) -> bool;
    /// The stream's last bytes, without a newline.
    fn tail(&mut self, rest: &[u8]);
}

/// Reads `from` to its end (or until the sink says stop) in reads of up to `chunk` bytes. A
/// line longer than a read grows the buffer, up to `max_line`; past that it goes on in pieces.
pub fn pump(mut from: impl Read, chunk: usize, max_line: usize, sink: &mut impl Sink) {
    let max_line = max_line.max(1);
    let mut buf: Vec<u8> = vec![0; chunk.min(max_line)];
    let mut filled = 0;
    // Within a line over the bound, of which pieces have been handed on.
    let mut long = false;
    loop {
        if filled == buf.len() {
            if !long && buf.len() < max_line {
                // One line longer than the buffer so far: room for more of it.
                buf.resize((buf.len() * 2).min(max_line), 0);
            } else {
                // The buffer holds nothing but part of one line, at the bound: hand it on.
                if !sink.long(&buf[..filled], !long, false) {
                    return;
                }
                long = true;
                filled = 0;
                if buf.len() > chunk {
                    buf = vec![0; chunk];
                }
            }
        }
        let n = match from.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let new = filled..filled + n;
        filled += n;
        let mut start = 0;
        if long {
            let Some(i) = memchr::memchr(b'\n', &buf[new.clone()]) else {
                continue;
            };
            let end = new.start + i + 1;
            if !sink.long(&buf[..end], false, true) {
                return;
            }
            long = false;
            start = end;
        }
        // Only the new bytes can hold the last newline.
        let from_at = new.start.max(start);
        if let Some(i) = memchr::memrchr(b'\n', &buf[from_at..filled]) {
            let end = from_at + i + 1;
            if !sink.lines(&buf[start..end], end < filled) {
                return;
            }
            start = end;
        }
        if start > 0 {
            buf.copy_within(start..filled, 0);
            filled -= start;
            if buf.len() > chunk && filled <= chunk {
                // After a long line: back to the usual size.
                buf.truncate(chunk);
                buf.shrink_to_fit();
            }
        }
    }
    if filled > 0 {
        if long {
            sink.long(&buf[..filled], false, true);
        } else {
            sink.tail(&buf[..filled]);
        }
    }
}

/// Asks for a pipe of `size` bytes on `fd` (Linux; best effort, and nothing when `fd` is not
/// a pipe): a peer streaming updates then fills it in fewer, larger writes, and the proxy
/// reads or writes it in fewer, larger calls.
pub fn widen_pipe(fd: &impl std::os::fd::AsRawFd, size: usize) {
    let fd = fd.as_raw_fd();
    // SAFETY: fstat and fcntl on a descriptor we hold; F_SETPIPE_SZ only resizes a pipe's
    // buffer (an error, e.g. over the user's limit, leaves it as it was).
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO {
            libc::fcntl(fd, libc::F_SETPIPE_SZ, size as libc::c_int);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what the pump hands on; reads come in pieces of `step` bytes.
    #[derive(Default)]
    struct Seen {
        lines: Vec<u8>,
        long: Vec<(usize, bool, bool)>,
        long_bytes: Vec<u8>,
        tail: Vec<u8>,
    }
    impl Sink for Seen {
        fn lines(&mut self, lines: &[u8], _more: bool) -> bool {
            assert!(lines.ends_with(b"\n"));
            self.lines.extend_from_slice(lines);
            true
        }
        fn long(&mut self, piece: &[u8], first: bool, last: bool) -> bool {
            self.long.push((piece.len(), first, last));
            self.long_bytes.extend_from_slice(piece);
            true
        }
        fn tail(&mut self, rest: &[u8]) {
            self.tail.extend_from_slice(rest);
        }
    }

    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_pass_whole_whatever_the_reads() {
        let text = b"{\"a\":1}\n{\"b\":[2,3]}\n\n{\"c\":\"a long one, longer than a read\"}\nend";
        for step in [1, 3, 7, 64, 4096] {
            let mut seen = Seen::default();
            pump(Trickle(text, step), 16, 1 << 20, &mut seen);
            assert_eq!(seen.lines, &text[..text.len() - 3], "step {step}");
            assert_eq!(seen.tail, b"end");
            assert!(seen.long.is_empty());
        }
    }

    #[test]
    fn a_line_over_the_bound_goes_on_in_pieces_of_a_read_buffer() {
        let mut text = b"{\"short\":1}\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 1000));
        text.extend_from_slice(b"\n{\"after\":2}\n");
        for step in [1, 5, 64, 4096] {
            let mut seen = Seen::default();
            pump(Trickle(&text, step), 16, 64, &mut seen);
            assert_eq!(seen.lines, b"{\"short\":1}\n{\"after\":2}\n", "step {step}");
            let mut long = vec![b'x'; 1000];
            long.push(b'\n');
            assert_eq!(seen.long_bytes, long);
            assert!(
                seen.long[0].1 && !seen.long[0].2,
                "the first piece starts it"
            );
            assert!(seen.long.last().unwrap().2, "the last piece ends it");
            assert!(seen.long[0].0 <= 64 && seen.long[1..].iter().all(|p| p.0 <= 16));
            assert_eq!(seen.long.iter().filter(|p| p.1).count(), 1);
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_long_line_ends_it() {
        let text = vec![b'y'; 200];
        let mut seen = Seen::default();
        pump(Trickle(&text, 50), 16, 32, &mut seen);
        assert_eq!(seen.long_bytes, text);
        assert!(seen.long.last().unwrap().2);
        assert!(seen.tail.is_empty() && seen.lines.is_empty());
    }
}
