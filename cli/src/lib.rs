//! askbus-cli: the `askbus` command, a client application of the `askbus` crate (it never
//! links the daemon). This file parses the command line and dispatches; each subcommand lives
//! in its own module (`ask`, `pending`, `answer`, `ui`, `watch`, `mcp`, `web`, `notify`,
//! `chat`, `acp`, `hook`, `service`, `doctor`, `policy`, `history`, `bench`, …). The binary
//! `askbus` (the root package) is [`main`].

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{FromArgMatches, Parser, Subcommand};

use askbus::protocol::NoUiPolicy;

use fail::exit;

/// Every command's standard output goes through [`stdout_write`]: these shadow the standard
/// macros for the whole crate (declared before its modules), so no command can panic on a
/// reader that went away.
macro_rules! println {
    () => {
        $crate::stdout_write(::std::format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::stdout_write(::std::format_args!($($arg)*), true)
    };
}

macro_rules! print {
    ($($arg:tt)*) => {
        $crate::stdout_write(::std::format_args!($($arg)*), false)
    };
}

mod acp;
mod always;
mod answer;
mod ask;
mod bench;
mod chat;
mod completions;
mod context;
mod doctor;
mod duration;
mod explain;
mod fail;
mod history;
mod hook;
mod links;
mod mcp;
mod notify;
mod pending;
mod policy;
mod schema;
mod service;
mod stats;
mod term;
mod ui;
mod validate;
mod watch;
mod web;

/// Ask a person a question through askbusd, or answer one.
#[derive(Debug, Parser)]
#[command(name = "askbus", version, about, long_about = None)]
struct Cli {
    /// The daemon's socket [default: $ASKBUS_SOCKET, else $XDG_RUNTIME_DIR/askbus.sock, else
    /// /run/askbus/askbus.sock for root, else /tmp/askbus-<uid>/askbus.sock]. Only a daemon
    /// running as you or root is talked to; name another trusted uid in $ASKBUS_DAEMON_UID
    #[arg(long, global = true, value_name = "PATH", value_parser = clap::value_parser!(PathBuf))]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask the questions in FILE (or stdin) and wait for the answer.
    ///
    /// FILE holds a `questions` array or `{"questions": [...]}` (see docs/asking.md and
    /// examples/). Answered, it prints the answers as the person reads them
    /// (`--json`: the whole response, with what the model is handed in `result.llmContent`).
    /// On a terminal it says on stderr how long it waits and whether a UI is connected.
    #[command(after_help = fail::EXIT_STATUS_HELP)]
    Ask {
        /// Questions file; `-` or nothing reads stdin
        file: Option<PathBuf>,
        /// How long to wait for an answer (the daemon clamps it to its maximum)
        #[arg(long, value_name = "N")]
        timeout_ms: Option<u64>,
        /// When no UI is connected: wait for one, or give up at once
        #[arg(long, value_name = "POLICY", value_parser = crate::no_ui_arg())]
        no_ui: Option<NoUiPolicy>,
        /// Print the whole ask-user-response frame as JSON
        #[arg(long)]
        json: bool,
        /// Name announced to the UIs
        #[arg(long, value_name = "NAME", default_value = concat!("askbus-cli/", env!("CARGO_PKG_VERSION")))]
        client: String,
        #[command(flatten)]
        context: context::ContextArgs,
    },
    /// List the pending questions and approvals and exit.
    Pending {
        /// Print them as a JSON array of ask-user-request and tool-confirmation-request frames
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        filter: context::FilterArgs,
    },
    /// Answer (or dismiss) one pending question or approval, as a UI would.
    ///
    /// Questions are numbered from 0, as `askbus pending` lists them. A choice is answered
    /// with an option's label (or any other text); a multiSelect with its labels joined by
    /// ", " (`--answer '0=SQLite, DuckDB'`, or `--answer 0=SQLite --answer 0=DuckDB`, which
    /// is joined the same way); a yesno with Yes or No. An approval (an agent's tool call) is
    /// allowed once with --allow, always with --allow --always (where the agent offers it),
    /// or denied with --deny and an optional reason the agent is told.
    #[command(
        after_help = "Examples:\n  askbus answer ID --answer 0=PostgreSQL --answer 1=Yes\n  \
        askbus answer ID --answer '0=SQLite, DuckDB'\n  askbus answer ID --dismiss\n  \
        askbus answer ID --allow\n  askbus answer ID --allow --always\n  \
        askbus answer ID --allow --always --any-project\n  \
        askbus answer ID --deny 'Not the build directory: run cargo clean instead.'"
    )]
    Answer {
        /// The request's correlationId (from `askbus pending`)
        id: String,
        /// An answer as INDEX=TEXT (question index from 0); repeat for several questions,
        /// or for several picks of one multiSelect
        #[arg(long = "answer", value_name = "INDEX=TEXT")]
        answers: Vec<String>,
        /// Send an --answer that is none of a choice's (or yes/no's) options as free text
        /// (the "Other" row); without it such an answer is refused, so a typo is not sent
        #[arg(long, requires = "answers")]
        other: bool,
        /// Dismiss the dialog instead of answering (a question or an approval)
        #[arg(long, conflicts_with_all = ["answers", "allow", "deny"])]
        dismiss: bool,
        /// Approve an approval's tool call (once, unless --always)
        #[arg(long, conflicts_with_all = ["answers", "deny"])]
        allow: bool,
        /// With --allow: allow it always: the agent's "Allow always" where the request offers
        /// it, and askbus's own rule in your policy file (what Gemini CLI writes: a shell
        /// command's root command, an MCP server's tool, a file tool), printed before it is
        /// written; later identical calls are then allowed by that rule without a person
        #[arg(long, requires = "allow")]
        always: bool,
        /// With --always: the rule applies in every project (by default only in the request's
        /// project, when it names one)
        #[arg(long, requires = "always")]
        any_project: bool,
        /// Deny an approval's tool call, with an optional reason the agent is told
        #[arg(long, value_name = "REASON", num_args = 0..=1, conflicts_with = "answers")]
        deny: Option<Option<String>>,
    },
    /// Answer questions and decide approvals interactively in this terminal, as they arrive.
    ///
    /// Keeps running (and reconnects when askbusd restarts) until you press q in the list.
    /// An approval shows what the tool call would do (the command, the diff, the MCP call, the
    /// prompt) with Allow once, Allow always (where the agent offers it) and Deny with a reason.
    /// The waiting list is grouped by project; --project/--agent/--session show only the
    /// requests whose context matches.
    Ui(context::FilterArgs),
    /// Serve a page where a browser (or a phone) answers the agents' questions.
    ///
    /// Prints a sign-in link with a one-time code (dead once used, or after --code-ttl); press
    /// Enter where it runs (or send SIGUSR1) for another, SIGHUP signs every session out. The
    /// page needs a session; it has "Sign out" and "Sign out everywhere". Also serves the
    /// signed links of `askbus notify` (/a/TOKEN, /o/TOKEN). Listens on loopback unless
    /// --allow-remote.
    /// From another machine or a phone, use an SSH tunnel (`ssh -L 7870:127.0.0.1:7870 HOST`,
    /// then open the link there) or a reverse proxy with TLS in front (plus --origin).
    Web(web::WebArgs),
    /// Print a live feed of the bus: requests, answers, withdrawals, timeouts (no question text).
    ///
    /// Connects as an observer, which cannot answer. Runs until interrupted, and reconnects
    /// when askbusd restarts.
    Watch {
        /// One bus-event frame per line, as JSON
        #[arg(long)]
        json: bool,
    },
    /// Check a questions file offline with the daemon's own rules.
    ///
    /// FILE holds a `questions` array, `{"questions": [...]}`, or a whole ask-user-request
    /// frame. Prints the normalized questions (exit 0), or the error askbusd would send
    /// (exit 1).
    Validate {
        /// Questions file; `-` or nothing reads stdin
        file: Option<PathBuf>,
        /// Print a rejection as the error frame askbusd would send, on stdout
        #[arg(long)]
        json: bool,
    },
    /// Print the protocol's JSON Schemas (embedded from proto/schema/).
    ///
    /// With no NAME, lists them. NAME is a path under proto/schema/ (`client/ask-user-request`),
    /// a frame type (`bus-event`), the type without `ask-user-` (`withdrawn`), or `request` /
    /// `response` (what a producer sends / gets), `stats`, `telemetry`.
    Schema {
        /// Which schema
        name: Option<String>,
        /// Print every schema, as one JSON object keyed by file path under proto/schema/
        #[arg(long, conflicts_with = "name")]
        all: bool,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write every page with --dir.
    Man {
        /// Write askbus.1 and one askbus-COMMAND.1 per subcommand into DIR (as packages
        /// install them) instead of printing askbus.1
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Run askbusd under systemd: install, uninstall or inspect its socket and service units.
    ///
    /// The units are the shipped ones (systemd/ in the source) with ExecStart at the installed
    /// askbusd. `askbus service install` sets up your own bus (socket
    /// $XDG_RUNTIME_DIR/askbus.sock, every client's default); `--system` one for the machine.
    Service(service::Args),
    /// Serve the ask_user tool to an MCP client (Claude Code, Codex, Gemini CLI…) on stdio.
    ///
    /// Each tool call is asked through askbusd and answered from any askbus UI. The tool has
    /// Gemini CLI's ask_user description and schema, under the name `ask_person` (Gemini CLI
    /// drops MCP tools named ask_user in headless mode); its text result is the reference's
    /// llmContent.
    Mcp(mcp::McpArgs),
    /// Be an agent's permission hook: ask a person through askbusd whether a tool call may run.
    ///
    /// Reads the agent's hook input on stdin and prints the decision in its hook format:
    /// Gemini CLI (BeforeTool), Claude Code (PreToolUse, PermissionRequest; AskUserQuestion is
    /// asked as a question), Codex (PermissionRequest). Fails closed: anything but a person's
    /// approval (askbusd unreachable, timeout, no UI, dismissed, a malformed input) denies, exit
    /// status 2 with the reason on stderr, or with --fallback ask hands the decision back to the
    /// agent's own prompt. Exit status 0: allowed (or handed back).
    Hook(hook::HookArgs),
    /// Run an Agent Client Protocol agent for an editor, asking its permission prompts through
    /// askbus too.
    ///
    /// In the editor's agent settings, `gemini --acp` becomes `askbus acp -- gemini --acp`.
    /// Every line is forwarded both ways unchanged; each `session/request_permission` is also
    /// an askbus approval and each `elicitation/create` an askbus question set, and the first
    /// answer wins, in the editor or in askbus. The agent's stderr passes through, and its
    /// exit status (or the signal that killed it) is this command's.
    Acp(acp::AcpArgs),
    /// Tell the person an agent is waiting: desktop notifications and pushes to a phone.
    ///
    /// A long-running UI: a desktop notification (org.freedesktop.Notifications) per waiting
    /// question or approval, with buttons that answer it in one click (Yes/No, up to three
    /// options, Allow/Deny) and "Open"; pushes to ntfy, a JSON webhook or Slack, whose buttons
    /// are signed single-use links to `askbus web` (--web-url). A request answered elsewhere,
    /// withdrawn or timed out closes its notification. Reconnects when askbusd restarts.
    Notify(notify::NotifyArgs),
    /// Answer from a chat app: Telegram, Slack or Discord, over outbound connections only.
    ///
    /// A long-running UI: every request becomes one message in the chat (agent, project,
    /// title, time left) with buttons for its kind (choices, toggles and Done, Yes/No, Allow
    /// once / Allow always / Deny with a reason, a reply for text); only the allowed users may
    /// answer, every button is bound to what it shows (HMAC), and a request that ends
    /// elsewhere is edited to its outcome.
    Chat(chat::ChatArgs),
    /// The record of every request askbusd accepted, newest first (read from its store).
    ///
    /// A table of 50 by default; --json (JSON Lines) and --csv export every match. `askbus
    /// history ID` shows one request whole; `askbus history verify` checks the records' chain
    /// and names the first record that does not fit (exit 1).
    History(history::Args),
    /// Check the setup and say what to fix: the daemon (and whether it runs as a service),
    /// its socket, the UIs subscribed and the notifier, `askbus web`, each agent's hook, the
    /// config file, the policy rules, the store and the link to NATS.
    ///
    /// One line per check (ok, warn, FAIL), each problem with the command that fixes it;
    /// exit status 1 when any check FAILs.
    Doctor(doctor::Args),
    /// Print the daemon's live counters.
    Stats {
        /// The stats frame as compact JSON on one line, for scripts
        #[arg(long)]
        json: bool,
    },
    /// Measure askbusd: round-trip latency and requests/s, side by side with a baseline relay.
    ///
    /// Runs `askbus-bench` (next to this executable, else on PATH; `cargo build -p
    /// askbus-bench`), passing every argument on: `askbus bench --help` is its help. Starts
    /// askbusd (or the relay) itself unless --socket names a running daemon. `askbus bench
    /// targets` checks every target.
    #[command(disable_help_flag = true)]
    Bench {
        /// The arguments of askbus-bench
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
    /// Policy rules: ask the engine (`test`), list the rules in force, add or remove your own.
    ///
    /// Rules are Gemini CLI's TOML policy language, decided exactly as its policy engine
    /// decides; askbusd checks every approval against them before a person is asked.
    Policy(policy::PolicyArgs),
}

/// Subcommands that never reach the daemon: `--socket` is not offered on them.
const OFFLINE: [&str; 6] = [
    "validate",
    "schema",
    "completions",
    "man",
    "service",
    "policy",
];

/// The command line as clap sees it: `--socket` before the subcommand, or after it on those
/// that reach the daemon (not on the offline ones, where it would do nothing).
/// `--no-ui`'s values, as the protocol words them.
pub(crate) fn no_ui_arg() -> impl clap::builder::TypedValueParser<Value = NoUiPolicy> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let words = [NoUiPolicy::Wait, NoUiPolicy::Reject].map(NoUiPolicy::as_str);
    PossibleValuesParser::new(words).map(|s| NoUiPolicy::parse(&s).expect("a possible value"))
}

fn clap_command() -> clap::Command {
    let cmd = <Cli as clap::CommandFactory>::command();
    let socket = cmd
        .get_arguments()
        .find(|a| a.get_id() == "socket")
        .cloned()
        .expect("Cli has --socket");
    let mut cmd = cmd.mut_arg("socket", |a| a.global(false));
    let online: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .filter(|n| !OFFLINE.contains(&n.as_str()))
        .collect();
    for name in online {
        cmd = cmd.mut_subcommand(name, |s| s.arg(socket.clone()));
    }
    cmd
}

/// Parses the command line; `--socket` may come before or after the subcommand.
fn parse() -> Result<Cli, clap::Error> {
    let m = clap_command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&m)?;
    if let Some((_, sub)) = m.subcommand() {
        if let Ok(Some(path)) = sub.try_get_one::<PathBuf>("socket") {
            cli.socket = Some(path.clone());
        }
    }
    Ok(cli)
}

