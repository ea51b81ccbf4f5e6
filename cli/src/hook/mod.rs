//! `askbus hook AGENT`: an agent's own permission hook (Gemini CLI's `BeforeTool`, Claude
//! Code's `PreToolUse`/`PermissionRequest`, Codex's `PermissionRequest`) that asks a person
//! through askbusd and writes the decision back in that agent's hook format.
//!
//! `agent` owns what every agent's hook contract shares and the `AgentHook` trait, which
//! `gemini`, `claude` and `codex` implement; `details` owns what the person is shown for a
//! tool call; `ask` asks through askbusd and turns how it ended into a verdict; `install`
//! writes the hook into an agent's settings. This file holds the flags, reads the input, and
//! decides with the flags whether an undecided call is handed back. It **fails closed**: only a person's explicit, consistent approval of an outcome that was offered
//! allows. When no UI would see the call (none connected, askbusd not running) it is handed
//! back to the agent's own prompt at once (`--no-ui ask`, the default), so an agent never
//! waits in silence; an unreachable daemon, a timeout, a dismissal, a refusal, a contradictory
//! reply or a malformed input denies (exit 2, the reason on stderr), or with `--fallback ask`
//! hands the decision back. It never exits with a code an agent reads as "carry on".

mod agent;
mod ask;
mod claude;
mod codex;
mod details;
mod gemini;
pub mod install;

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

pub use agent::Agent;
use agent::{Output, Verdict};
pub(crate) use details::root_commands;

/// Whether this process's command line is `askbus [--socket PATH] hook …`, for the usage
/// error path, which runs before the command line is understood.
pub fn invoked() -> bool {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy();
        if arg == "--socket" {
            args.next();
        } else if !arg.starts_with('-') {
            return arg == "hook";
        }
    }
    false
}

/// The most the hook reads from stdin: an agent's hook input carries one tool call, and a
/// request must fit in one frame anyway.
const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, Args)]
#[command(after_help = install::AFTER_HELP)]
pub struct HookArgs {
    /// Which agent runs this hook (its input and output formats)
    agent: Agent,
    /// How long to wait for a person [default: 55000 for gemini (under Gemini CLI's 60 s hook
    /// timeout, after which it runs the tool), 590000 for claude and codex]. Keep it under the
    /// hook's own timeout in the agent's settings.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    /// When no UI would see the call (none connected, or askbusd not running): hand it back
    /// to the agent's own prompt at once (ask; a headless agent, which has none, is denied),
    /// deny it at once (reject), or wait for a UI until the timeout (wait)
    #[arg(long, value_name = "POLICY", default_value = "ask")]
    no_ui: NoUi,
    /// When nobody decides otherwise (timeout, dismissed, askbusd refusing or shutting down):
    /// deny, or hand the decision back to the agent's own prompt (Gemini CLI and Claude Code
    /// in a terminal, Codex's approval prompt)
    #[arg(long, value_name = "WHAT", default_value = "deny")]
    fallback: Fallback,
    /// Name announced to the UIs as the producer
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CLIENT)]
    client: String,
    #[command(flatten)]
    setup: install::SetupArgs,
}

/// The producer name a hook announces unless --client says otherwise.
const DEFAULT_CLIENT: &str = concat!("askbus-hook/", env!("CARGO_PKG_VERSION"));

impl HookArgs {
    /// The hook's own options as the command line --install writes must repeat them: those
    /// given that differ from the defaults, and the timeout the agent's entry needs.
    fn installed_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut push = |name: &str, value: String| {
            flags.push(name.to_owned());
            flags.push(value);
        };
        let timeout = self
            .timeout_ms
            .or_else(|| self.agent.hook().installed_timeout_ms());
        if let Some(ms) = timeout {
            push("--timeout-ms", ms.to_string());
        }
        if self.no_ui != NoUi::Ask {
            push("--no-ui", value_name(self.no_ui));
        }
        if self.fallback != Fallback::Deny {
            push("--fallback", value_name(self.fallback));
        }
        if self.client != DEFAULT_CLIENT {
            push("--client", self.client.clone());
        }
        flags
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// Deny the tool call (exit 2)
    Deny,
    /// Let the agent ask in its own terminal (or approval prompt)
    Ask,
}

