//! The policy engine: the reference's `PolicyEngine.check`, decision for decision.
//!
//! Rules are sorted by effective priority (stably: among equals the first loaded wins); the
//! first that matches decides, then shell commands are split and every part checked, a
//! redirection downgrades an allow, the safety heuristics adjust what no pattern pinned down,
//! and an allowed edit of a build file is asked. Safety checkers are validated, never run.
//!
//! On top of the reference, [`Engine::check_strict`] is askbus's own compound-command check,
//! used by the daemon: every part of a compound command must be allowed on its own. It can only
//! turn an allow into `ask_user`, never the reverse.

use crate::json::{stable_stringify, JsProp, JsValue};
use crate::loader::{Checker, Decision, Mode, Rule};
use crate::paths;
use crate::regex::js_trim_utf16;
use crate::safety::{self, Place};
use crate::shell::{self, REDIRECTION_NAMES};
use crate::shellquote;
use crate::toml05::Value;
use crate::tools::{self, parse_mcp_tool_name, AGENT_TOOL_NAME, SHELL_TOOL_NAMES};

mod command;
mod index;
mod strict;

use index::Index;

/// The engine refused its rules (the reference's constructor throws).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(pub String);

/// How the engine is set up, as the reference's `PolicyEngineConfig`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Non-interactive: the default decision becomes deny.
    pub non_interactive: bool,
    /// The approval mode.
    pub mode: Mode,
    /// Skip the "always allow" rules (priority fraction .950).
    pub disable_always_allow: bool,
    /// The workspace is a trusted folder.
    pub trusted: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            non_interactive: false,
            mode: Mode::Default,
            disable_always_allow: false,
            trusted: true,
        }
    }
}

/// A rule the engine names with its decision: one of the loaded rules, or the build-file
/// protection the reference synthesizes.
#[derive(Debug, Clone, PartialEq)]
pub enum Matched {
    /// A loaded rule, by index into [`Engine::rules`].
    Rule(usize),
    /// The reference's "Build File Protection" rule for an allowed edit of a build file.
    BuildFile {
        /// The tool's name.
        tool_name: String,
        /// The decision it made.
        decision: Decision,
    },
}

/// Why the decision differs from the rule's own (for people).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The command was split into these parts.
    pub parts: Vec<String>,
    /// Notes on downgrades and heuristics, in the order they happened.
    pub notes: Vec<String>,
}

/// A decision and the rule the reference returns with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The decision.
    pub decision: Decision,
    /// The rule, if any.
    pub rule: Option<Matched>,
    /// Why, for the readable output.
    pub trace: Trace,
}

/// One tool call to decide.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its arguments (`None`: undefined).
    pub args: Option<&'a JsValue>,
    /// The MCP server, if known.
    pub server: Option<&'a str>,
    /// The tool's annotations.
    pub annotations: Option<&'a JsValue>,
    /// The subagent making the call.
    pub subagent: Option<&'a str>,
}

/// The policy engine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// Shared: [`Engine::with`] gives each request its options without copying the rules.
    rules: std::sync::Arc<Vec<Rule>>,
    options: Options,
    default_decision: Decision,
    place: Place,
    /// The rules by tool name: a check visits only the rules that can name its tool.
    index: std::sync::Arc<Index>,
}

