//! Reading each side's stream: large reads handed on as runs of complete lines, and the bound
//! on a line's length. A line longer than the bound (no newline within `max_line` bytes) is
//! handed on in pieces of at most one read buffer as they arrive, so a peer that never writes
//! a newline costs at most `max_line` bytes of memory, never more. A source that can be looked
//! at before it is read (a pipe, through `splice::Tee`) offers its complete lines to the sink
//! first, which may move them on itself without the pump reading them.

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
    /// A run of complete lines looked at before it is read: `run[..held]` is the start of its
    /// first line, already read (not yet handed on), `run[held..]` is still queued in the
    /// source; `more`: bytes of the next line are queued too. True: the sink handed the run
    /// on and took `run[held..]` from the source itself. False: the pump reads it and hands
    /// the run to [`Sink::lines`].
    fn peeked(&mut self, _run: &[u8], _held: usize, _more: bool) -> bool {
        false
    }
}

/// A source whose queued bytes can be looked at before they are read.
pub trait Peek {
    /// Copies what is queued next (up to `buf.len()` bytes) into `buf`, leaving it queued;
    /// waits when nothing is. `Ok(0)`: the stream has ended.
    fn peek(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
}

/// Reads `from` to its end (or until the sink says stop) in reads of up to `chunk` bytes. A
/// line longer than a read grows the buffer, up to `max_line`; past that it goes on in pieces.
/// With `peek`, complete lines are offered to [`Sink::peeked`] before they are read (not
/// inside a line over the bound, and no more once a look fails).
pub fn pump(
    mut from: impl Read,
    mut peek: Option<&mut dyn Peek>,
    chunk: usize,
    max_line: usize,
    sink: &mut impl Sink,
) {
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
        if let (false, Some(p)) = (long, peek.as_mut()) {
            // buf[..filled] is the start of a line (no newline): what is queued follows it.
            let n = match p.peek(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Read as any stream from here on.
                    peek = None;
                    continue;
                }
            };
            // Up to the last newline; with none, part of a line only: read as it would be.
            let newline = memchr::memrchr(b'\n', &buf[filled..filled + n]);
            let end = newline.map_or(filled + n, |i| filled + i + 1);
            let lines = newline.is_some();
            let more = end < filled + n;
            let taken = lines && sink.peeked(&buf[..end], filled, more);
            if !taken {
                // The bytes read are the ones looked at (nobody else reads this source).
                if from.read_exact(&mut buf[filled..end]).is_err() {
                    break;
                }
                if lines && !sink.lines(&buf[..end], more) {
                    return;
                }
            }
            filled = if lines { 0 } else { end };
            if filled == 0 && buf.len() > chunk {
                // After a long line: back to the usual size.
                buf.truncate(chunk);
                buf.shrink_to_fit();
            }
            continue;
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
            pump(Trickle(text, step), None, 16, 1 << 20, &mut seen);
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
            pump(Trickle(&text, step), None, 16, 64, &mut seen);
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
        pump(Trickle(&text, 50), None, 16, 32, &mut seen);
        assert_eq!(seen.long_bytes, text);
        assert!(seen.long.last().unwrap().2);
        assert!(seen.tail.is_empty() && seen.lines.is_empty());
    }

    /// A stream arriving `step` bytes at a time that can be looked at before it is read, as a
    /// pipe through `splice::Tee`: the reader and the looker share it.
    struct Queued {
        data: Vec<u8>,
        taken: usize,
        arrived: usize,
        step: usize,
    }
    impl Queued {
        fn arrive(&mut self) {
            self.arrived = (self.arrived + self.step).min(self.data.len());
        }
    }
    type Shared = std::rc::Rc<std::cell::RefCell<Queued>>;
    struct Reader(Shared);
    impl Read for Reader {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let mut q = self.0.borrow_mut();
            if q.taken == q.arrived {
                q.arrive();
            }
            let n = (q.arrived - q.taken).min(out.len());
            out[..n].copy_from_slice(&q.data[q.taken..q.taken + n]);
            q.taken += n;
            Ok(n)
        }
    }
    impl Peek for Reader {
        fn peek(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let mut q = self.0.borrow_mut();
            q.arrive();
            let n = (q.arrived - q.taken).min(out.len());
            out[..n].copy_from_slice(&q.data[q.taken..q.taken + n]);
            Ok(n)
        }
    }

    /// Takes the runs it is offered unless they hold `look`, taking them from the source
    /// itself as a splice would; records everything in order.
    struct Mover {
        q: Shared,
        out: Vec<u8>,
        moved: usize,
        read: usize,
    }
    impl Sink for Mover {
        fn lines(&mut self, lines: &[u8], _more: bool) -> bool {
            assert!(lines.ends_with(b"\n"));
            self.out.extend_from_slice(lines);
            self.read += 1;
            true
        }
        fn long(&mut self, piece: &[u8], _first: bool, _last: bool) -> bool {
            self.out.extend_from_slice(piece);
            true
        }
        fn tail(&mut self, rest: &[u8]) {
            self.out.extend_from_slice(rest);
        }
        fn peeked(&mut self, run: &[u8], held: usize, _more: bool) -> bool {
            assert!(run.ends_with(b"\n"));
            assert!(
                !run[..held].contains(&b'\n'),
                "held is the start of one line"
            );
            if memchr::memmem::find(run, b"look").is_some() {
                return false;
            }
            let mut q = self.q.borrow_mut();
            let queued = &q.data[q.taken..q.taken + run.len() - held];
            assert_eq!(queued, &run[held..], "what was looked at is what is queued");
            self.out.extend_from_slice(&run[..held]);
            self.out.extend_from_slice(queued);
            q.taken += run.len() - held;
            self.moved += 1;
            true
        }
    }

    #[test]
    fn looked_at_lines_are_moved_on_or_read_and_every_byte_arrives_once_in_order() {
        let mut text = Vec::new();
        for i in 0..200 {
            let body = if i % 37 == 5 {
                "look".to_string()
            } else {
                "x".repeat(i * 7 % 90)
            };
            text.extend_from_slice(format!("{{\"n\":{i},\"t\":\"{body}\"}}\n").as_bytes());
            if i == 120 {
                // Longer than the bound: goes on in pieces, read.
                text.extend(std::iter::repeat_n(b'z', 700));
                text.push(b'\n');
            }
        }
        text.extend_from_slice(b"{\"last\":1}");
        for step in [1, 5, 64, 333, 4096] {
            let q: Shared = std::rc::Rc::new(std::cell::RefCell::new(Queued {
                data: text.clone(),
                taken: 0,
                arrived: 0,
                step,
            }));
            let mut sink = Mover {
                q: q.clone(),
                out: Vec::new(),
                moved: 0,
                read: 0,
            };
            let mut peek = Reader(q.clone());
            pump(Reader(q.clone()), Some(&mut peek), 64, 256, &mut sink);
            assert_eq!(sink.out, text, "step {step}");
            assert!(
                sink.moved > 0 && sink.read > 0,
                "step {step}: both ways were taken"
            );
        }
    }
}
