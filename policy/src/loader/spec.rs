//! One `[[rule]]` or `[[safety_checker]]` table checked against the reference's schema: every
//! field's type and range, with the reference's issue texts; and the `argsPattern` forms a rule's
//! shorthand fields compile to.

use super::*;

/// A string or an array of strings.
#[derive(Debug, Clone)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(super) fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct RuleSpec {
    pub(super) tool_name: OneOrMany,
    pub(super) subagent: Option<String>,
    pub(super) mcp_name: Option<String>,
    pub(super) args_pattern: Option<String>,
    pub(super) command_prefix: Option<OneOrMany>,
    pub(super) command_regex: Option<String>,
    pub(super) decision: Decision,
    pub(super) priority: f64,
    pub(super) modes: Option<Vec<Mode>>,
    pub(super) interactive: Option<bool>,
    pub(super) tool_annotations: Option<Vec<(String, Value)>>,
    pub(super) allow_redirection: Option<bool>,
    pub(super) deny_message: Option<String>,
    pub(super) project: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct CheckerSpec {
    pub(super) tool_name: OneOrMany,
    pub(super) mcp_name: Option<String>,
    pub(super) args_pattern: Option<String>,
    pub(super) command_prefix: Option<OneOrMany>,
    pub(super) command_regex: Option<String>,
    pub(super) priority: f64,
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Integer(_) | Value::Float(_) => "number",
        Value::SpecialFloat(f) if f.is_nan() => "nan",
        Value::SpecialFloat(_) => "number",
        Value::BigInt(_) => "bigint",
        Value::Boolean(_) => "boolean",
        Value::Datetime(_) => "date",
        Value::Array(_) => "array",
        Value::Table(_) => "object",
    }
}

/// zod's checks for one object, issues collected as `path: message`.
pub(super) struct Check<'a> {
    pub(super) obj: &'a Value,
    pub(super) path: String,
    pub(super) issues: Vec<String>,
}

impl<'a> Check<'a> {
    pub(super) fn issue(&mut self, field: &str, msg: String) {
        self.issues
            .push(format!("  - Field \"{}.{field}\": {msg}", self.path));
    }
    pub(super) fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field)
    }
    pub(super) fn string(&mut self, field: &str) -> Option<String> {
        match self.get(field) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                self.issue(field, format!("Expected string, received {}", type_name(v)));
                None
            }
        }
    }
    pub(super) fn boolean(&mut self, field: &str) -> Option<bool> {
        match self.get(field) {
            None => None,
            Some(Value::Boolean(b)) => Some(*b),
            Some(v) => {
                self.issue(
                    field,
                    format!("Expected boolean, received {}", type_name(v)),
                );
                None
            }
        }
    }
    pub(super) fn one_or_many(&mut self, field: &str, required: bool) -> Option<OneOrMany> {
        match self.get(field) {
            None => {
                if required {
                    self.issue(field, "Required".into());
                }
                None
            }
            Some(Value::String(s)) => Some(OneOrMany::One(s.clone())),
            Some(Value::Array(items)) if items.iter().all(|i| matches!(i, Value::String(_))) => {
                Some(OneOrMany::Many(
                    items
                        .iter()
                        .map(|i| {
                            if let Value::String(s) = i {
                                s.clone()
                            } else {
                                String::new()
                            }
                        })
                        .collect(),
                ))
            }
            Some(_) => {
                self.issue(field, "Invalid input".into());
                None
            }
        }
    }
    pub(super) fn modes(&mut self) -> Option<Vec<Mode>> {
        match self.get("modes") {
            None => None,
            Some(Value::Array(items)) => {
                let mut out = vec![];
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) if Mode::parse(s).is_some() => {
                            out.push(Mode::parse(s).expect("checked"))
                        }
                        _ => self.issue(
                            &format!("modes.{i}"),
                            "Invalid enum value. Expected 'default' | 'autoEdit' | 'yolo' | 'plan'"
                                .into(),
                        ),
                    }
                }
                Some(out)
            }
            Some(v) => {
                self.issue(
                    "modes",
                    format!("Expected array, received {}", type_name(v)),
                );
                None
            }
        }
    }
    pub(super) fn record(&mut self, field: &str) -> Option<Vec<(String, Value)>> {
        match self.get(field) {
            None => None,
            Some(Value::Table(entries)) => Some(entries.clone()),
            Some(v) => {
                self.issue(field, format!("Expected object, received {}", type_name(v)));
                None
            }
        }
    }
    /// A number that is an integer; `None` for missing.
    pub(super) fn int(&mut self, field: &str, required: bool, range: bool) -> Option<f64> {
        let n = match self.get(field) {
            None => {
                if required {
                    self.issue(field, "priority is required".into());
                }
                return None;
            }
            Some(Value::Integer(n)) | Some(Value::Float(n)) | Some(Value::SpecialFloat(n))
                if !n.is_nan() =>
            {
                *n
            }
            Some(v) => {
                self.issue(
                    field,
                    format!("priority must be a number (received {})", type_name(v)),
                );
                return None;
            }
        };
        if !(n.is_finite() && n.fract() == 0.0) {
            self.issue(field, "priority must be an integer".into());
            return None;
        }
        if range && n < 0.0 {
            self.issue(field, "priority must be >= 0".into());
            return None;
        }
        if range && n > 999.0 {
            self.issue(field, "priority must be <= 999 to prevent tier overflow. Priorities >= 1000 would jump to the next tier.".into());
            return None;
        }
        Some(n)
    }
}

