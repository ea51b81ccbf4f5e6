//! `askbus policy test`: one question to the engine and its answer, as JSON (the conformance
//! contract of `shared/conformance/README.md`) or readably.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::engine::{Call, Engine, Matched, Options, Outcome};
use crate::json::{number_to_string, JsValue};
use crate::loader::{load_dir, load_extension, load_shipped, LoadError, Loaded, Tier};
use crate::safety::Place;

/// One question.
#[derive(Debug, Clone)]
pub struct Question {
    /// `--policy-dir TIER=DIR`, in command-line order.
    pub policy_dirs: Vec<(Tier, PathBuf)>,
    /// `--extension NAME=DIR`, in order.
    pub extensions: Vec<(String, PathBuf)>,
    /// Load the shipped defaults (not `--no-defaults`).
    pub defaults: bool,
    /// Mode, interactivity, trust, always-allow.
    pub options: Options,
    /// The tool.
    pub tool: String,
    /// Its args (`ARGS_JSON`, default `{}`).
    pub args: JsValue,
    /// `--server`.
    pub server: Option<String>,
    /// `--annotations`.
    pub annotations: Option<JsValue>,
    /// `--subagent`.
    pub subagent: Option<String>,
}

/// The answer: exit status and what to print.
#[derive(Debug, Clone)]
pub struct Answer {
    /// 0, or 65 when the engine refuses the rules.
    pub exit: i32,
    /// The `--json` object.
    pub json: String,
    /// The readable form.
    pub text: String,
}

/// Loads the question's tiers in the contract's order: the directories, the extensions, then
/// the shipped defaults.
pub fn load(q: &Question) -> Loaded {
    let mut loaded = Loaded::default();
    for (tier, dir) in &q.policy_dirs {
        loaded.extend(load_dir(dir, *tier));
    }
    for (name, dir) in &q.extensions {
        loaded.extend(load_extension(name, dir));
    }
    if q.defaults {
        loaded.extend(load_shipped());
    }
    loaded
}

fn js(s: &str) -> String {
    serde_json::to_string(s).expect("a string encodes")
}

/// An error as the contract's JSON object.
pub fn error_json(e: &LoadError) -> String {
    let mut s = format!(
        "{{\"file\":{},\"tier\":{},\"type\":{},\"message\":{},\"severity\":{}",
        js(&e.file),
        js(e.tier),
        js(e.kind),
        js(&e.message),
        js(if e.warning { "warning" } else { "error" })
    );
    if let Some(i) = e.rule_index {
        let _ = write!(s, ",\"ruleIndex\":{i}");
    }
    if let Some(d) = &e.details {
        let _ = write!(s, ",\"details\":{}", js(d));
    }
    s.push('}');
    s
}

/// The rule an outcome names, as the contract's JSON object.
pub fn rule_json(engine: &Engine, m: &Matched) -> String {
    match m {
        Matched::Rule(_) => {
            let r = engine.rule(m).expect("a loaded rule");
            let mut s = format!(
                "{{\"toolName\":{},\"decision\":{},\"priority\":{},\"source\":{}",
                js(&r.tool_name),
                js(r.decision.as_str()),
                number_to_string(r.priority),
                js(&r.source)
            );
            if let Some(m) = &r.mcp_name {
                let _ = write!(s, ",\"mcpName\":{}", js(m));
            }
            if let Some(d) = &r.deny_message {
                let _ = write!(s, ",\"denyMessage\":{}", js(d));
            }
            s.push('}');
            s
        }
        Matched::BuildFile { tool_name, decision } => format!(
            "{{\"toolName\":{},\"decision\":{},\"priority\":9007199254740991,\"source\":\"Build File Protection\",\"denyMessage\":\"Modifying build configuration files requires explicit user confirmation\"}}",
            js(tool_name),
            js(decision.as_str())
        ),
    }
}

fn errors_text(errors: &[LoadError], out: &mut String) {
    for e in errors {
        let _ = writeln!(
            out,
            "{}: {} ({} tier, {}): {}{}",
            if e.warning { "warning" } else { "error" },
            e.path,
            e.tier,
            e.kind,
            e.message,
            e.rule_index
                .map(|i| format!(" (rule #{})", i + 1))
                .unwrap_or_default()
        );
        if let Some(d) = &e.details {
            for line in d.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
}

/// Asks the question.
pub fn answer(q: &Question, place: Place) -> Answer {
    let loaded = load(q);
    let errors: Vec<String> = loaded.errors.iter().map(error_json).collect();
    let engine = match Engine::new(loaded.rules, loaded.checkers, q.options.clone(), place) {
        Ok(e) => e,
        Err(e) => {
            let mut all = errors.clone();
            all.push(format!(
                "{{\"file\":null,\"tier\":null,\"type\":\"engine\",\"message\":{},\"severity\":\"error\"}}",
                js(&e.0)
            ));
            let mut text = String::new();
            errors_text(&loaded.errors, &mut text);
            let _ = writeln!(
                text,
                "error: the policy engine refuses these rules: {}",
                e.0
            );
            return Answer {
                exit: 65,
                json: format!("{{\"errors\":[{}]}}", all.join(",")),
                text,
            };
        }
    };
    let call = Call {
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
        .map_or("null".to_string(), |m| rule_json(&engine, m));
    let json = format!(
        "{{\"decision\":{},\"rule\":{},\"errors\":[{}]}}",
        js(out.decision.as_str()),
        rule,
        errors.join(",")
    );
    let text = readable(&engine, &out, &loaded.errors);
    Answer {
        exit: 0,
        json,
        text,
    }
}

/// The readable form of an outcome.
pub fn readable(engine: &Engine, out: &Outcome, errors: &[LoadError]) -> String {
    let mut text = format!("decision: {}\n", out.decision.as_str());
    match &out.rule {
        None => text.push_str("rule: none (the default decision)\n"),
        Some(m @ Matched::Rule(_)) => {
            let r = engine.rule(m).expect("a loaded rule");
            let _ = writeln!(
                text,
                "rule: {} {} (priority {}) from {}",
                r.tool_name,
                r.decision.as_str(),
                number_to_string(r.priority),
                r.source
            );
            if let Some((path, line)) = &r.origin {
                let _ = writeln!(text, "  at {path}:{line}");
            }
            if let Some(re) = &r.args_pattern {
                let _ = writeln!(text, "  argsPattern: {}", re.source());
            }
            if let Some(d) = &r.deny_message {
                let _ = writeln!(text, "  message: {d}");
            }
        }
        Some(Matched::BuildFile { .. }) => {
            text.push_str("rule: Build File Protection (editing a build file needs a person)\n")
        }
    }
    if !out.trace.parts.is_empty() {
        let _ = writeln!(text, "split into {} parts:", out.trace.parts.len());
        for p in &out.trace.parts {
            let _ = writeln!(text, "  - {p}");
        }
    }
    for n in &out.trace.notes {
        let _ = writeln!(text, "note: {n}");
    }
    errors_text(errors, &mut text);
    text
}
