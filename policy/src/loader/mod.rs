//! Policy files, loaded as the reference's `loadPoliciesFromToml` and `loadExtensionPolicies`
//! load them: TOML 0.5, the schema (zod's checks: unknown keys ignored, a file with one bad
//! rule skipped whole), the shell-syntax and tool-name checks, the expansion of `toolName` and
//! `commandPrefix` arrays, the regular expressions, the tier's priority band, and every error
//! the reference reports, with its type, message and severity.

use std::path::Path;

use crate::regex::{escape_regex, is_safe_regexp, JsRegex};
use crate::toml05::{self, Value};
use crate::tools::{format_mcp_tool_name, tool_name_warning};

mod spec;

use spec::{build_args_patterns, checker_spec, rule_lines, rule_spec, type_name, OneOrMany};

/// A decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Proceed without asking.
    Allow,
    /// Refuse.
    Deny,
    /// Ask a person.
    AskUser,
}

impl Decision {
    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::AskUser => "ask_user",
        }
    }
    /// From the reference's spelling.
    pub fn parse(s: &str) -> Option<Decision> {
        match s {
            "allow" => Some(Decision::Allow),
            "deny" => Some(Decision::Deny),
            "ask_user" => Some(Decision::AskUser),
            _ => None,
        }
    }
}

/// An approval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `default`.
    Default,
    /// `autoEdit`.
    AutoEdit,
    /// `yolo`.
    Yolo,
    /// `plan`.
    Plan,
}

impl Mode {
    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AutoEdit => "autoEdit",
            Mode::Yolo => "yolo",
            Mode::Plan => "plan",
        }
    }
    /// From the reference's spelling.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "default" => Some(Mode::Default),
            "autoEdit" => Some(Mode::AutoEdit),
            "yolo" => Some(Mode::Yolo),
            "plan" => Some(Mode::Plan),
            _ => None,
        }
    }
}

/// A policy tier: the integer part of a rule's effective priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// 1: the shipped defaults.
    Default = 1,
    /// 2: extensions.
    Extension = 2,
    /// 3: the workspace.
    Workspace = 3,
    /// 4: the user.
    User = 4,
    /// 5: the administrator.
    Admin = 5,
}

impl Tier {
    /// The reference's tier name.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Default => "default",
            Tier::Extension => "extension",
            Tier::Workspace => "workspace",
            Tier::User => "user",
            Tier::Admin => "admin",
        }
    }
    /// From the tier name.
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "default" => Some(Tier::Default),
            "extension" => Some(Tier::Extension),
            "workspace" => Some(Tier::Workspace),
            "user" => Some(Tier::User),
            "admin" => Some(Tier::Admin),
            _ => None,
        }
    }
    fn source_prefix(self) -> &'static str {
        match self {
            Tier::Default => "Default",
            Tier::Extension => "Extension",
            Tier::Workspace => "Workspace",
            Tier::User => "User",
            Tier::Admin => "Admin",
        }
    }
}

/// A loaded rule, as the reference's `PolicyRule`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The tool name (`mcp_{server}_{tool}` when `mcpName` is set); may be empty (the engine refuses it).
    pub tool_name: String,
    /// Only for this subagent.
    pub subagent: Option<String>,
    /// Only for this MCP server (`*`: any).
    pub mcp_name: Option<String>,
    /// The rule's own decision.
    pub decision: Decision,
    /// The effective priority: tier + priority/1000.
    pub priority: f64,
    /// Only in these approval modes.
    pub modes: Option<Vec<Mode>>,
    /// Only when (non-)interactive.
    pub interactive: Option<bool>,
    /// Only for tools whose annotations have these values.
    pub tool_annotations: Option<Vec<(String, Value)>>,
    /// Redirection does not downgrade this rule's allow.
    pub allow_redirection: Option<bool>,
    /// `Tier: file` (or `Extension (name): file`).
    pub source: String,
    /// The message of a deny.
    pub deny_message: Option<String>,
    /// The pattern the stable-stringified args must match.
    pub args_pattern: Option<JsRegex>,
    /// Where it was written: the file's path and the rule's line (1-based), for people.
    pub origin: Option<(String, usize)>,
    /// askbus's own `askbusProject` key (ignored by the reference): the daemon lets such an
    /// allow decide only requests of that project ("allow always" scoped to a project).
    pub project: Option<String>,
}