/// The `askbus` command: parses `std::env::args`, runs the subcommand, and says how it ended.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and --version are not errors; a wrong command line has its own status,
            // apart from every outcome of `askbus ask`.
            return if !e.use_stderr() {
                ExitCode::SUCCESS
            } else if hook::invoked() {
                // An agent runs the tool on any status but 2 (Gemini CLI) or asks as usual
                // (Claude Code, Codex): a hook's wrong command line must block instead.
                eprintln!(
                    "askbus hook: the tool call was not approved (fix the hook's command line)"
                );
                ExitCode::from(exit::HOOK_BLOCK)
            } else {
                ExitCode::from(exit::USAGE)
            };
        }
    };
    // The bench is a binary of its own; to it --socket means "a running daemon", not the
    // default path.
    let command = match cli.command {
        Command::Bench { args } => return bench::exec(cli.socket, args),
        Command::Acp(args) => {
            let socket = cli
                .socket
                .unwrap_or_else(askbus::client::default_socket_path);
            return acp::main(args, socket);
        }
        Command::Policy(args) => {
            let socket = cli
                .socket
                .unwrap_or_else(askbus::client::default_socket_path);
            return policy::run(args, &socket).unwrap_or_else(|e| {
                if broken_pipe(&e) {
                    return ExitCode::SUCCESS;
                }
                eprintln!("askbus policy: {e:#}");
                ExitCode::from(exit::FAILURE)
            });
        }
        Command::Service(args) => {
            return service::run(args).unwrap_or_else(|e| {
                if broken_pipe(&e) {
                    return ExitCode::SUCCESS;
                }
                eprintln!("askbus: {e:#}");
                ExitCode::from(exit::FAILURE)
            })
        }
        command => command,
    };
    let socket = cli
        .socket
        .clone()
        .unwrap_or_else(askbus::client::default_socket_path);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("askbus: cannot start: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let is_ask = matches!(command, Command::Ask { .. });
    match rt.block_on(run(command, socket)) {
        Ok(code) => code,
        Err(e) => {
            let (text, mut code) = fail::report(&e);
            eprintln!("askbus: {text}");
            // Every failure of `ask` has a status apart from the outcomes 0–6.
            if is_ask && code == 1 {
                code = exit::INTERNAL;
            }
            ExitCode::from(code)
        }
    }
}

