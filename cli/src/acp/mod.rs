//! `askbus acp -- AGENT [ARGS…]`: a transparent Agent Client Protocol proxy. The editor runs
//! it in place of the agent; it runs the agent, forwards every line both ways unchanged (same
//! bytes, same ids, same order), and also asks every permission request and elicitation of
//! the agent through askbusd, where any askbus UI may answer: the first answer wins, in the
//! editor or in askbus.
//!
//! `wire` owns the JSON-RPC lines, `permission` and `elicit` the mapping of the two requests
//! onto askbus, `relay` the routing and the race, `pump` reading each side and the bound on a
//! line, `splice` the agent's stream moved to the editor without a copy (Linux pipes), `out`
//! each side's writer; this file owns the command line and the
//! agent process: its start, signals passed on, and its exit status passed back.

mod elicit;
mod out;
mod permission;
mod pump;
mod relay;
mod splice;
mod wire;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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
    /// The longest line read whole, in bytes; a longer one (from either side) is passed on
    /// unread in pieces, so memory stays bounded [default: 64 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_line_bytes: Option<u64>,
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
    /// The proxy cannot go on as it promised (it said why): the agent is ended, and the
    /// proxy exits with a failure of its own.
    Failed,
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
    let agent_out = std::fs::File::from(OwnedFd::from(child.stdout.take().expect("piped")));
    let (Ok(stdin), Ok(stdout), Ok(stdout_fd)) = (
        std::io::stdin().as_fd().try_clone_to_owned(),
        std::io::stdout().as_fd().try_clone_to_owned(),
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
        max_line: args
            .max_line_bytes
            .map_or(pump::MAX_LINE_DEFAULT, |n| n as usize),
    };
    let (events, mut rx) = mpsc::unbounded_channel();
    let relay = Arc::new(Relay::new(
        opts,
        rt.handle().clone(),
        Out::new(Box::new(agent_in)),
        Out::file(std::fs::File::from(stdout)),
        events.clone(),
    ));

    // The agent → editor pump: ends at the agent's EOF. Both pipes of that way are widened
    // (when they are pipes) so that a stream crosses them in few, large calls; when the
    // editor's end is a pipe too, runs of lines are spliced to it (see `splice`).
    let r = relay.clone();
    let max_line = r.max_line();
    splice::widen_pipe(stdout_fd.as_fd(), PIPE);
    let from_agent = std::thread::spawn(move || {
        splice::widen_pipe(agent_out.as_fd(), PIPE);
        let mut tee = if r.to_editor.can_splice() {
            splice::Tee::new(agent_out.as_fd())
        } else {
            None
        };
        let mut sink = FromAgent {
            relay: &r,
            carry: Vec::new(),
            splice_from: tee.as_ref().map(|_| agent_out.as_fd()),
            looked: false,
        };
        let peek = tee.as_mut().map(|t| t as &mut dyn pump::Peek);
        pump::pump(&agent_out, peek, CHUNK, max_line, &mut sink);
        r.to_editor.flush();
    });
    // The editor → agent pump: at the editor's EOF the agent's stdin is closed.
    let r = relay.clone();
    let tx = events.clone();
    std::thread::spawn(move || {
        pump::pump(
            std::fs::File::from(stdin),
            None,
            CHUNK,
            max_line,
            &mut FromEditor(&r),
        );
        r.to_agent.close();
        let _ = tx.send(Event::EditorEof);
    });
    let tx = events.clone();
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            let _ = tx.send(Event::Exited(status));
        }
    });

    let (status, failed) = rt.block_on(async move {
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
        let mut failed = false;
        loop {
            let wake = ending.map(|at| tokio::time::sleep_until(at));
            tokio::select! {
                Some(sig) = sig_rx.recv() => kill(pid, sig),
                Some(ev) = rx.recv() => match ev {
                    Event::Exited(status) => return (status, failed),
                    Event::Failed => {
                        failed = true;
                        if !termed {
                            kill(pid, libc::SIGTERM);
                            termed = true;
                            ending = Some(tokio::time::Instant::now() + GRACE);
                        }
                    }
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
    if failed {
        return ExitCode::from(crate::fail::exit::FAILURE);
    }
    exit_like(status)
}

/// How much of a side's stream is read (or looked at) at once: the agent's stream passes
/// through in runs of complete lines this big, one scan and one write (or splice) each.
const CHUNK: usize = 256 * 1024;

/// The size asked for the pipes of the agent → editor way (the default limit for a user).
const PIPE: usize = 1024 * 1024;

/// The agent's stdout. While the relay has nothing to look for, the complete lines of a read
/// are scanned once for the few methods that matter and, when none is there (the stream of
/// `session/update`s), written to the editor in one piece, as read: no line is split out,
/// copied or parsed. Into a pipe, such a run is not even read: it is looked at (`tee`), and
/// moved on by the kernel (`splice`). A run that may hold one goes line by line through
/// [`Relay::from_agent_line`], as does everything while the relay waits for an answer it
/// reads (`initialize`, `session/new`).
struct FromAgent<'a> {
    relay: &'a Arc<Relay>,
    /// The end of the last piece of a long line, to catch a needle cut in two.
    carry: Vec<u8>,
    /// The agent's pipe, when runs are spliced from it to the editor.
    splice_from: Option<BorrowedFd<'a>>,
    /// The run handed to `lines` was scanned already, and needs its look line by line.
    looked: bool,
}

impl pump::Sink for FromAgent<'_> {
    fn lines(&mut self, lines: &[u8], more: bool) -> bool {
        let looked = std::mem::take(&mut self.looked);
        if !looked && self.relay.passes_through(lines) {
            self.relay.to_editor_run(lines);
        } else {
            let mut rest = lines;
            while let Some(i) = memchr::memchr(b'\n', rest) {
                let (line, tail) = rest.split_at(i + 1);
                self.relay.from_agent_line(line, more || !tail.is_empty());
                rest = tail;
            }
        }
        true
    }

    fn peeked(&mut self, run: &[u8], held: usize, _more: bool) -> bool {
        let Some(from) = self.splice_from else {
            return false;
        };
        if !self.relay.passes_through(run) {
            self.looked = true;
            return false;
        }
        self.relay
            .to_editor_spliced(&run[..held], from, run.len() - held);
        true
    }

    fn long(&mut self, piece: &[u8], first: bool, last: bool) -> bool {
        if first {
            self.carry.clear();
        }
        let head = &piece[..piece.len().min(32)];
        self.carry.extend_from_slice(head);
        let may_matter = wire::agent_line_may_matter(piece, true)
            || wire::agent_line_may_matter(&self.carry, true);
        self.carry.clear();
        self.carry
            .extend_from_slice(&piece[piece.len().saturating_sub(32)..]);
        self.relay.agent_long(piece, first, last, may_matter)
    }

    fn tail(&mut self, rest: &[u8]) {
        // The agent's last words, without a newline.
        self.relay.from_agent_line(rest, false);
    }
}

/// The editor's stdin, line by line through [`Relay::from_editor`].
struct FromEditor<'a>(&'a Arc<Relay>);

impl pump::Sink for FromEditor<'_> {
    fn lines(&mut self, lines: &[u8], more: bool) -> bool {
        let mut rest = lines;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            let (line, tail) = rest.split_at(i + 1);
            self.0.from_editor(line, more || !tail.is_empty());
            rest = tail;
        }
        true
    }

    fn long(&mut self, piece: &[u8], first: bool, last: bool) -> bool {
        self.0.editor_long(piece, first, last);
        true
    }

    fn tail(&mut self, rest: &[u8]) {
        self.0.from_editor(rest, false);
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
