//! `askbus policy`: ask the policy engine (`test`), list the rules in force (`list`), edit
//! the user's own rules (`add`, `rm`), and say why a past request was decided as it was
//! (`explain`, in [`explain`]). The engine is the `askbus-policy` crate; the tiers are
//! the daemon's (shipped defaults, root-owned `/etc/askbus/policies`, the user's directory).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use askbus_policy::engine::{Engine, Options};
use askbus_policy::json::{self, number_to_string};
use askbus_policy::loader::{Decision, Loaded, Mode, Tier};
use askbus_policy::question::{self, answer, Question};
use askbus_policy::safety::Place;
use askbus_policy::tiers;

use crate::fail::exit;

mod explain;

/// `askbus policy …`.
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PolicyCommand {
    /// Ask the engine about one tool call: the decision, and the rule that made it.
    ///
    /// Decides exactly as Gemini CLI's policy engine (0.61.0) does. Without --policy-dir or
    /// --extension it uses the daemon's tiers (shipped defaults, /etc/askbus/policies as admin,
    /// your $XDG_CONFIG_HOME/askbus/policies as user). The workspace is the current directory.
    /// Exit status 0 (the decision is printed, with any load errors), 65 when the engine refuses
    /// the rules, 64 for a wrong command line.
    Test(TestArgs),
    /// List every rule in force (daemon tiers), highest priority first, and the load errors.
    List {
        /// Leave the shipped defaults out
        #[arg(long)]
        no_defaults: bool,
        /// One JSON object: {"rules": [...], "errors": [...]}
        #[arg(long)]
        json: bool,
    },
    /// Add a rule to your user tier ($XDG_CONFIG_HOME/askbus/policies/askbus-rules.toml).
    Add {
        /// The tool (the reference's name: run_shell_command, read_file, mcp_SERVER_TOOL, `*`…)
        tool: String,
        /// allow, deny or ask_user
        #[arg(long, value_parser = ["allow", "deny", "ask_user"])]
        decision: String,
        /// Priority within the user tier, 0..=999
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(0..=999))]
        priority: u16,
        /// For run_shell_command: the command prefix the rule covers
        #[arg(long, value_name = "PREFIX", conflicts_with = "args_pattern")]
        command_prefix: Option<String>,
        /// A JavaScript regular expression over the stable-stringified args
        #[arg(long, value_name = "REGEX")]
        args_pattern: Option<String>,
        /// Only this MCP server's tools
        #[arg(long, value_name = "SERVER")]
        mcp_name: Option<String>,
        /// The message an agent is told when the rule denies
        #[arg(long, value_name = "TEXT")]
        deny_message: Option<String>,
        /// Only in these approval modes (repeatable)
        #[arg(long = "mode", value_parser = ["default", "autoEdit", "yolo", "plan"])]
        modes: Vec<String>,
    },
    /// Remove the Nth rule (1-based, as `askbus policy list` numbers your file's) from your user tier.
    Rm {
        /// The rule's number in your file
        n: usize,
    },
    /// Why a past request was decided as it was: by which rule, or by whom and through which
    /// path, or that nobody decided (a timeout, no UI, a restart: never an approval); and what
    /// the rules in force now would decide about the same call.
    Explain(explain::ExplainArgs),
}

/// `askbus policy test`'s flags, as the conformance contract names them.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Load DIR's *.toml into TIER (default, extension, workspace, user, admin); repeatable
    #[arg(long = "policy-dir", value_name = "TIER=DIR")]
    policy_dirs: Vec<String>,
    /// Load DIR as Gemini CLI loads an installed extension's policies; repeatable
    #[arg(long = "extension", value_name = "NAME=DIR")]
    extensions: Vec<String>,
    /// Leave the shipped default policies out
    #[arg(long)]
    no_defaults: bool,
    /// The approval mode
    #[arg(long, default_value = "default", value_parser = ["default", "autoEdit", "yolo", "plan"])]
    mode: String,
    /// Non-interactive: the default decision becomes deny
    #[arg(long)]
    non_interactive: bool,
    /// The workspace is not a trusted folder
    #[arg(long)]
    untrusted: bool,
    /// Skip the "always allow" rules (priority fraction .950)
    #[arg(long)]
    disable_always_allow: bool,
    /// The MCP server of the call
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// The tool's annotations (a JSON object)
    #[arg(long, value_name = "JSON")]
    annotations: Option<String>,
    /// The subagent making the call
    #[arg(long, value_name = "NAME")]
    subagent: Option<String>,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
    /// The tool's name
    tool: String,
    /// The call's args, any JSON text
    #[arg(default_value = "{}")]
    args_json: String,
}

