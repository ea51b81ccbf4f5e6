//! `askbus acp -- AGENT [ARGS…]`: a transparent Agent Client Protocol proxy. The editor runs
//! it in place of the agent; it runs the agent, forwards every line both ways unchanged (same
//! bytes, same ids, same order), and also asks every permission request and elicitation of
//! the agent through askbusd, where any askbus UI may answer: the first answer wins, in the
//! editor or in askbus.
//!
//! `wire` owns the JSON-RPC lines, `permission` and `elicit` the mapping of the two requests
//! onto askbus, `relay` the routing and the race, `out` each side's buffered writer; this file owns the command line and the
//! agent process: its start, signals passed on, and its exit status passed back.

mod elicit;
mod out;
mod permission;
mod relay;
mod wire;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::Value;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use askbus::protocol::NoUiPolicy;

pub use out::Out;
pub use relay::{Options, Relay};

#[derive(Debug, Args)]
pub struct AcpArgs {
    /// Where the agent's permission requests and elicitations are decided: in the editor and
    /// in askbus, first answer wins (both); only in askbus, the editor never sees them
    /// (askbus); only in the editor, askbus is not asked (editor)
    #[arg(long, value_name = "WHERE", default_value = "both")]
    gate: Gate,
    /// With no askbusd to ask (or no UI, with --no-ui reject): the editor decides as if
    /// askbus were not there (editor), or the request is denied (deny)
    #[arg(long, value_name = "WHAT", default_value = "editor")]
    fallback: Fallback,
    /// How long askbus waits for an answer; then the request is denied, in the editor too
    /// [default: the daemon's]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    /// When no askbus UI is connected: wait for one, or give up at once (then --fallback
    /// decides) [default: the daemon's]
    #[arg(long, value_name = "POLICY", value_parser = ["wait", "reject"])]
    no_ui: Option<String>,
    /// Name announced to the UIs as the producer
    #[arg(long, value_name = "NAME", default_value = concat!("askbus-acp/", env!("CARGO_PKG_VERSION")))]
    client: String,
    /// The agent's command, then its arguments (after `--`)
    #[arg(
        value_name = "AGENT",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Gate {
    /// The editor and askbus both ask; the first answer wins
    Both,
    /// Only askbus asks: the editor never sees a permission request or elicitation
    Askbus,
    /// Only the editor asks: askbus is not involved
    Editor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// The editor decides, as if askbus were not there
    Editor,
    /// Deny (reject the tool call, cancel the elicitation)
    Deny,
}

/// How askbus ended an intercepted request.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// A person decided: the result for the agent.
    Decided(Value),
    /// Nobody will (a timeout): denied, in the editor too.
    Ended,
    /// askbus cannot decide (no daemon, no UI, a refusal): `--fallback` decides.
    Unavailable(String),
    /// The proxy withdrew it itself.
    Withdrawn,
}

/// What the pumps and the agent's process tell the main task.
#[derive(Debug)]
pub enum Event {
    /// The editor closed the proxy's stdin.
    EditorEof,
    /// Writing to the editor failed: it is gone.
    EditorGone,
    /// The agent exited.
    Exited(std::process::ExitStatus),
}

