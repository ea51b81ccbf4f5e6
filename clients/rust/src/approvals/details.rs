//! The shapes of an approval's `details`, one per kind (`exec`, `edit`, `mcp`, `info`,
//! `sandbox_expansion`, `ask_user`, `exit_plan_mode`) as Gemini CLI core's
//! `SerializableConfirmationDetails` has them: which fields each kind holds, of what type,
//! and which are required, and the reference's check of a `details` object against them
//! (the fast path reads the same table).

use serde_json::{Map, Value};

use super::{kind, short, DETAIL_TYPES};

/// The field types of one details kind.
#[derive(Clone, Copy)]
pub(super) enum Field {
    Str,
    StrOrNull,
    Strs,
    Bool,
    Object,
    Any,
    DiffStat,
    Permissions,
    Questions,
}

/// `(field, type, required)` for each kind; `title` and `systemMessage` are common to all.
pub(super) fn fields(ty: &str) -> &'static [(&'static str, Field, bool)] {
    use Field::*;
    match ty {
        "exec" => &[
            ("command", Str, true),
            ("rootCommand", Str, true),
            ("rootCommands", Strs, true),
            ("commands", Strs, false),
            ("untrustedFlags", Strs, false),
            ("modifiedBuildFiles", Strs, false),
        ],
        "edit" => &[
            ("fileName", Str, true),
            ("filePath", Str, true),
            ("fileDiff", Str, true),
            ("originalContent", StrOrNull, true),
            ("newContent", Str, true),
            ("isModifying", Bool, false),
            ("diffStat", DiffStat, false),
            ("isBuildFile", Bool, false),
        ],
        "mcp" => &[
            ("serverName", Str, true),
            ("toolName", Str, true),
            ("toolDisplayName", Str, true),
            ("toolArgs", Object, false),
            ("toolDescription", Str, false),
            ("toolParameterSchema", Any, false),
        ],
        "info" => &[("prompt", Str, true), ("urls", Strs, false)],
        "sandbox_expansion" => &[
            ("command", Str, true),
            ("rootCommand", Str, true),
            ("additionalPermissions", Permissions, true),
        ],
        "ask_user" => &[("questions", Questions, true)],
        "exit_plan_mode" => &[("planPath", Str, true)],
        _ => &[],
    }
}

pub(super) const DIFF_STAT_FIELDS: [&str; 8] = [
    "model_added_lines",
    "model_removed_lines",
    "model_added_chars",
    "model_removed_chars",
    "user_added_lines",
    "user_removed_lines",
    "user_added_chars",
    "user_removed_chars",
];

/// Checks `details` against the reference's shape for its `type`.
pub fn check_details(d: &Map<String, Value>) -> Result<(), String> {
    let ty = match d.get("type") {
        Some(Value::String(t)) if DETAIL_TYPES.contains(&t.as_str()) => t.as_str(),
        Some(other) => {
            return Err(format!(
                "details.type must be one of {}, not {}",
                DETAIL_TYPES.join(", "),
                short(other)
            ))
        }
        None => return Err("details needs a \"type\"".into()),
    };
    let common: &[(&str, Field, bool)] = &[
        ("title", Field::Str, true),
        ("systemMessage", Field::Str, false),
    ];
    for &(name, field, required) in common.iter().chain(fields(ty)) {
        let path = format!("details.{name}");
        match d.get(name) {
            None if required => return Err(format!("{path} is required for type {ty:?}")),
            None => {}
            Some(v) => check_field(&path, field, v)?,
        }
    }
    Ok(())
}

fn check_field(path: &str, field: Field, v: &Value) -> Result<(), String> {
    let want = |what: &str| Err(format!("{path} must be {what}, not {}", kind(v)));
    match field {
        Field::Str if !v.is_string() => want("a string"),
        Field::StrOrNull if !(v.is_string() || v.is_null()) => want("a string or null"),
        Field::Bool if !v.is_boolean() => want("a boolean"),
        Field::Object if !v.is_object() => want("an object"),
        Field::Strs => strings(path, v),
        Field::DiffStat => {
            let Some(stat) = v.as_object() else {
                return want("an object");
            };
            for name in DIFF_STAT_FIELDS {
                match stat.get(name) {
                    Some(Value::Number(_)) => {}
                    Some(other) => {
                        return Err(format!(
                            "{path}.{name} must be a number, not {}",
                            kind(other)
                        ))
                    }
                    None => return Err(format!("{path}.{name} is required")),
                }
            }
            Ok(())
        }
        Field::Permissions => {
            let Some(p) = v.as_object() else {
                return want("an object");
            };
            if let Some(fs) = p.get("fileSystem") {
                let Some(fs) = fs.as_object() else {
                    return Err(format!(
                        "{path}.fileSystem must be an object, not {}",
                        kind(fs)
                    ));
                };
                for key in ["read", "write"] {
                    if let Some(list) = fs.get(key) {
                        strings(&format!("{path}.fileSystem.{key}"), list)?;
                    }
                }
            }
            match p.get("network") {
                None | Some(Value::Bool(_)) => Ok(()),
                Some(other) => Err(format!(
                    "{path}.network must be a boolean, not {}",
                    kind(other)
                )),
            }
        }
        Field::Questions => {
            let mut params = Map::new();
            params.insert("questions".into(), v.clone());
            crate::questions::validate(&Value::Object(params))
                .map(drop)
                .map_err(|msg| format!("{path}: {msg}"))
        }
        _ => Ok(()),
    }
}

fn strings(path: &str, v: &Value) -> Result<(), String> {
    let Some(items) = v.as_array() else {
        return Err(format!(
            "{path} must be an array of strings, not {}",
            kind(v)
        ));
    };
    match items.iter().enumerate().find(|(_, s)| !s.is_string()) {
        Some((i, other)) => Err(format!("{path}[{i}] must be a string, not {}", kind(other))),
        None => Ok(()),
    }
}