pub(super) fn rule_spec(v: &Value, i: usize) -> Result<RuleSpec, Vec<String>> {
    if !matches!(v, Value::Table(_)) {
        return Err(vec![format!(
            "  - Field \"rule.{i}\": Expected object, received {}",
            type_name(v)
        )]);
    }
    let mut c = Check {
        obj: v,
        path: format!("rule.{i}"),
        issues: vec![],
    };
    let tool_name = c.one_or_many("toolName", true);
    let subagent = c.string("subagent");
    let mcp_name = c.string("mcpName");
    let args_pattern = c.string("argsPattern");
    let command_prefix = c.one_or_many("commandPrefix", false);
    let command_regex = c.string("commandRegex");
    let decision = match c.get("decision") {
        Some(Value::String(s)) if Decision::parse(s).is_some() => Decision::parse(s),
        None => {
            c.issue("decision", "Required".into());
            None
        }
        Some(other) => {
            c.issue(
                "decision",
                format!(
                    "Invalid enum value. Expected 'allow' | 'deny' | 'ask_user', received {}",
                    match other {
                        Value::String(s) => format!("'{s}'"),
                        o => type_name(o).to_string(),
                    }
                ),
            );
            None
        }
    };
    let priority = c.int("priority", true, true);
    let modes = c.modes();
    let interactive = c.boolean("interactive");
    let tool_annotations = c.record("toolAnnotations");
    let allow_redirection = c.boolean("allowRedirection");
    let allow_redirection_snake = c.boolean("allow_redirection");
    let deny_message = c.string("denyMessage");
    let deny_message_snake = c.string("deny_message");
    if !c.issues.is_empty() {
        return Err(c.issues);
    }
    Ok(RuleSpec {
        tool_name: tool_name.expect("checked"),
        subagent,
        mcp_name,
        args_pattern,
        command_prefix,
        command_regex,
        decision: decision.expect("checked"),
        priority: priority.expect("checked"),
        modes,
        interactive,
        tool_annotations,
        allow_redirection: allow_redirection.or(allow_redirection_snake),
        deny_message: deny_message.or(deny_message_snake),
        project: match v.get("askbusProject") {
            Some(Value::String(p)) => Some(p.clone()),
            _ => None,
        },
    })
}