/// The calling user's place: the current directory as the workspace, `$HOME`.
fn place() -> Result<Place> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    Ok(Place {
        workspace: cwd.to_string_lossy().into_owned(),
        home: std::env::var("HOME").unwrap_or_else(|_| "/".into()),
        hermetic: [
            "TEST_SRCDIR",
            "TEST_WORKSPACE",
            "BAZEL_TEST",
            "RUNFILES_DIR",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())),
    })
}

fn split_pair(s: &str, what: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), PathBuf::from(v))),
        _ => Err(format!("{what} takes NAME=DIR, not {s:?}")),
    }
}

/// The daemon's tiers as this user sees them: shipped defaults, admin, and this user's.
pub fn daemon_tiers(defaults: bool) -> Loaded {
    let mut loaded = tiers::load_system(defaults, std::path::Path::new(tiers::ADMIN_DIR));
    // The user's own directory, with the daemon's check: a file there that this user does not
    // own (or that others may write) is refused, as the daemon refuses it.
    loaded.extend(tiers::load_tier_dir(
        &tiers::own_user_dir(),
        Tier::User,
        Some(askbus::trust::effective_uid()),
    ));
    loaded
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("askbus policy: {msg}");
    ExitCode::from(exit::USAGE)
}

fn test(a: TestArgs) -> Result<ExitCode> {
    let mut q = Question {
        policy_dirs: vec![],
        extensions: vec![],
        defaults: !a.no_defaults,
        options: Options {
            non_interactive: a.non_interactive,
            mode: Mode::parse(&a.mode).unwrap_or(Mode::Default),
            disable_always_allow: a.disable_always_allow,
            trusted: !a.untrusted,
        },
        tool: a.tool,
        args: match json::parse(&a.args_json) {
            Ok(v) => v,
            Err(e) => return Ok(usage(&format!("ARGS_JSON is not JSON: {e}"))),
        },
        server: a.server,
        annotations: None,
        subagent: a.subagent,
    };
    if let Some(ann) = a.annotations {
        match json::parse(&ann) {
            Ok(v) => q.annotations = Some(v),
            Err(e) => return Ok(usage(&format!("--annotations is not JSON: {e}"))),
        }
    }
    for d in &a.policy_dirs {
        let (tier, dir) = match split_pair(d, "--policy-dir") {
            Ok(p) => p,
            Err(e) => return Ok(usage(&e)),
        };
        let Some(tier) = Tier::parse(&tier) else {
            return Ok(usage(&format!(
                "unknown tier {tier:?} (default, extension, workspace, user or admin)"
            )));
        };
        q.policy_dirs.push((tier, dir));
    }
    for e in &a.extensions {
        match split_pair(e, "--extension") {
            Ok((name, dir)) => q.extensions.push((name, dir)),
            Err(e) => return Ok(usage(&e)),
        }
    }
    let place = place()?;
    let ans = if q.policy_dirs.is_empty() && q.extensions.is_empty() {
        // The daemon's own tiers.
        let loaded = daemon_tiers(q.defaults);
        answer_loaded(&q, loaded, place)
    } else {
        answer(&q, place)
    };
    if a.json {
        println!("{}", ans.json);
    } else {
        print!("{}", ans.text);
    }
    Ok(ExitCode::from(ans.exit as u8))
}