impl Engine {
    /// `new PolicyEngine({rules, checkers, …})`: sorts and validates like the reference.
    pub fn new(
        mut rules: Vec<Rule>,
        mut checkers: Vec<Checker>,
        options: Options,
        place: Place,
    ) -> Result<Engine, EngineError> {
        // A stable sort, highest priority first, as Array.prototype.sort is.
        rules.sort_by(|a, b| {
            b.priority
                .partial_cmp(&a.priority)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        checkers.sort_by(|a, b| {
            b.priority
                .partial_cmp(&a.priority)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for r in &rules {
            let src = if r.source.is_empty() {
                "unknown"
            } else {
                &r.source
            };
            if r.tool_name.is_empty() {
                return Err(EngineError(format!(
                    "Invalid policy rule: toolName is required. Use '*' for all tools. Rule source: {src}"
                )));
            }
            if r.mcp_name.as_deref() == Some("") {
                return Err(EngineError(format!(
                    "Invalid policy rule: mcpName is required if specified (cannot be empty). Rule source: {src}"
                )));
            }
            if r.subagent.as_deref() == Some("") {
                return Err(EngineError(format!(
                    "Invalid policy rule: subagent is required if specified (cannot be empty). Rule source: {src}"
                )));
            }
        }
        for c in &checkers {
            let src = if c.source.is_empty() {
                "unknown"
            } else {
                &c.source
            };
            if c.tool_name.is_empty() {
                return Err(EngineError(format!(
                    "Invalid safety checker rule: toolName is required. Use '*' for all tools. Checker source: {src}"
                )));
            }
            if c.mcp_name.as_deref() == Some("") {
                return Err(EngineError(format!(
                    "Invalid safety checker rule: mcpName is required if specified (cannot be empty). Checker source: {src}"
                )));
            }
        }
        let default_decision = if options.non_interactive {
            Decision::Deny
        } else {
            Decision::AskUser
        };
        let index = std::sync::Arc::new(Index::new(&rules));
        Ok(Engine {
            rules: std::sync::Arc::new(rules),
            options,
            default_decision,
            place,
            index,
        })
    }

    /// The rules, highest priority first.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The same rules with other options (approval mode, interactivity, trust, workspace).
    pub fn with(&self, options: Options, place: Place) -> Engine {
        let default_decision = if options.non_interactive {
            Decision::Deny
        } else {
            Decision::AskUser
        };
        Engine {
            rules: self.rules.clone(),
            options,
            default_decision,
            place,
            index: self.index.clone(),
        }
    }

    /// The rule an outcome names.
    pub fn rule(&self, m: &Matched) -> Option<&Rule> {
        match m {
            Matched::Rule(i) => self.rules.get(*i),
            Matched::BuildFile { .. } => None,
        }
    }

    fn is_always_allow(r: &Rule) -> bool {
        ((r.priority % 1.0) * 1000.0).round() == 950.0
    }

    #[allow(clippy::too_many_arguments)]
    fn rule_matches(
        &self,
        rule: &Rule,
        name: &str,
        stringified: Option<&[u16]>,
        has_args: bool,
        server: Option<&str>,
        annotations: Option<&JsValue>,
        subagent: Option<&str>,
        literal: Option<bool>,
    ) -> bool {
        if let Some(modes) = &rule.modes {
            if !modes.is_empty() && !modes.contains(&self.options.mode) {
                return false;
            }
        }
        if let Some(s) = &rule.subagent {
            if Some(s.as_str()) != subagent {
                return false;
            }
        }
        if let Some(m) = &rule.mcp_name {
            if m == "*" {
                if server.is_none() {
                    return false;
                }
            } else if server != Some(m.as_str()) {
                return false;
            }
        }
        let rt = rule.tool_name.as_str();
        if rt == "*" {
        } else if rt.contains('*') {
            if name.is_empty() || !matches_wildcard(rt, name, server) {
                return false;
            }
        } else if name != rt {
            let mut mcp_match = false;
            if let Some(srv) = server.filter(|s| !s.is_empty()) {
                if !name.is_empty() {
                    if let Some(m) = rule.mcp_name.as_deref().filter(|m| !m.is_empty()) {
                        if !rt.starts_with("mcp_")
                            && name == tools::format_mcp_tool_name(m, Some(rt))
                        {
                            mcp_match = true;
                        }
                    }
                    if !mcp_match
                        && rt.starts_with("mcp_")
                        && rt == tools::format_mcp_tool_name(srv, Some(name))
                    {
                        mcp_match = true;
                    }
                }
            }
            if !mcp_match {
                return false;
            }
        }
        if let Some(wanted) = &rule.tool_annotations {
            let Some(ann) = annotations.filter(|a| a.truthy()) else {
                return false;
            };
            for (k, v) in wanted {
                let key: Vec<u16> = k.encode_utf16().collect();
                if !strict_equals(ann.js_get(&key), v) {
                    return false;
                }
            }
        }
        if let Some(re) = &rule.args_pattern {
            if !has_args {
                return false;
            }
            let hit = match (stringified, literal) {
                (None, _) | (_, Some(false)) => false,
                (Some(s), Some(true)) => re.test_utf16_found(s),
                (Some(s), None) => re.test_utf16(s),
            };
            if !hit {
                return false;
            }
        }
        if let Some(i) = rule.interactive {
            if i && self.options.non_interactive {
                return false;
            }
            if !i && !self.options.non_interactive {
                return false;
            }
        }
        true
    }

    /// `engine.check({name, args}, server, annotations, subagent)`.
    pub fn check(&self, call: &Call<'_>) -> Outcome {
        let mut trace = Trace::default();
        self.check_inner(call, false, &mut trace, 0)
    }

    fn check_inner(
        &self,
        call: &Call<'_>,
        skip_heuristics: bool,
        trace: &mut Trace,
        depth: usize,
    ) -> Outcome {
        // The server: given, else the annotations' `_serverName`, else parsed from the name.
        let mut server: Option<String> = call.server.map(str::to_string);
        if server.as_deref().is_none_or(str::is_empty) {
            if let Some(JsValue::String(s)) = call.annotations.and_then(|a| a.prop("_serverName")) {
                server = Some(String::from_utf16_lossy(s));
            }
        }
        if server.as_deref().is_none_or(str::is_empty) && !call.name.is_empty() {
            if let Some((s, _)) = parse_mcp_tool_name(call.name) {
                server = Some(s.to_string());
            }
        }
        let server = server.as_deref();
        let has_args = call.args.is_some_and(JsValue::truthy);
        // Stringified only when a candidate rule has a pattern to match against it.
        let mut stringified: Option<Vec<u16>> = None;
        let is_shell = SHELL_TOOL_NAMES.contains(&call.name);
        let (command_v, dir_path) = if is_shell {
            (
                call.args.and_then(|a| a.prop("command")),
                call.args.and_then(|a| a.prop("dir_path")),
            )
        } else {
            (None, None)
        };
        // A non-string command: the reference's parser would throw; no string, no command.
        let command: Option<Vec<u16>> = match command_v {
            Some(JsValue::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        let command_str = command.as_ref().map(|c| String::from_utf16_lossy(c));

        let mut names = if call.name.is_empty() {
            vec![]
        } else {
            tools::tool_aliases(call.name)
        };
        if call.name == AGENT_TOOL_NAME {
            if let Some(JsValue::String(a)) = call
                .args
                .filter(|a| a.is_record())
                .and_then(|a| a.prop("agent_name"))
            {
                names.push(String::from_utf16_lossy(a));
            }
        }

        let mut decision: Option<Decision> = None;
        let mut matched: Option<Matched> = None;
        let single = self.index.single(&names, server);
        let owned;
        // With the list's literals: only the rules without one and those whose literal the
        // args hold (found in one pass) can match, so only they are visited.
        let mut found: Vec<usize> = vec![];
        let candidates: &[usize] = match single {
            Some((_, Some(lits))) => {
                if has_args {
                    stringified = Some(stable_stringify(call.args.expect("truthy")));
                }
                let (list, hits) = lits.candidates(stringified.as_deref());
                found = hits;
                owned = list;
                &owned
            }
            Some((list, None)) => list,
            None => {
                owned = self.index.candidates(&names, server);
                &owned
            }
        };
        let literals = single.and_then(|(_, l)| l.as_ref());
        for &i in candidates {
            let rule = &self.rules[i];
            if self.options.disable_always_allow && Self::is_always_allow(rule) {
                continue;
            }
            if has_args && stringified.is_none() && rule.args_pattern.is_some() {
                stringified = Some(stable_stringify(call.args.expect("truthy")));
            }
            let literal = match (literals, &stringified) {
                (Some(l), Some(_)) if rule.args_pattern.is_some() && l.covers(i) => {
                    Some(found.binary_search(&i).is_ok())
                }
                _ => None,
            };
            let hit = names.iter().any(|n| {
                self.rule_matches(
                    rule,
                    n,
                    stringified.as_deref(),
                    has_args,
                    server,
                    call.annotations,
                    call.subagent,
                    literal,
                )
            });
            if !hit {
                continue;
            }
            let mut rule_decision = rule.decision;
            if !skip_heuristics && is_shell && command.is_some() && rule.args_pattern.is_none() {
                rule_decision = self.apply_shell_heuristics(
                    command_str.as_deref().expect("some"),
                    rule_decision,
                    dir_path,
                    trace,
                );
            }
            if is_shell {
                let out = self.check_shell_command(
                    call,
                    command.as_deref(),
                    rule_decision,
                    server,
                    dir_path,
                    rule.allow_redirection,
                    Some(i),
                    trace,
                    depth,
                );
                decision = Some(out.decision);
                matched = out.rule;
            } else {
                decision = Some(rule_decision);
                matched = Some(Matched::Rule(i));
            }
            break;
        }
        let mut decision = match decision {
            Some(d) => d,
            None if self.options.mode == Mode::Yolo => Decision::Allow,
            None if is_shell => {
                let mut h = self.default_decision;
                if !skip_heuristics {
                    if let Some(c) = &command_str {
                        h = self.apply_shell_heuristics(c, h, dir_path, trace);
                    }
                }
                let out = self.check_shell_command(
                    call,
                    command.as_deref(),
                    h,
                    server,
                    dir_path,
                    Some(false),
                    None,
                    trace,
                    depth,
                );
                matched = out.rule;
                out.decision
            }
            None => self.default_decision,
        };
        if decision == Decision::Allow {
            if let Some(fs) = call
                .args
                .and_then(|a| a.prop("additional_permissions"))
                .and_then(|p| p.prop("fileSystem"))
            {
                if fs.truthy() {
                    let ws = self.place.workspace.as_str();
                    let list = |k: &str| match fs.prop(k) {
                        Some(JsValue::Array(items)) => items.clone(),
                        _ => vec![],
                    };
                    for p in list("read").into_iter().chain(list("write")) {
                        if let JsValue::String(p) = p {
                            let p = String::from_utf16_lossy(&p);
                            if !paths::is_subpath(ws, ws, &p) && ws != p {
                                trace.notes.push(format!(
                                    "additional permission {p} is outside the workspace: ask"
                                ));
                                decision = Decision::AskUser;
                                break;
                            }
                        }
                    }
                }
            }
            if names.iter().any(|n| tools::is_file_edit_tool(n)) {
                let target = tools::extract_file_path(call.args)
                    .map(|t| crate::regex::js_trim(&t).to_string());
                if let Some(t) = target.filter(|t| !t.is_empty()) {
                    if tools::is_build_file(&self.place.workspace, &t) {
                        decision = if self.options.non_interactive {
                            Decision::Deny
                        } else {
                            Decision::AskUser
                        };
                        trace
                            .notes
                            .push(format!("{t} is a build file: a person decides"));
                        matched = Some(Matched::BuildFile {
                            tool_name: call.name.to_string(),
                            decision,
                        });
                    }
                }
            }
        }
        Outcome {
            decision,
            rule: matched,
            trace: trace.clone(),
        }
    }
}

fn matches_wildcard(pattern: &str, name: &str, server: Option<&str>) -> bool {
    if pattern == "*" {
        return true;
    }
    if pattern == "mcp_*" {
        return server.is_some();
    }
    if pattern.starts_with("mcp_") && pattern.ends_with("_*") && pattern.len() >= 6 {
        let expected = &pattern[4..pattern.len() - 2];
        if server != Some(expected) {
            return false;
        }
        return name.starts_with(&format!("mcp_{expected}_"));
    }
    name == pattern
}

/// `annotations[key] !== value` inverted: JavaScript strict equality of a JSON property and a
/// TOML value (objects, arrays and dates are never equal: they are distinct objects).
fn strict_equals(prop: JsProp<'_>, v: &Value) -> bool {
    match (prop, v) {
        (JsProp::Value(JsValue::String(a)), Value::String(b)) => {
            *a == b.encode_utf16().collect::<Vec<u16>>()
        }
        (JsProp::Char(c), Value::String(b)) => b.encode_utf16().eq(std::iter::once(c)),
        (
            JsProp::Value(JsValue::Number(a)),
            Value::Integer(b) | Value::Float(b) | Value::SpecialFloat(b),
        ) => *a == *b,
        (JsProp::Number(a), Value::Integer(b) | Value::Float(b) | Value::SpecialFloat(b)) => {
            a == *b
        }
        (JsProp::Value(JsValue::Bool(a)), Value::Boolean(b)) => a == b,
        _ => false,
    }
}