pub(super) fn checker_spec(v: &Value, i: usize) -> Result<CheckerSpec, Vec<String>> {
    if !matches!(v, Value::Table(_)) {
        return Err(vec![format!(
            "  - Field \"safety_checker.{i}\": Expected object, received {}",
            type_name(v)
        )]);
    }
    let mut c = Check {
        obj: v,
        path: format!("safety_checker.{i}"),
        issues: vec![],
    };
    let tool_name = c.one_or_many("toolName", true);
    let mcp_name = c.string("mcpName");
    let args_pattern = c.string("argsPattern");
    let command_prefix = c.one_or_many("commandPrefix", false);
    let command_regex = c.string("commandRegex");
    let priority = c.int("priority", false, false).unwrap_or(0.0);
    let _ = c.modes();
    let _ = c.record("toolAnnotations");
    match c.get("checker") {
        None => c.issue("checker", "Required".into()),
        Some(Value::Table(_)) => {
            let checker = c.get("checker").expect("present");
            let mut cc = Check {
                obj: checker,
                path: format!("{}.checker", c.path),
                issues: vec![],
            };
            match checker.get("type") {
                Some(Value::String(t)) if t == "in-process" => match checker.get("name") {
                    Some(Value::String(n)) if n == "allowed-path" || n == "conseca" => {}
                    _ => cc.issue(
                        "name",
                        "Invalid enum value. Expected 'allowed-path' | 'conseca'".into(),
                    ),
                },
                Some(Value::String(t)) if t == "external" => {
                    let _ = cc.string("name");
                    if checker.get("name").is_none() {
                        cc.issue("name", "Required".into());
                    }
                }
                _ => cc.issue(
                    "type",
                    "Invalid discriminator value. Expected 'in-process' | 'external'".into(),
                ),
            }
            if let Some(rc) = checker.get("required_context") {
                if !matches!(rc, Value::Array(items) if items.iter().all(|i| matches!(i, Value::String(_))))
                {
                    cc.issue("required_context", "Expected array of strings".into());
                }
            }
            let _ = cc.record("config");
            c.issues.extend(cc.issues);
        }
        Some(v) => {
            let t = type_name(v);
            c.issue("checker", format!("Expected object, received {t}"));
        }
    }
    if !c.issues.is_empty() {
        return Err(c.issues);
    }
    Ok(CheckerSpec {
        tool_name: tool_name.expect("checked"),
        mcp_name,
        args_pattern,
        command_prefix,
        command_regex,
        priority,
    })
}

/// The reference's `buildArgsPatterns`: `None` entries are rules without a pattern.
pub(super) fn build_args_patterns(
    args_pattern: &Option<String>,
    command_prefix: &Option<OneOrMany>,
    command_regex: &Option<String>,
) -> Vec<Option<String>> {
    // Truthiness, as the reference tests it: "" is no prefix, [] is no rule at all.
    let prefix_truthy = match command_prefix {
        Some(OneOrMany::One(s)) => !s.is_empty(),
        Some(OneOrMany::Many(_)) => true,
        None => false,
    };
    if prefix_truthy {
        return command_prefix
            .as_ref()
            .expect("truthy")
            .items()
            .into_iter()
            .map(|prefix| {
                let encoded = serde_json::to_string(&prefix).expect("a string encodes");
                let open = &encoded[..encoded.len() - 1];
                let segment = escape_regex(&format!("\"command\":{open}"));
                Some(format!("{segment}(?:[\\s\"]|\\\\\")"))
            })
            .collect();
    }
    if let Some(re) = command_regex.as_ref().filter(|r| !r.is_empty()) {
        return vec![Some(format!("\"command\":\"{re}"))];
    }
    vec![args_pattern.clone()]
}

pub(super) fn rule_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim();
            t.starts_with("[[") && t.trim_start_matches('[').trim_end_matches(']').trim() == "rule"
        })
        .map(|(i, _)| i + 1)
        .collect()
}
