//! The `ask_user` tool as MCP clients see it: the reference's `ASK_USER_DEFINITION`
//! (`@google/gemini-cli-core` 0.61.0), kept as data in `ask_user_tool.json` so its name,
//! description and schema reach `tools/list` exactly as the reference declares them.
//! `tests/mcp` checks that file against the reference package.

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

/// The tool's name, as calls must give it.
pub const NAME: &str = "ask_user";

/// The tool as `tools/list` lists it. The schema map keeps the file's key order (serde_json's
/// `preserve_order`), so clients receive the reference's bytes, not a re-sorted copy.
pub fn ask_user() -> Tool {
    let def: Definition =
        serde_json::from_str(DEFINITION).expect("ask_user_tool.json is the reference definition");
    debug_assert_eq!(def.name, NAME);
    Tool::new(
        Cow::Owned(def.name),
        Cow::Owned(def.description),
        Arc::new(def.parameters_json_schema),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn listed_exactly_as_the_definition_file() {
        let tool = serde_json::to_value(ask_user()).unwrap();
        let file: Value = serde_json::from_str(DEFINITION).unwrap();
        assert_eq!(tool["name"], file["name"]);
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
        let tool = ask_user();
        let keys: Vec<&str> = tool.input_schema.keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "required", "properties"]);
    }
}
