//! The MCP server's stdio, between the client and rmcp: lines that are not JSON are answered
//! here with JSON-RPC's parse error (-32700, `id` null) instead of reaching rmcp, which drops
//! them without a word (a client that typed or generated a broken line would wait forever for
//! an answer). Everything else passes through unchanged, and one task writes stdout, so an
//! error line never lands inside one of rmcp's messages.

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// Lines longer than this are passed to rmcp unchecked, which refuses them by its own limit
/// (so a huge line is never held here in full).
const CHECKED_LINE_BYTES: usize = 16 * 1024 * 1024;

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
            // Too long to check: rmcp sees it (and the rest of the line) and refuses it.
            if to_rmcp.write_all(&line).await.is_err() {
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
