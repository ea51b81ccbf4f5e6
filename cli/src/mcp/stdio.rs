//! The MCP server's stdio, between the client and rmcp: lines that are not JSON are answered
//! here with JSON-RPC's parse error (-32700, `id` null) instead of reaching rmcp, which drops
//! them without a word (a client that typed or generated a broken line would wait forever for
//! an answer). A line longer than [`CHECKED_LINE_BYTES`] is not passed on either: rmcp would
//! drop it, and the line after it with it, without a reply; it is read through (never held
//! whole) and answered with JSON-RPC's invalid request (-32600) for the id it carries (found
//! while it streams by), so the client hears about it and the next request is served.
//! Everything else passes through unchanged, and one task writes stdout, so an error line
//! never lands inside one of rmcp's messages.

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// The longest line passed on to rmcp; a longer one is refused here, for its id.
pub const CHECKED_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What rmcp reads and writes in place of stdin and stdout; the two tasks that pump them are
/// spawned on the current runtime and end when stdin ends and rmcp drops its ends.
pub fn filtered(
    stdin: impl AsyncRead + Unpin + Send + 'static,
    stdout: impl AsyncWrite + Unpin + Send + 'static,
) -> (DuplexStream, DuplexStream) {
    let (rmcp_in, to_rmcp) = tokio::io::duplex(64 * 1024);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(64 * 1024);
    let (errors_tx, errors_rx) = mpsc::unbounded_channel();
    tokio::spawn(read_stdin(stdin, to_rmcp, errors_tx));
    tokio::spawn(write_stdout(from_rmcp, errors_rx, stdout));
    (rmcp_in, rmcp_out)
}

/// The JSON-RPC response to a line that is not JSON.
pub fn parse_error(detail: &str) -> String {
    let response = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {detail}")},
    });
    let mut line = response.to_string();
    line.push('\n');
    line
}

/// The JSON-RPC response to a request line over [`CHECKED_LINE_BYTES`]: invalid request
/// (-32600) for its id (`null` when it has none that could be read).
pub fn too_large(id: Option<serde_json::Value>, bytes: u64) -> String {
    let response = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32600, "message": format!(
            "Invalid Request: the message is {bytes} bytes, more than askbus mcp accepts ({} MiB); nothing was done",
            CHECKED_LINE_BYTES / (1024 * 1024)
        )},
    });
    let mut line = response.to_string();
    line.push('\n');
    line
}

/// Finds the top-level `"id"` of a JSON-RPC message while its bytes stream by, holding only
/// the id's own text (a request's id may come after its huge params).
#[derive(Default)]
struct IdScanner {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1, whether the next string is a member name.
    at_key: bool,
    /// The member name being read (only its first bytes: "id" is all that matters).
    key: Vec<u8>,
    key_is_id: bool,
    /// The id's value text, while it is read.
    capture: Option<Vec<u8>>,
    found: Option<Vec<u8>>,
}

impl IdScanner {
    /// The longest id text kept: JSON-RPC ids are numbers or short strings.
    const MAX_ID_BYTES: usize = 1024;

    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn keep(&mut self, b: u8) {
        if let Some(c) = &mut self.capture {
            if c.len() < Self::MAX_ID_BYTES {
                c.push(b);
            }
        }
    }

    fn end_value(&mut self) {
        if let Some(c) = self.capture.take() {
            self.found.get_or_insert(c);
        }
        self.key_is_id = false;
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            self.keep(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 1 && self.at_key {
                    self.key_is_id = self.key == b"id";
                }
            } else if self.depth == 1 && self.at_key && self.key.len() < 4 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.at_key {
                    self.key.clear();
                }
                self.keep(b);
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
                if self.depth == 1 {
                    self.at_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                } else {
                    self.keep(b);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.at_key = false;
                if self.key_is_id {
                    self.capture = Some(Vec::new());
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.at_key = true;
            }
            _ => self.keep(b),
        }
    }

    /// The id, if one was read whole and is one JSON-RPC allows (a number or a string).
    fn id(&self) -> Option<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_slice(self.found.as_deref()?).ok()?;
        (v.is_number() || v.is_string()).then_some(v)
    }
}

/// Why `line` (without its newline) is not JSON; `None` when it is, or when it is blank
/// (rmcp skips blank lines, as every MCP SDK does).
fn not_json(line: &[u8]) -> Option<String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(line)
        .err()
        .filter(|e| {
            matches!(
                e.classify(),
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof
            )
        })
        .map(|e| e.to_string())
}