/// How long an agent has to exit by itself once the editor closed its stdin, and then once
/// sent SIGTERM, before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Runs the proxy to the agent's end; its exit status is the agent's.
pub fn main(args: AcpArgs, socket: PathBuf) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("askbus acp: cannot start: {e}");
            return ExitCode::from(crate::fail::exit::FAILURE);
        }
    };
    let (program, rest) = args.command.split_first().expect("clap requires AGENT");
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("askbus acp: cannot run {program}: {e}");
            // As a shell says it: 127 not found, 126 not runnable.
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return ExitCode::from(code);
        }
    };
    let pid = child.id() as libc::pid_t;
    let agent_in = child.stdin.take().expect("piped");
    let agent_out = child.stdout.take().expect("piped");
    let (Ok(stdin), Ok(stdout)) = (
        std::io::stdin().as_fd().try_clone_to_owned(),
        std::io::stdout().as_fd().try_clone_to_owned(),
    ) else {
        eprintln!("askbus acp: cannot use stdin and stdout");
        return ExitCode::from(crate::fail::exit::FAILURE);
    };
    let agent_command = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.clone());
    let opts = Options {
        socket,
        gate: args.gate,
        fallback: args.fallback,
        timeout_ms: args.timeout_ms,
        no_ui: args.no_ui.as_deref().and_then(NoUiPolicy::parse),
        client: args.client,
        agent_command,
    };
    let (events, mut rx) = mpsc::unbounded_channel();
    let relay = Arc::new(Relay::new(
        opts,
        rt.handle().clone(),
        Out::new(Box::new(agent_in)),
        Out::new(Box::new(std::fs::File::from(stdout))),
        events.clone(),
    ));

    // The agent → editor pump: ends at the agent's EOF.
    let r = relay.clone();
    let from_agent = std::thread::spawn(move || {
        widen_pipe(&agent_out);
        pump_agent(agent_out, &r);
        r.to_editor.flush();
    });
    // The editor → agent pump: at the editor's EOF the agent's stdin is closed.
    let r = relay.clone();
    let tx = events.clone();
    std::thread::spawn(move || {
        pump(std::fs::File::from(stdin), |line, more| {
            r.from_editor(line, more)
        });
        r.to_agent.close();
        let _ = tx.send(Event::EditorEof);
    });
    let tx = events.clone();
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            let _ = tx.send(Event::Exited(status));
        }
    });

    let status = rt.block_on(async move {
        let mut signals = Vec::new();
        for kind in [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::quit(),
        ] {
            match signal(kind) {
                Ok(s) => signals.push((kind, s)),
                Err(e) => eprintln!("askbus acp: cannot handle a signal: {e}"),
            }
        }
        let (sig_tx, mut sig_rx) = mpsc::unbounded_channel();
        for (kind, mut s) in signals {
            let tx = sig_tx.clone();
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    let _ = tx.send(kind.as_raw_value());
                }
            });
        }
        // Once the editor is gone (or closed our stdin), the agent gets GRACE to exit by
        // itself, then SIGTERM, then after GRACE again SIGKILL.
        let mut ending: Option<tokio::time::Instant> = None;
        let mut termed = false;
        loop {
            let wake = ending.map(|at| tokio::time::sleep_until(at));
            tokio::select! {
                Some(sig) = sig_rx.recv() => kill(pid, sig),
                Some(ev) = rx.recv() => match ev {
                    Event::Exited(status) => return status,
                    Event::EditorEof | Event::EditorGone => {
                        ending.get_or_insert_with(|| tokio::time::Instant::now() + GRACE);
                    }
                },
                _ = async { wake.expect("guarded").await }, if wake.is_some() => {
                    if termed {
                        kill(pid, libc::SIGKILL);
                        ending = None;
                    } else {
                        kill(pid, libc::SIGTERM);
                        termed = true;
                        ending = Some(tokio::time::Instant::now() + GRACE);
                    }
                }
            }
        }
    });

    // What the agent wrote before it died still reaches the editor, unless something it left
    // behind holds its stdout open.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = from_agent.join();
        let _ = done_tx.send(());
    });
    let _ = done_rx.recv_timeout(Duration::from_secs(2));
    rt.block_on(relay.withdraw_all());
    relay.to_editor.flush();
    exit_like(status)
}

/// Reads `from` line by line (a line keeps its `\n`; the last may lack one), calling `each`
/// with whether another line is already buffered.
fn pump(from: impl Read, mut each: impl FnMut(&[u8], bool)) {
    let mut reader = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let more = !reader.buffer().is_empty();
                each(&line, more);
            }
        }
    }
}

/// How much of the agent's output is read at once: its stream passes through in runs of
/// complete lines this big, one read, one substring scan and one write each.
const AGENT_CHUNK: usize = 1 << 20;

/// Reads the agent's stdout in large chunks. While the relay has nothing to look for, the
/// complete lines of a chunk are scanned once for the few methods that matter and, when none
/// is there (the stream of `session/update`s), written to the editor in one piece, as read:
/// no line is split out, copied or parsed. A chunk that may hold one goes line by line
/// through [`Relay::from_agent_line`], as does everything while the relay waits for an answer it
/// reads (`initialize`, `session/new`). A line longer than the buffer grows it.
fn pump_agent(mut from: impl Read, relay: &Arc<Relay>) {
    let mut buf: Vec<u8> = vec![0; AGENT_CHUNK];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            // One line longer than the buffer so far: room for more of it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match from.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Only the new bytes can hold the last newline.
        let Some(end) = memchr::memrchr(b'\n', &buf[filled..filled + n]).map(|i| filled + i + 1)
        else {
            filled += n;
            continue;
        };
        let lines = &buf[..end];
        if relay.passes_through(lines) {
            relay.to_editor_run(lines);
        } else {
            let mut rest = lines;
            while let Some(i) = memchr::memchr(b'\n', rest) {
                let (line, tail) = rest.split_at(i + 1);
                relay.from_agent_line(line, !tail.is_empty());
                rest = tail;
            }
        }
        buf.copy_within(end..filled + n, 0);
        filled = filled + n - end;
    }
    if filled > 0 {
        // The agent's last words, without a newline.
        relay.from_agent_line(&buf[..filled], false);
    }
}

/// Asks for a 1 MiB pipe from the agent (Linux; best effort): an agent streaming updates
/// then fills it in fewer, larger writes, and the proxy reads it in fewer, larger reads.
fn widen_pipe(fd: &impl std::os::fd::AsRawFd) {
    // SAFETY: fcntl on a descriptor we own; F_SETPIPE_SZ only resizes the pipe's buffer (an
    // error, e.g. over the user's limit, leaves it as it was).
    unsafe {
        libc::fcntl(
            fd.as_raw_fd(),
            libc::F_SETPIPE_SZ,
            AGENT_CHUNK as libc::c_int,
        );
    }
}

fn kill(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory preconditions; the pid is our child's, not yet reaped
    // (the relay stops signalling once it has exited).
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Exits as the agent did: its status, or killed by the same signal.
fn exit_like(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    if let Some(sig) = status.signal() {
        // SAFETY: resetting a signal to its default disposition and raising it on this
        // process; nothing runs after that but the default action (death by `sig`).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return ExitCode::from(128u8.wrapping_add(sig as u8));
    }
    ExitCode::from(crate::fail::exit::FAILURE)
}