fn answer_loaded(q: &Question, loaded: Loaded, place: Place) -> question::Answer {
    // The same answer as `question::answer`, from tiers loaded elsewhere.
    let errors: Vec<String> = loaded.errors.iter().map(question::error_json).collect();
    match Engine::new(loaded.rules, loaded.checkers, q.options.clone(), place) {
        Err(e) => {
            let mut all = errors;
            all.push(format!(
                "{{\"file\":null,\"tier\":null,\"type\":\"engine\",\"message\":{},\"severity\":\"error\"}}",
                serde_json::to_string(&e.0).unwrap_or_default()
            ));
            question::Answer {
                exit: exit::BAD_RULES.into(),
                json: format!("{{\"errors\":[{}]}}", all.join(",")),
                text: format!("error: the policy engine refuses these rules: {}\n", e.0),
            }
        }
        Ok(engine) => {
            let call = askbus_policy::Call {
                name: &q.tool,
                args: Some(&q.args),
                server: q.server.as_deref(),
                annotations: q.annotations.as_ref(),
                subagent: q.subagent.as_deref(),
            };
            let out = engine.check(&call);
            let rule = out
                .rule
                .as_ref()
                .map_or("null".to_string(), |m| question::rule_json(&engine, m));
            question::Answer {
                exit: exit::OK.into(),
                json: format!(
                    "{{\"decision\":\"{}\",\"rule\":{rule},\"errors\":[{}]}}",
                    out.decision.as_str(),
                    errors.join(",")
                ),
                text: question::readable(&engine, &out, &loaded.errors),
            }
        }
    }
}

fn list(no_defaults: bool, as_json: bool) -> Result<ExitCode> {
    let loaded = daemon_tiers(!no_defaults);
    let errors = loaded.errors.clone();
    let engine = Engine::new(loaded.rules, loaded.checkers, Options::default(), place()?);
    let engine = match engine {
        Ok(e) => e,
        Err(e) => bail!("the policy engine refuses the rules in force: {}", e.0),
    };
    if as_json {
        let rules: Vec<String> = (0..engine.rules().len())
            .map(|i| question::rule_json(&engine, &askbus_policy::Matched::Rule(i)))
            .collect();
        let errs: Vec<String> = errors.iter().map(question::error_json).collect();
        println!(
            "{{\"rules\":[{}],\"errors\":[{}]}}",
            rules.join(","),
            errs.join(",")
        );
        return Ok(ExitCode::SUCCESS);
    }
    for r in engine.rules() {
        let mut line = format!(
            "{:<8} {:<20} {:<9} {}",
            number_to_string(r.priority),
            r.tool_name,
            r.decision.as_str(),
            r.source
        );
        if let Some(re) = &r.args_pattern {
            line.push_str(&format!("  argsPattern {}", re.source()));
        }
        if let Some(m) = &r.modes {
            let m: Vec<&str> = m.iter().map(|m| m.as_str()).collect();
            line.push_str(&format!("  modes {}", m.join(",")));
        }
        if let Some(i) = r.interactive {
            line.push_str(if i {
                "  interactive"
            } else {
                "  non-interactive"
            });
        }
        println!("{line}");
    }
    if errors.is_empty() {
        println!("no load errors");
    }
    for e in &errors {
        println!(
            "{}: {} ({} tier): {}{}",
            if e.warning { "warning" } else { "error" },
            e.path,
            e.tier,
            e.message,
            e.details
                .as_deref()
                .map(|d| format!(": {}", d.replace('\n', " ")))
                .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `askbus policy …`.
pub fn run(args: PolicyArgs, socket: &Path) -> Result<ExitCode> {
    match args.command {
        PolicyCommand::Test(a) => test(a),
        PolicyCommand::Explain(a) => explain::run(a, socket),
        PolicyCommand::List { no_defaults, json } => list(no_defaults, json),
        PolicyCommand::Add {
            tool,
            decision,
            priority,
            command_prefix,
            args_pattern,
            mcp_name,
            deny_message,
            modes,
        } => {
            let modes: Vec<&str> = modes.iter().map(String::as_str).collect();
            let text = tiers::rule_toml(&tiers::NewRule {
                tool: &tool,
                decision: Decision::parse(&decision).unwrap_or(Decision::AskUser),
                priority,
                command_prefix: command_prefix.as_deref(),
                args_pattern: args_pattern.as_deref(),
                mcp_name: mcp_name.as_deref(),
                deny_message: deny_message.as_deref(),
                modes: &modes,
            });
            let path = tiers::append_user_rule(&tiers::own_user_dir(), &text)
                .context("the rule was not added")?;
            println!("added to {}:{text}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Rm { n } => {
            let removed = tiers::remove_user_rule(&tiers::own_user_dir(), n)?;
            println!("removed:\n{}", removed.trim_end());
            Ok(ExitCode::SUCCESS)
        }
    }
}