async fn read_stdin(
    stdin: impl AsyncRead + Unpin,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<String>,
) {
    let mut stdin = BufReader::new(stdin);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match AsyncReadExt::take(&mut stdin, CHECKED_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if n == CHECKED_LINE_BYTES && line.last() != Some(&b'\n') {
            // Too long: read through to its end, looking for its id, then refused for it.
            let mut ids = IdScanner::default();
            ids.feed(&line);
            line.clear();
            let mut total = n as u64;
            let ended = loop {
                let chunk = match stdin.fill_buf().await {
                    Ok([]) | Err(_) => break false,
                    Ok(c) => c,
                };
                let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => (&chunk[..i], true),
                    None => (chunk, false),
                };
                ids.feed(part);
                total += part.len() as u64;
                let used = part.len() + usize::from(done);
                stdin.consume(used);
                if done {
                    break true;
                }
            };
            eprintln!(
                "askbus mcp: refused a message of {total} bytes (more than {} MiB)",
                CHECKED_LINE_BYTES / (1024 * 1024)
            );
            if errors.send(too_large(ids.id(), total)).is_err() || !ended {
                break;
            }
            continue;
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if !line.ends_with(b"\n") {
            // The last line, without a newline: rmcp drops an unterminated line at end of
            // input, and so is it dropped here.
            break;
        }
        match not_json(body) {
            Some(why) => {
                tracing::debug!("answering a line that is not JSON with -32700: {why}");
                if errors.send(parse_error(&why)).is_err() {
                    break;
                }
            }
            None => {
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
        }
    }
    // rmcp reads end of input, as it would from stdin.
    let _ = to_rmcp.shutdown().await;
}

async fn write_stdout(
    from_rmcp: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<String>,
    mut stdout: impl AsyncWrite + Unpin,
) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    // One of rmcp's messages, possibly in part: `read_until` keeps what it read when the
    // select drops it, and the next call goes on from there.
    let mut message = Vec::new();
    let mut rmcp_open = true;
    let mut errors_open = true;
    while rmcp_open || errors_open {
        tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut message), if rmcp_open => {
                match read {
                    Ok(0) | Err(_) => rmcp_open = false,
                    Ok(_) => {}
                }
                if !message.is_empty() && (message.ends_with(b"\n") || !rmcp_open) {
                    if stdout.write_all(&message).await.is_err() {
                        return;
                    }
                    message.clear();
                    if stdout.flush().await.is_err() {
                        return;
                    }
                }
            }
            error = errors.recv(), if errors_open => match error {
                Some(line) => {
                    if stdout.write_all(line.as_bytes()).await.is_err()
                        || stdout.flush().await.is_err()
                    {
                        return;
                    }
                }
                None => errors_open = false,
            },
        }
    }
}

#[cfg(test)]
mod id_tests {
    use super::IdScanner;
    use serde_json::json;

    fn id_of(text: &str) -> Option<serde_json::Value> {
        let mut s = IdScanner::default();
        // Byte by byte: the scanner keeps its state across any cut.
        for b in text.as_bytes() {
            s.feed(std::slice::from_ref(b));
        }
        s.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            Some(json!(7))
        );
        assert_eq!(
            id_of(r#"{"method":"x","params":{"id":1,"a":["}",{"id":2}]},"id":"abc\"d"}"#),
            Some(json!("abc\"d"))
        );
        assert_eq!(id_of(r#"{ "id" : 12 , "x":1}"#), Some(json!(12)));
        assert_eq!(id_of(r#"{"method":"x","params":{"id":1}}"#), None);
        assert_eq!(id_of(r#"{"id":{"a":1}}"#), None);
        assert_eq!(id_of(r#"{"idx":1}"#), None);
        // Cut short: no id read whole.
        assert_eq!(id_of(r#"{"params":{"q":"aaaa"#), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_not_json_is_a_parse_error() {
        assert!(not_json(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        // Valid JSON that is no JSON-RPC message is rmcp's to answer (-32600).
        assert!(not_json(b"[1,2]").is_none());
        assert!(not_json(b"42").is_none());
        assert!(not_json(b"").is_none());
        assert!(not_json(b"   \t").is_none());
        assert!(not_json(b"hello").is_some());
        assert!(not_json(br#"{"jsonrpc":"2.0","id":1"#).is_some());
        assert!(not_json(b"{} trailing").is_some());
        assert!(not_json(b"\xff\xfe").is_some());
    }

    #[test]
    fn the_parse_error_is_a_json_rpc_error_with_a_null_id() {
        let line = parse_error("expected value at line 1 column 1");
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v["id"].is_null());
        assert_eq!(v["error"]["code"], -32700);
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Parse error"));
    }
}