async fn run(command: Command, socket: PathBuf) -> Result<ExitCode> {
    match command {
        Command::Ask {
            file,
            timeout_ms,
            no_ui,
            json,
            client,
            context,
        } => {
            let questions = ask::read_questions(file)?;
            let context = context.context();
            ask::run(
                &socket, questions, timeout_ms, no_ui, context, json, &client,
            )
            .await
        }
        Command::Pending { json, filter } => pending::run(&socket, json, &filter.filter()).await,
        Command::Ui(filter) => ui::run(&socket, filter.filter()).await,
        Command::Watch { json } => watch::run(&socket, json).await,
        Command::Validate { file, json } => validate::run(file, json),
        Command::Schema { name, all } => schema::run(name, all),
        Command::Completions { shell } => {
            completions::completions(shell, clap_command()).map(|()| ExitCode::SUCCESS)
        }
        Command::Man { dir } => completions::man(clap_command(), dir).map(|()| ExitCode::SUCCESS),
        Command::Answer {
            id,
            answers,
            other,
            dismiss,
            allow,
            always,
            any_project,
            deny,
        } => {
            let what = answer::What::from_flags(answers, other, dismiss, allow, always, deny);
            answer::run(&socket, &id, what, any_project).await
        }
        Command::Stats { json } => stats::run(&socket, json).await,
        Command::Doctor(args) => doctor::run(&socket, args).await,
        Command::History(args) => history::run(args, &socket)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Mcp(args) => mcp::run(&socket, args).await,
        Command::Hook(args) => Ok(hook::run(&socket, args).await),
        Command::Web(args) => web::run(args, socket).await,
        Command::Notify(args) => notify::run(&socket, args).await,
        Command::Chat(args) => chat::run(&socket, args).await,
        Command::Bench { .. } | Command::Service(_) | Command::Policy(_) | Command::Acp(_) => {
            unreachable!("dispatched before the runtime")
        }
    }
}

/// Writes to standard output. A reader that went away (`askbus pending | head`, `askbus stats |
/// true`) ends the command quietly with status 0, as `watch` does: what it printed was read as
/// far as the reader wanted. `println!` would panic (status 101) on that broken pipe.
pub(crate) fn stdout_write(args: std::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(exit::OK));
        }
        eprintln!("askbus: cannot write to standard output: {e}");
        std::process::exit(i32::from(exit::INTERNAL));
    }
}

/// Whether a command failed only because the reader of its output went away (a `writeln!` to
/// stdout passed up with `?`): that ends it quietly too, as [`stdout_write`] does.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The contents of `file`, or of stdin when it is absent or `-` (as `ask` and `validate` read).
fn read_file_or_stdin(file: Option<&std::path::Path>) -> Result<String> {
    match file {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
        }
        _ => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read stdin")?;
            Ok(s)
        }
    }
}
