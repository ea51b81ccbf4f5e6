//! `askbus acp`'s forwarding path, whatever the editor's end is: a pipe (the agent's runs of
//! lines are moved with tee(2) and splice(2), not copied), a regular file or a socket (read and
//! written as before). The agent is `cat` of a made-up stream of 20 MiB: every byte of it
//! reaches the editor in order, lines of every length (cut anywhere by the pipe, one longer
//! than a read), except, with `--gate askbus`, the permission request in the middle of it,
//! which the editor never sees (no daemon: `--fallback deny` denies it).

use crate::harness as common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

/// What the agent writes, and what the editor must receive of it.
fn stream() -> (Vec<u8>, Vec<u8>) {
    let mut written = Vec::new();
    let mut seen = Vec::new();
    // A small deterministic generator: the lengths vary, no two runs differ.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut i = 0u64;
    while written.len() < 20 << 20 {
        let len = match i % 997 {
            500 => 300 * 1024,
            _ => (next() % 6000) as usize,
        };
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{i} {}"}}}}}}}}"#,
            "y".repeat(len)
        );
        written.extend_from_slice(line.as_bytes());
        written.push(b'\n');
        seen.extend_from_slice(line.as_bytes());
        seen.push(b'\n');
        if i == 3000 {
            // A request the proxy takes out of the stream (--gate askbus).
            written.extend_from_slice(
                br#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1","title":"rm -rf build","kind":"execute"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}"#,
            );
            written.push(b'\n');
            // A line with an escape: looked at, passed on as it is.
            let escaped = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"caf\u00e9"}}}}"#;
            written.extend_from_slice(escaped);
            written.push(b'\n');
            seen.extend_from_slice(escaped);
            seen.push(b'\n');
        }
        i += 1;
    }
    (written, seen)
}

/// `askbus acp --gate askbus` of `cat FILE`, its stdout given as `out`; the editor's stdin
/// stays open until the agent is done.
fn proxy(dir: &std::path::Path, file: &std::path::Path, out: Stdio) -> std::process::Child {
    Command::new(common::cli_bin())
        .args(["acp", "--gate", "askbus", "--fallback", "deny", "--socket"])
        .arg(dir.join("none.sock"))
        .args(["--", "cat"])
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("askbus acp starts")
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (written, seen) = stream();
    let file = dir.path().join("agent.jsonl");
    std::fs::write(&file, &written).expect("the agent's stream is written");
    (dir, file, seen)
}

#[test]
fn through_a_pipe_every_byte_arrives_and_the_request_does_not() {
    let (dir, file, seen) = setup();
    let mut child = proxy(dir.path(), &file, Stdio::piped());
    let mut got = Vec::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_end(&mut got)
        .expect("the editor reads");
    drop(child.stdin.take());
    assert!(child.wait().expect("it exits").success());
    assert_eq!(got.len(), seen.len());
    assert!(got == seen, "the editor's bytes differ from the agent's");
}

#[test]
fn into_a_file_every_byte_arrives_and_the_request_does_not() {
    let (dir, file, seen) = setup();
    let out_path = dir.path().join("editor.jsonl");
    let out = std::fs::File::create(&out_path).expect("the editor's file");
    let mut child = proxy(dir.path(), &file, Stdio::from(out));
    // The agent's end, not the editor's stdin, ends the session.
    let stdin = child.stdin.take();
    assert!(child.wait().expect("it exits").success());
    drop(stdin);
    let got = std::fs::read(&out_path).expect("the editor's file is read");
    assert_eq!(got.len(), seen.len());
    assert!(got == seen, "the editor's bytes differ from the agent's");
}

#[test]
fn into_a_socket_every_byte_arrives_and_the_request_does_not() {
    let (dir, file, seen) = setup();
    let (mut editor, proxy_end) = UnixStream::pair().expect("a socket pair");
    let mut child = proxy(
        dir.path(),
        &file,
        Stdio::from(std::os::fd::OwnedFd::from(proxy_end)),
    );
    let mut got = Vec::new();
    editor.read_to_end(&mut got).expect("the editor reads");
    drop(child.stdin.take());
    assert!(child.wait().expect("it exits").success());
    let _ = editor.flush();
    assert_eq!(got.len(), seen.len());
    assert!(got == seen, "the editor's bytes differ from the agent's");
}