/// A value as the command line spells it (`ask`, `reject`, …).
fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// What a call gets when no UI would see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NoUi {
    /// Hand it back to the agent's own prompt at once (deny where the agent has none)
    Ask,
    /// Deny it at once (or hand it back with --fallback ask)
    Reject,
    /// Wait for a UI to connect, until --timeout-ms
    Wait,
}

/// Why nobody decided, as far as the policy flags care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// No UI would see the call: none connected, or askbusd is not running.
    NoUi,
    /// Anything else: a timeout, a dismissal, a refusal, a shutdown, a lost connection.
    Other,
    /// A reply that contradicts itself or the request: never handed back, denied.
    Contradictory,
}

/// Runs the hook (or, with --install, --uninstall or --print-config, sets it up): never
/// fails, every error is a verdict.
pub async fn run(socket: &Path, args: HookArgs) -> ExitCode {
    if args.setup.any() {
        return install::run(args.agent, &args.setup, socket, &args.installed_flags());
    }
    let hook = args.agent.hook();
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut input);
    let parsed = match read {
        Err(e) => Err(format!("cannot read the hook input: {e}")),
        Ok(_) if input.len() as u64 > MAX_INPUT_BYTES => Err(format!(
            "the hook input is larger than {MAX_INPUT_BYTES} bytes"
        )),
        Ok(_) => agent::parse(hook, &input).map_err(|e| e.to_string()),
    };
    let output = match parsed {
        // A malformed input is never handed back: the agent and this hook disagree on the
        // contract, and only a config fix helps.
        Err(why) => agent::render(
            hook,
            None,
            Verdict::Undecided {
                why: format!(
                    "{}: {why}; the tool call was not approved.",
                    args.agent.command()
                ),
                hand_back: false,
            },
        ),
        Ok(event) => {
            let (verdict, cause) = ask::decide(socket, &args, hook, &event).await;
            let verdict = match verdict {
                Verdict::Undecided { why, .. } => Verdict::Undecided {
                    why,
                    hand_back: hands_back(&args, cause),
                },
                v => v,
            };
            agent::render(hook, Some(&event), verdict)
        }
    };
    write(&output);
    ExitCode::from(output.code)
}

/// Whether an undecided call is handed back to the agent's prompt, as the flags say.
fn hands_back(args: &HookArgs, cause: Cause) -> bool {
    match cause {
        Cause::Contradictory => false,
        Cause::NoUi if args.no_ui == NoUi::Ask => true,
        Cause::NoUi | Cause::Other => args.fallback == Fallback::Ask,
    }
}

fn write(output: &Output) {
    if let Some(out) = &output.stdout {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{out}");
        let _ = stdout.flush();
    }
    if let Some(err) = &output.stderr {
        // Already neutralized by the agent's contract (agent::neutral).
        let _ = writeln!(std::io::stderr(), "{err}");
    }
}

/// `s` on one line (controls as spaces, trimmed), at most `max` characters (the last one `…`
/// when cut).
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    match clean.char_indices().nth(max - 1) {
        Some((i, _)) if clean.chars().count() > max => format!("{}…", &clean[..i]),
        _ => clean.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        hook: HookArgs,
    }

    fn installed(args: &[&str]) -> Vec<String> {
        use clap::Parser;
        let cli = Cli::try_parse_from(std::iter::once("hook").chain(args.iter().copied())).unwrap();
        cli.hook.installed_flags()
    }

    #[test]
    fn install_repeats_the_flags_given_and_the_timeout_the_agent_needs() {
        assert_eq!(
            installed(&["claude", "--fallback", "ask", "--install"]),
            ["--fallback", "ask"]
        );
        assert!(installed(&["claude", "--install"]).is_empty());
        assert_eq!(
            installed(&["gemini", "--install"]),
            ["--timeout-ms", "590000"]
        );
        assert_eq!(
            installed(&[
                "gemini",
                "--print-config",
                "--timeout-ms",
                "1000",
                "--no-ui",
                "wait",
                "--fallback",
                "deny",
                "--client",
                "x/1"
            ]),
            ["--timeout-ms", "1000", "--no-ui", "wait", "--client", "x/1"]
        );
    }

    #[test]
    fn one_line_values() {
        assert_eq!(one_line("  a\nb\tc ", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
        assert_eq!(one_line("ééééé", 3).chars().count(), 3);
    }
}