/// A `[[safety_checker]]` entry: validated and kept for the engine's checks, never run.
#[derive(Debug, Clone)]
pub struct Checker {
    /// The tool name, as the loader builds it.
    pub tool_name: String,
    /// The MCP server, if any.
    pub mcp_name: Option<String>,
    /// The effective priority.
    pub priority: f64,
    /// `Tier: file`.
    pub source: String,
}

/// One load error, as the reference reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    /// The file's name (or the directory's, for an unreadable directory).
    pub file: String,
    /// The file's full path.
    pub path: String,
    /// The tier's name.
    pub tier: &'static str,
    /// `toml_parse`, `schema_validation`, `rule_validation`, `regex_compilation`,
    /// `tool_name_warning` or `file_read`.
    pub kind: &'static str,
    /// The short message.
    pub message: String,
    /// A warning rather than an error.
    pub warning: bool,
    /// The rule's index in its file, where the reference gives it.
    pub rule_index: Option<usize>,
    /// The long explanation.
    pub details: Option<String>,
}

/// What a load produced.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The rules, in load order.
    pub rules: Vec<Rule>,
    /// The safety checkers, in load order.
    pub checkers: Vec<Checker>,
    /// The errors and warnings.
    pub errors: Vec<LoadError>,
}

impl Loaded {
    /// Appends another load.
    pub fn extend(&mut self, other: Loaded) {
        self.rules.extend(other.rules);
        self.checkers.extend(other.checkers);
        self.errors.extend(other.errors);
    }
}

/// The directory's `*.toml` regular files, in byte order of their names.
pub fn toml_files(dir: &Path) -> std::io::Result<Vec<(String, std::path::PathBuf)>> {
    let mut out = vec![];
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // Dirent.isFile(): a symlink is not a regular file to the reference.
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".toml") {
            out.push((name, entry.path()));
        }
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// `loadPoliciesFromToml([dir], () => tier)`: a missing directory is no error.
pub fn load_dir(dir: &Path, tier: Tier) -> Loaded {
    let mut out = Loaded::default();
    let files = match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => toml_files(dir).and_then(|files| {
            files
                .into_iter()
                .map(|(name, path)| std::fs::read(&path).map(|b| (name, path, b)))
                .collect::<std::io::Result<Vec<_>>>()
        }),
        Ok(m) if m.is_file() && dir.to_string_lossy().ends_with(".toml") => {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            std::fs::read(dir).map(|b| vec![(name, dir.to_path_buf(), b)])
        }
        Ok(_) => Ok(vec![]),
    };
    match files {
        Err(e) => out.errors.push(LoadError {
            file: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: dir.to_string_lossy().into_owned(),
            tier: tier.name(),
            kind: "file_read",
            message: "Failed to read policy path".into(),
            warning: false,
            rule_index: None,
            details: Some(e.to_string()),
        }),
        Ok(files) => {
            for (name, path, bytes) in files {
                let text = String::from_utf8_lossy(&bytes);
                out.extend(load_text(&text, &name, &path.to_string_lossy(), tier));
            }
        }
    }
    out
}

/// `loadExtensionPolicies(name, dir)`: tier 2, no allow rules, no yolo rules or checkers.
pub fn load_extension(name: &str, dir: &Path) -> Loaded {
    let mut loaded = load_dir(dir, Tier::Extension);
    loaded.rules.retain(|r| {
        r.decision != Decision::Allow && !r.modes.as_ref().is_some_and(|m| m.contains(&Mode::Yolo))
    });
    for r in &mut loaded.rules {
        if let Some(rest) = r.source.strip_prefix("Extension: ") {
            r.source = format!("Extension ({name}): {rest}");
        }
    }
    loaded.checkers.retain(|_| true);
    for c in &mut loaded.checkers {
        if let Some(rest) = c.source.strip_prefix("Extension: ") {
            c.source = format!("Extension ({name}): {rest}");
        }
    }
    loaded
}

