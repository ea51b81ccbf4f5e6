//! The tool as MCP clients see it: the reference's `ASK_USER_DEFINITION`
//! (`@google/gemini-cli-core` 0.61.0), kept as data in `ask_user_tool.json` so its description
//! and schema reach `tools/list` exactly as the reference declares them. `tests/mcp` checks that
//! file against the reference package.
//!
//! The name is not the reference's: Gemini CLI 0.61.0 excludes its own `ask_user` in headless
//! (`-p`) and ACP modes, and its exclusion also matches an MCP tool whose bare name is
//! `ask_user` (`ToolRegistry.isActiveTool` compares the qualified name, the class name and the
//! name without the `mcp_<server>_` prefix), so a tool called `ask_user` disappears exactly
//! where a remote answer matters most. [`DEFAULT_NAME`] is hit by no agent's built-in tool or
//! exclusion (Gemini's `ask_user`, Claude Code's `AskUserQuestion`, Codex's
//! `request_user_input`); `--tool-name` chooses another.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;

/// `ASK_USER_DEFINITION.base`, as `JSON.stringify(base, null, 2)` wrote it.
const DEFINITION: &str = include_str!("ask_user_tool.json");

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Definition {
    name: String,
    description: String,
    parameters_json_schema: JsonObject,
}

/// The reference tool's own name, as in the definition file.
const REFERENCE_NAME: &str = "ask_user";

/// The name the tool is served under unless `--tool-name` says otherwise.
pub const DEFAULT_NAME: &str = "ask_person";

/// Checks a `--tool-name`: what every MCP client and model API takes as a function name
/// (Gemini's function declarations are the strictest: a letter or underscore first, then
/// letters, digits, `_`, `.`, `-`, at most 64 in all; MCP clients add a server prefix to that).
pub fn check_name(name: &str) -> Result<String, String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if first_ok && rest_ok && name.len() <= 64 {
        Ok(name.to_owned())
    } else {
        Err(
            "a tool name is 1 to 64 characters: a letter or `_` first, then letters, digits, \
             `_`, `-` or `.`"
                .to_owned(),
        )
    }
}

/// The tool as `tools/list` lists it, under `name`. The schema map keeps the file's key order
/// (serde_json's `preserve_order`), so clients receive the reference's bytes, not a re-sorted
/// copy.
pub fn ask_user(name: &str) -> Tool {
    let def: Definition =
        serde_json::from_str(DEFINITION).expect("ask_user_tool.json is the reference definition");
    debug_assert_eq!(def.name, REFERENCE_NAME);
    Tool::new(
        Cow::Owned(name.to_owned()),
        Cow::Owned(def.description),
        Arc::new(def.parameters_json_schema),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn listed_exactly_as_the_definition_file_under_its_name() {
        let tool = serde_json::to_value(ask_user(DEFAULT_NAME)).unwrap();
        let file: Value = serde_json::from_str(DEFINITION).unwrap();
        assert_eq!(tool["name"], DEFAULT_NAME);
        assert_eq!(file["name"], REFERENCE_NAME);
        assert_eq!(tool["description"], file["description"]);
        // Compared as text: equal maps in another key order would not be the same bytes.
        assert_eq!(
            serde_json::to_string(&tool["inputSchema"]).unwrap(),
            serde_json::to_string(&file["parametersJsonSchema"]).unwrap()
        );
        let keys: Vec<&str> = tool
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["name", "description", "inputSchema"]);
    }

    #[test]
    fn schema_key_order_is_the_reference_order() {
        let tool = ask_user("x");
        let keys: Vec<&str> = tool.input_schema.keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "required", "properties"]);
    }

    #[test]
    fn tool_names() {
        for ok in [DEFAULT_NAME, "ask_user", "_x", "a.b-c_9", &"a".repeat(64)] {
            assert_eq!(check_name(ok).as_deref(), Ok(ok), "{ok}");
        }
        for bad in ["", "9a", "-a", "a b", "a/b", "é", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
