//! `askbus mcp`: a Model Context Protocol server on stdio exposing Gemini CLI's `ask_user`
//! tool (as `ask_person` by default, see `tool`), so any MCP agent (Claude Code, Codex, Cursor, Gemini CLI…) asks its questions through
//! askbusd and they reach the same UIs as every other producer's.
//!
//! `tool` owns the tool's definition, `call` one call's exchange with the daemon, `server`
//! the MCP side (rmcp) and how each outcome becomes a tool result, `stdio` the lines between
//! the client and rmcp (answering those that are not JSON).

mod call;
mod server;
mod stdio;
mod tool;

use std::io::IsTerminal;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use askbus::protocol::NoUiPolicy;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// How long each question waits for an answer [default: the daemon's]; the daemon clamps
    /// it to its maximum. Set the MCP client's own tool timeout at least this long.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    /// When no UI is connected: wait for one, or answer at once with the no-ui result
    /// [default: the daemon's]
    #[arg(long, value_name = "POLICY", value_parser = crate::no_ui_arg())]
    no_ui: Option<NoUiPolicy>,
    /// Also return the outcome as structuredContent: {answers, cancelled, reason,
    /// returnDisplay}. Off by default because some clients (Codex) then hand the model that
    /// JSON instead of the reference's text.
    #[arg(long)]
    structured_content: bool,
    /// While a question waits, send a progress notification this often, to calls that ask for
    /// progress (a progressToken); 0 sends none
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    progress_interval_ms: u64,
    /// The tool's name. Not `ask_user` by default: Gemini CLI drops an MCP tool of that name
    /// in headless and ACP modes (with its own ask_user)
    #[arg(long, value_name = "NAME", default_value = tool::DEFAULT_NAME, value_parser = tool::check_name)]
    tool_name: String,
}

/// What `askbus mcp` says when started on a terminal instead of by an MCP client.
fn terminal_note(socket: &Path, tool: &str) -> String {
    format!(
        "askbus mcp: an MCP server on stdin/stdout offering the {tool} tool (Gemini CLI's \
         ask_user); its questions go \
         through askbusd at {} to every askbus UI. It is meant to be started by an MCP client, \
         not run by hand. To add it:\n  \
         Claude Code:  claude mcp add --scope user askbus -- askbus mcp\n  \
         Codex:        codex mcp add askbus -- askbus mcp\n  \
         Gemini CLI:   in settings.json, \"mcpServers\": {{\"askbus\": {{\"command\": \"askbus\", \"args\": [\"mcp\"], \"timeout\": 900000}}}}\n\
         See `askbus mcp --help` and the README. Waiting for JSON-RPC on stdin (Ctrl-D ends).",
        socket.display()
    )
}

/// Serves MCP on stdin/stdout until the client closes stdin.
pub async fn run(socket: &Path, args: McpArgs) -> Result<ExitCode> {
    // stdout carries the protocol, so logs go to stderr, where MCP clients collect them.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_env("ASKBUS_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .init();
    let policy = call::Policy {
        timeout_ms: args.timeout_ms,
        no_ui: args.no_ui,
    };
    let progress_every =
        (args.progress_interval_ms > 0).then(|| Duration::from_millis(args.progress_interval_ms));
    let client_gone = CancellationToken::new();
    let server = server::AskUserServer::new(
        socket.to_owned(),
        policy,
        args.structured_content,
        progress_every,
        client_gone.clone(),
        &args.tool_name,
    );
    tracing::info!(socket = %socket.display(), tool = %args.tool_name, "serving ask_user over MCP on stdio");
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        // A person ran it by hand: say what it is, then keep serving (typing JSON-RPC works).
        eprintln!("{}", terminal_note(socket, &args.tool_name));
    }
    let (stdin, stdout) = rmcp::transport::stdio();
    let stdin = NoticeEof {
        inner: stdin,
        eof: client_gone,
    };
    let (stdin, stdout) = stdio::filtered(stdin, stdout);
    let service = server
        .serve((stdin, stdout))
        .await
        .context("the MCP client's handshake failed")?;
    let quit = service.waiting().await.context("the MCP server failed")?;
    tracing::info!(?quit, "MCP client gone");
    Ok(ExitCode::SUCCESS)
}

/// The client's end of stdin, passed through; cancels `eof` when it reads end of file.
struct NoticeEof<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for NoticeEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        // A read that had room and filled nothing is end of file.
        if matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            self.eof.cancel();
        }
        polled
    }
}