/// One file's text, loaded into `tier` (the reference's per-file loop body).
pub fn load_text(text: &str, file: &str, path: &str, tier: Tier) -> Loaded {
    let mut out = Loaded::default();
    let err = |kind: &'static str,
               message: &str,
               rule_index: Option<usize>,
               details: String,
               warning: bool| LoadError {
        file: file.to_string(),
        path: path.to_string(),
        tier: tier.name(),
        kind,
        message: message.to_string(),
        warning,
        rule_index,
        details: Some(details),
    };
    let parsed = match toml05::parse(text) {
        Ok(v) => v,
        Err(e) => {
            out.errors.push(err(
                "toml_parse",
                "TOML parsing failed",
                None,
                e.to_string(),
                false,
            ));
            return out;
        }
    };
    // The file schema: `rule` and `safety_checker`, optional arrays; every other key ignored.
    let mut issues = vec![];
    let mut specs = vec![];
    let mut checker_specs = vec![];
    match parsed.get("rule") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match rule_spec(item, i) {
                    Ok(s) => specs.push(s),
                    Err(e) => issues.extend(e),
                }
            }
        }
        Some(v) => issues.push(format!(
            "  - Field \"rule\": Expected array, received {}",
            type_name(v)
        )),
    }
    match parsed.get("safety_checker") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match checker_spec(item, i) {
                    Ok(s) => checker_specs.push(s),
                    Err(e) => issues.extend(e),
                }
            }
        }
        Some(v) => issues.push(format!(
            "  - Field \"safety_checker\": Expected array, received {}",
            type_name(v)
        )),
    }
    if !issues.is_empty() {
        out.errors.push(err(
            "schema_validation",
            "Schema validation failed",
            None,
            format!("Invalid policy rule (rule #1):\n{}", issues.join("\n")),
            false,
        ));
        return out;
    }
    for (i, r) in specs.iter().enumerate() {
        if r.command_prefix.is_some() || r.command_regex.is_some() {
            let details = if !matches!(&r.tool_name, OneOrMany::One(t) if t == "run_shell_command")
            {
                let found = match &r.tool_name {
                    OneOrMany::One(s) => serde_json::to_string(s).unwrap_or_default(),
                    OneOrMany::Many(v) => serde_json::to_string(v).unwrap_or_default(),
                };
                Some(format!("Rule #{}: commandPrefix and commandRegex can only be used with toolName = \"run_shell_command\"\n  Found: toolName = {found}\n  Fix: Set toolName = \"run_shell_command\" (not an array)", i + 1))
            } else if r.args_pattern.is_some() {
                Some(format!("Rule #{}: cannot use both commandPrefix/commandRegex and argsPattern\n  These fields are mutually exclusive\n  Fix: Use either commandPrefix/commandRegex OR argsPattern, not both", i + 1))
            } else if r.command_prefix.is_some() && r.command_regex.is_some() {
                Some(format!("Rule #{}: cannot use both commandPrefix and commandRegex\n  These fields are mutually exclusive\n  Fix: Use either commandPrefix OR commandRegex, not both", i + 1))
            } else {
                None
            };
            if let Some(d) = details {
                out.errors.push(err(
                    "rule_validation",
                    "Invalid shell command syntax",
                    Some(i),
                    d,
                    false,
                ));
            }
        }
    }
    for (i, r) in specs.iter().enumerate() {
        let names = r.tool_name.items();
        if names.iter().any(String::is_empty) {
            out.errors.push(err(
                "rule_validation",
                "Invalid policy rule: toolName cannot be empty string",
                Some(i),
                format!(
                    "Rule #{} contains an empty toolName string. Use \"*\" to match all tools.",
                    i + 1
                ),
                false,
            ));
            continue;
        }
        for name in names {
            if let Some(w) = tool_name_warning(&name, i) {
                out.errors.push(err(
                    "tool_name_warning",
                    "Unrecognized tool name",
                    Some(i),
                    w,
                    true,
                ));
            }
        }
    }
    let lines = rule_lines(text);
    let source = format!("{}: {file}", tier.source_prefix());
    for (i, r) in specs.iter().enumerate() {
        for pattern in build_args_patterns(&r.args_pattern, &r.command_prefix, &r.command_regex) {
            for tool in r.tool_name.items() {
                let tool_name = match r.mcp_name.as_deref() {
                    Some(m) if !m.is_empty() => format_mcp_tool_name(m, Some(&tool)),
                    _ => tool,
                };
                let mut args_pattern = None;
                if let Some(p) = pattern.as_ref().filter(|p| !p.is_empty()) {
                    match JsRegex::new(p) {
                        Err(e) => {
                            out.errors.push(err(
                                "regex_compilation",
                                "Invalid regex pattern",
                                None,
                                format!("Pattern: {p}\nError: {e}"),
                                false,
                            ));
                            continue;
                        }
                        Ok(re) => {
                            if !is_safe_regexp(p) {
                                out.errors.push(err(
                                    "regex_compilation",
                                    "Unsafe regex pattern (potential ReDoS)",
                                    None,
                                    format!("Pattern: {p}"),
                                    false,
                                ));
                                continue;
                            }
                            args_pattern = Some(re);
                        }
                    }
                }
                out.rules.push(Rule {
                    tool_name,
                    subagent: r.subagent.clone(),
                    mcp_name: r.mcp_name.clone(),
                    decision: r.decision,
                    priority: f64::from(tier as u8) + r.priority / 1000.0,
                    modes: r.modes.clone(),
                    interactive: r.interactive,
                    tool_annotations: r.tool_annotations.clone(),
                    allow_redirection: r.allow_redirection,
                    source: source.clone(),
                    deny_message: r.deny_message.clone(),
                    args_pattern,
                    origin: Some((path.to_string(), lines.get(i).copied().unwrap_or(0))),
                    project: r.project.clone(),
                });
            }
        }
    }
    for (i, c) in checker_specs.iter().enumerate() {
        let names = c.tool_name.items();
        if names.iter().any(String::is_empty) {
            out.errors.push(err(
                "rule_validation",
                "Invalid safety checker rule: toolName cannot be empty string",
                Some(i),
                format!(
                    "Checker #{} contains an empty toolName string. Use \"*\" to match all tools.",
                    i + 1
                ),
                false,
            ));
            continue;
        }
        if c.mcp_name.as_deref().is_some_and(|m| !m.is_empty()) {
            continue;
        }
        for name in names {
            if let Some(w) = tool_name_warning(&name, i) {
                out.errors.push(err(
                    "tool_name_warning",
                    "Unrecognized tool name in safety checker",
                    Some(i),
                    w,
                    true,
                ));
            }
        }
    }
    for c in &checker_specs {
        for pattern in build_args_patterns(&c.args_pattern, &c.command_prefix, &c.command_regex) {
            for tool in c.tool_name.items() {
                let tool_name = match c.mcp_name.as_deref() {
                    Some(m) if !m.is_empty() && tool != "*" => format!("mcp_{m}_{tool}"),
                    Some(m) if !m.is_empty() => format!("mcp_{m}_*"),
                    _ => tool,
                };
                if let Some(p) = pattern.as_ref().filter(|p| !p.is_empty()) {
                    if let Err(e) = JsRegex::new(p) {
                        out.errors.push(err(
                            "regex_compilation",
                            "Invalid regex pattern in safety checker",
                            None,
                            format!("Pattern: {p}\nError: {e}"),
                            false,
                        ));
                        continue;
                    }
                    if !is_safe_regexp(p) {
                        out.errors.push(err(
                            "regex_compilation",
                            "Unsafe regex pattern in safety checker (potential ReDoS)",
                            None,
                            format!("Pattern: {p}"),
                            false,
                        ));
                        continue;
                    }
                }
                out.checkers.push(Checker {
                    tool_name,
                    mcp_name: c.mcp_name.clone(),
                    priority: f64::from(tier as u8) + c.priority / 1000.0,
                    source: source.clone(),
                });
            }
        }
    }
    out
}

/// The reference's shipped policy files (Apache-2.0, Google LLC), loaded as the default tier.
pub const SHIPPED: &[(&str, &str)] = &[
    ("agents.toml", include_str!("../defaults/agents.toml")),
    ("conseca.toml", include_str!("../defaults/conseca.toml")),
    (
        "discovered.toml",
        include_str!("../defaults/discovered.toml"),
    ),
    (
        "non-interactive.toml",
        include_str!("../defaults/non-interactive.toml"),
    ),
    ("plan.toml", include_str!("../defaults/plan.toml")),
    ("read-only.toml", include_str!("../defaults/read-only.toml")),
    (
        "sandbox-default.toml",
        include_str!("../defaults/sandbox-default.toml"),
    ),
    ("write.toml", include_str!("../defaults/write.toml")),
    ("yolo.toml", include_str!("../defaults/yolo.toml")),
];

/// The shipped defaults, as the reference loads its own `policies/` directory.
pub fn load_shipped() -> Loaded {
    let mut out = Loaded::default();
    for (name, text) in SHIPPED {
        out.extend(load_text(
            text,
            name,
            &format!("(shipped)/{name}"),
            Tier::Default,
        ));
    }
    out
}
