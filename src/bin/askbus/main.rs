//! askbus: the command-line client. `ask` asks as a producer; `pending` and `answer` answer as
//! a UI would, for scripts and for answering without a richer UI; `stats` prints counters.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use askbus::client::{new_correlation_id, Ask, ClientError, Connection, Producer, Ui, UiEvent};
use askbus::protocol::{NoUiPolicy, Outcome, ProducerResponse, UiRequest};

mod completions;
mod mcp;
mod schema;
mod ui;
mod validate;
mod watch;

/// Ask a person a question through askbusd, or answer one.
#[derive(Debug, Parser)]
#[command(name = "askbus", version, about, long_about = None)]
struct Cli {
    /// The daemon's socket [default: $ASKBUS_SOCKET, else $XDG_RUNTIME_DIR/askbus.sock, else
    /// /run/askbus/askbus.sock for root, else /tmp/askbus-<uid>/askbus.sock]
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask the questions in FILE (or stdin) and wait for the answer.
    ///
    /// FILE holds a `questions` array or `{"questions": [...]}`. Exit status: 0 answered,
    /// 1 dismissed, 2 timeout, 3 no-ui, 4 rejected (the daemon's message on stderr),
    /// 5 the daemon is unreachable, 6 withdrawn or daemon shut down.
    Ask {
        /// Questions file; `-` or nothing reads stdin
        file: Option<PathBuf>,
        /// How long to wait for an answer (the daemon clamps it to its maximum)
        #[arg(long, value_name = "N")]
        timeout_ms: Option<u64>,
        /// When no UI is connected: wait for one, or give up at once
        #[arg(long, value_name = "POLICY")]
        no_ui: Option<NoUiArg>,
        /// Print the whole ask-user-response frame as JSON
        #[arg(long)]
        json: bool,
        /// Name announced to the UIs
        #[arg(long, value_name = "NAME", default_value = concat!("askbus-cli/", env!("CARGO_PKG_VERSION")))]
        client: String,
    },
    /// List the pending questions and exit.
    Pending {
        /// Print them as a JSON array of ask-user-request frames
        #[arg(long)]
        json: bool,
    },
    /// Answer (or dismiss) one pending question, as a UI would.
    Answer {
        /// The question's correlationId
        id: String,
        /// An answer as INDEX=TEXT (question index from 0); repeat for several questions
        #[arg(
            long = "answer",
            value_name = "INDEX=TEXT",
            required_unless_present = "dismiss"
        )]
        answers: Vec<String>,
        /// Dismiss the dialog instead of answering
        #[arg(long, conflicts_with = "answers")]
        dismiss: bool,
    },
    /// Answer questions interactively in this terminal, as they arrive.
    ///
    /// Keeps running (and reconnects when askbusd restarts) until you press q in the list.
    Ui,
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
    /// Print the man page (roff).
    Man,
    /// Serve the ask_user tool to an MCP client (Claude Code, Codex, Gemini CLI…) on stdio.
    ///
    /// Each tool call is asked through askbusd and answered from any askbus UI. The tool has
    /// Gemini CLI's ask_user name, description and schema; its text result is the reference's
    /// llmContent.
    Mcp(mcp::McpArgs),
    /// Print the daemon's live counters.
    Stats {
        /// Compact JSON on one line
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum NoUiArg {
    Wait,
    Reject,
}

/// Exit statuses of `askbus ask`, documented in its help.
mod exit {
    pub const DISMISSED: u8 = 1;
    pub const TIMEOUT: u8 = 2;
    pub const NO_UI: u8 = 3;
    pub const REJECTED: u8 = 4;
    pub const UNREACHABLE: u8 = 5;
    pub const ENDED: u8 = 6;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let socket = cli
        .socket
        .clone()
        .unwrap_or_else(askbus::paths::default_socket_path);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("askbus: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli.command, socket)) {
        Ok(code) => code,
        Err(e) => {
            let unreachable = e
                .downcast_ref::<ClientError>()
                .is_some_and(|c| matches!(c, ClientError::Connect { .. }));
            eprintln!("askbus: {e:#}");
            if unreachable {
                ExitCode::from(exit::UNREACHABLE)
            } else {
                ExitCode::FAILURE
            }
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
        } => {
            let questions = read_questions(file)?;
            let no_ui = no_ui.map(|p| match p {
                NoUiArg::Wait => NoUiPolicy::Wait,
                NoUiArg::Reject => NoUiPolicy::Reject,
            });
            ask(&socket, questions, timeout_ms, no_ui, json, &client).await
        }
        Command::Pending { json } => pending(&socket, json).await,
        Command::Ui => ui::run(&socket).await,
        Command::Watch { json } => watch::run(&socket, json).await,
        Command::Validate { file, json } => validate::run(file, json),
        Command::Schema { name, all } => schema::run(name, all),
        Command::Completions { shell } => {
            completions::completions(shell, <Cli as clap::CommandFactory>::command())
                .map(|()| ExitCode::SUCCESS)
        }
        Command::Man => {
            completions::man(<Cli as clap::CommandFactory>::command()).map(|()| ExitCode::SUCCESS)
        }
        Command::Answer {
            id,
            answers,
            dismiss,
        } => answer(&socket, &id, &answers, dismiss).await,
        Command::Mcp(args) => mcp::run(&socket, args).await,
        Command::Stats { json } => {
            let mut conn = Connection::connect(&socket).await?;
            let stats = conn.stats().await?;
            if json {
                println!("{}", serde_json::to_string(&stats)?);
            } else {
                println!("{}", serde_json::to_string_pretty(&stats)?);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn read_questions(file: Option<PathBuf>) -> Result<Value> {
    let text = read_file_or_stdin(file.as_deref())?;
    let value: Value =
        serde_json::from_str(&text).context("the questions file is not valid JSON")?;
    Ok(match value {
        Value::Object(mut obj) if obj.contains_key("questions") => {
            obj.remove("questions").unwrap_or_default()
        }
        other => other,
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

async fn ask(
    socket: &std::path::Path,
    questions: Value,
    timeout_ms: Option<u64>,
    no_ui: Option<NoUiPolicy>,
    json: bool,
    client: &str,
) -> Result<ExitCode> {
    // Installed before asking, so a Ctrl-C at any moment withdraws the question.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot handle SIGINT")?;
    let producer = Producer::connect(socket, Some(client)).await?;
    let id = new_correlation_id();
    let request = Ask {
        questions,
        correlation_id: Some(id.clone()),
        timeout_ms,
        no_ui,
    };
    let asked = producer.ask(request);
    tokio::pin!(asked);
    let response = tokio::select! {
        r = &mut asked => r,
        _ = interrupt.recv() => {
            // Withdraw the question so no UI keeps showing it, then report how it ended.
            producer.cancel(&id).await?;
            asked.await
        }
    };
    let response = match response {
        Ok(r) => r,
        Err(ClientError::Rejected(e)) => {
            eprintln!("{}", e.message);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&askbus::protocol::ServerFrame::Error(e))?
                );
            }
            return Ok(ExitCode::from(exit::REJECTED));
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        let frame = askbus::protocol::ServerFrame::AskUserResponse(response.clone());
        println!("{}", serde_json::to_string(&frame)?);
    } else {
        print_response(&response);
    }
    Ok(ExitCode::from(match response.reason {
        Outcome::Answered => 0,
        Outcome::Dismissed => exit::DISMISSED,
        Outcome::Timeout => exit::TIMEOUT,
        Outcome::NoUi => exit::NO_UI,
        Outcome::Withdrawn | Outcome::Shutdown => exit::ENDED,
    }))
}

fn print_response(r: &ProducerResponse) {
    match r.reason {
        // The reference's own rendering of the answers, as the user would see it.
        Outcome::Answered => println!("{}", r.result.return_display),
        _ => eprintln!("{}", r.result.llm_content),
    }
}

async fn pending(socket: &std::path::Path, json: bool) -> Result<ExitCode> {
    let mut ui = Ui::subscribe(
        socket,
        Some(concat!("askbus-pending/", env!("CARGO_PKG_VERSION"))),
    )
    .await?;
    let mut requests: Vec<UiRequest> = Vec::new();
    while (requests.len() as u64) < ui.pending_at_subscribe() {
        match ui.next().await? {
            Some(UiEvent::Request(r)) => requests.push(r),
            Some(UiEvent::Withdrawn { correlation_id, .. }) => {
                requests.retain(|r| r.correlation_id != correlation_id)
            }
            Some(_) => {}
            None => bail!("askbusd closed the connection"),
        }
    }
    if json {
        let frames: Vec<_> = requests
            .into_iter()
            .map(askbus::protocol::ServerFrame::AskUserRequest)
            .collect();
        println!("{}", serde_json::to_string_pretty(&frames)?);
        return Ok(ExitCode::SUCCESS);
    }
    if requests.is_empty() {
        println!("No pending questions.");
    }
    for r in &requests {
        print_request(r)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_request(r: &UiRequest) -> Result<()> {
    let p = &r.producer;
    println!(
        "{}  from {} (pid {}, uid {}), {}s left",
        r.correlation_id,
        p.client.as_deref().unwrap_or("unnamed agent"),
        p.pid.map_or("?".to_string(), |p| p.to_string()),
        p.uid,
        r.timeout_ms / 1000
    );
    let questions = r
        .questions
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, q) in questions.iter().enumerate() {
        let header = q.get("header").and_then(Value::as_str).unwrap_or("");
        let text = q.get("question").and_then(Value::as_str).unwrap_or("");
        let ty = q.get("type").and_then(Value::as_str).unwrap_or("");
        let multi = q
            .get("multiSelect")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let kind = if multi {
            format!("{ty}, several")
        } else {
            ty.to_owned()
        };
        println!(
            "  [{i}] {header} ({kind}): {}",
            text.replace('\n', "\n      ")
        );
        if ty == "yesno" {
            println!("      - Yes\n      - No");
        } else if let Some(options) = q.get("options").and_then(Value::as_array) {
            for o in options {
                let label = o.get("label").and_then(Value::as_str).unwrap_or("");
                let desc = o.get("description").and_then(Value::as_str).unwrap_or("");
                if desc.is_empty() {
                    println!("      - {label}");
                } else {
                    println!("      - {label}: {desc}");
                }
            }
        }
    }
    println!();
    Ok(())
}

async fn answer(
    socket: &std::path::Path,
    id: &str,
    raw: &[String],
    dismiss: bool,
) -> Result<ExitCode> {
    let mut answers = BTreeMap::new();
    for a in raw {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| anyhow!("--answer takes INDEX=TEXT, got {a:?}"))?;
        let index: usize = k
            .trim()
            .parse()
            .map_err(|_| anyhow!("--answer {a:?}: {k:?} is not a question index"))?;
        answers.insert(index, v.to_owned());
    }
    let mut ui = Ui::subscribe(
        socket,
        Some(concat!("askbus-answer/", env!("CARGO_PKG_VERSION"))),
    )
    .await?;
    if dismiss {
        ui.dismiss(id).await?;
    } else {
        ui.answer(id, &answers).await?;
    }
    loop {
        match ui.next().await? {
            Some(UiEvent::Ack {
                correlation_id,
                outcome,
            }) if correlation_id == id => {
                println!(
                    "{id}: {}",
                    if outcome == Outcome::Dismissed {
                        "dismissed"
                    } else {
                        "answered"
                    }
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(UiEvent::Error(e)) if e.correlation_id.as_deref() == Some(id) => {
                eprintln!("askbus: {}: {}", e.code, e.message);
                return Ok(ExitCode::FAILURE);
            }
            Some(_) => continue,
            None => bail!("askbusd closed the connection before acknowledging the answer"),
        }
    }
}
