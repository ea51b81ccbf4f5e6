//! Tool names as the reference knows them: its built-in tools, the legacy alias, MCP's
//! `mcp_{server}_{tool}` names, the typo check of the loader, the build files an edit may not
//! touch without a person; and the table mapping other agents' tool names onto them.

use crate::json::JsValue;
use crate::paths;

/// The reference's `ALL_BUILTIN_TOOL_NAMES`, in its order (the typo suggestions depend on it).
pub const ALL_BUILTIN_TOOL_NAMES: &[&str] = &[
    "glob",
    "write_todos",
    "write_file",
    "google_web_search",
    "web_fetch",
    "replace",
    "run_shell_command",
    "grep_search",
    "read_many_files",
    "read_file",
    "list_directory",
    "activate_skill",
    "ask_user",
    "tracker_create_task",
    "tracker_update_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_add_dependency",
    "tracker_visualize",
    "get_internal_docs",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "complete_task",
    "invoke_agent",
    "read_mcp_resource",
    "list_mcp_resources",
];

/// The shell tool's names.
pub const SHELL_TOOL_NAMES: &[&str] = &["run_shell_command", "ShellTool"];

/// The subagent tool, whose `agent_name` argument is matched as one more tool name.
pub const AGENT_TOOL_NAME: &str = "invoke_agent";

/// `TOOL_LEGACY_ALIASES`: old name → current name.
const LEGACY_ALIASES: &[(&str, &str)] = &[("search_file_content", "grep_search")];

/// The reference's `getToolAliases(name)`.
pub fn tool_aliases(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    let canonical = LEGACY_ALIASES
        .iter()
        .find(|(l, _)| *l == name)
        .map_or(name, |(_, c)| *c);
    if !out.iter().any(|n| n == canonical) {
        out.push(canonical.to_string());
    }
    for (legacy, current) in LEGACY_ALIASES {
        if *current == canonical && !out.iter().any(|n| n == legacy) {
            out.push((*legacy).to_string());
        }
    }
    out
}

/// `parseMcpToolName`: `mcp_{server}_{tool}` with a server free of `_`.
pub fn parse_mcp_tool_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("mcp_")?;
    let us = rest.find('_')?;
    let (server, tool) = (&rest[..us], &rest[us + 1..]);
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some((server, tool))
}

/// `formatMcpToolName(server, tool)`.
pub fn format_mcp_tool_name(server: &str, tool: Option<&str>) -> String {
    match (server, tool) {
        ("*", None | Some("*")) => "mcp_*".into(),
        ("*", Some(t)) => format!("mcp_*_{t}"),
        (s, None | Some("*")) => format!("mcp_{s}_*"),
        (s, Some(t)) => format!("mcp_{s}_{t}"),
    }
}

fn slug(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

/// `isValidToolName(name, {allowWildcards: true})`.
pub fn is_valid_tool_name(name: &str) -> bool {
    if ALL_BUILTIN_TOOL_NAMES.contains(&name)
        || LEGACY_ALIASES.iter().any(|(l, _)| *l == name)
        || name.starts_with("discovered_tool_")
        || name == "*"
    {
        return true;
    }
    if name.starts_with("mcp_") {
        if name == "mcp_*" {
            return true;
        }
        if name.starts_with("mcp__") {
            return false;
        }
        if let Some((server, tool)) = parse_mcp_tool_name(name) {
            if !slug(server) {
                return false;
            }
            if tool == "*" {
                return true;
            }
            if tool.chars().all(|c| c == '_') {
                return false;
            }
            return slug(tool);
        }
        return false;
    }
    false
}

/// `fast-levenshtein`'s distance, over UTF-16 units.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<u16> = a.encode_utf16().collect();
    let b: Vec<u16> = b.encode_utf16().collect();
    if a.is_empty() {
        return b.len();
    }
    if b.is_empty() {
        return a.len();
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The loader's `validateToolName`: a warning for a likely typo of a built-in tool.
pub fn tool_name_warning(name: &str, rule_index: usize) -> Option<String> {
    if name.contains("__") {
        return Some(format!(
            "Rule #{}: The \"__\" syntax for MCP tools is strictly deprecated. Please use the 'mcpName = \"...\"' property or the 'mcp_server_tool' format instead.",
            rule_index + 1
        ));
    }
    if is_valid_tool_name(name) {
        return None;
    }
    let mut scored: Vec<(usize, &str)> = ALL_BUILTIN_TOOL_NAMES
        .iter()
        .map(|n| (levenshtein(name, n), *n))
        .collect();
    let min = scored.iter().map(|s| s.0).min().unwrap_or(usize::MAX);
    if min > 3 {
        return None;
    }
    scored.sort_by_key(|s| s.0);
    let top: Vec<String> = scored
        .iter()
        .take(3)
        .map(|(_, n)| format!("\"{n}\""))
        .collect();
    Some(format!(
        "Rule #{}: Unrecognized tool name \"{name}\". Did you mean one of: {}?",
        rule_index + 1,
        top.join(", ")
    ))
}

const EXACT_BUILD_FILENAMES: &[&str] = &[
    "BUILD",
    "BUILD.bazel",
    "WORKSPACE",
    "WORKSPACE.bazel",
    "MODULE.bazel",
    ".bazelrc",
    ".blazerc",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "CMakeLists.txt",
    "package.json",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lockb",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "go.mod",
    "go.sum",
    "Cargo.toml",
    "Cargo.lock",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "Dockerfile",
    "Containerfile",
];

/// The reference's `isBuildFile` (resolved from `cwd`, following symlinks as it does).
pub fn is_build_file(cwd: &str, file_path: &str) -> bool {
    if file_path.is_empty() {
        return false;
    }
    let clean = file_path.replace('\0', "");
    let normalized = clean.replace('\\', "/");
    let resolved = paths::resolve_to_real_path(cwd, &normalized)
        .unwrap_or_else(|| paths::resolve(cwd, &normalized));
    let base = paths::basename(&resolved);
    if EXACT_BUILD_FILENAMES.contains(&base)
        || base.starts_with("Dockerfile.")
        || base.starts_with("Containerfile.")
    {
        return true;
    }
    let ext = paths::extname(base).to_lowercase();
    [".bzl", ".bazel", ".bzlmod", ".mk", ".cmake"].contains(&ext.as_str())
}

/// The reference's `extractFilePathFromArgs`: `file_path ?? path ?? filePath ?? file`, if a string.
pub fn extract_file_path(args: Option<&JsValue>) -> Option<String> {
    let args = args?;
    if !matches!(args, JsValue::Object(_) | JsValue::Array(_)) {
        return None;
    }
    for key in ["file_path", "path", "filePath", "file"] {
        match args.prop(key) {
            None | Some(JsValue::Null) => continue,
            Some(v) => return v.as_string(),
        }
    }
    None
}

/// Whether a tool edits files, by the reference's test (its names or an edit keyword in them).
pub fn is_file_edit_tool(name: &str) -> bool {
    if name == "replace" || name == "write_file" {
        return true;
    }
    const KEYWORDS: [&str; 8] = [
        "write", "edit", "replace", "patch", "update", "create", "append", "save",
    ];
    name.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .any(|t| KEYWORDS.contains(&t))
}

/// An agent's name for a tool, mapped onto the reference's (the hooks call this before asking).
///
/// | agent | native name | reference name |
/// |---|---|---|
/// | Claude Code | `Bash` | `run_shell_command` |
/// | Claude Code | `Edit`, `MultiEdit`, `NotebookEdit` | `replace` |
/// | Claude Code | `Write` | `write_file` |
/// | Claude Code | `Read` | `read_file` |
/// | Claude Code | `Glob` | `glob` |
/// | Claude Code | `Grep` | `grep_search` |
/// | Claude Code | `LS` | `list_directory` |
/// | Claude Code | `WebFetch` | `web_fetch` |
/// | Claude Code | `WebSearch` | `google_web_search` |
/// | Claude Code | `TodoWrite` | `write_todos` |
/// | Claude Code | `mcp__{server}__{tool}` | `mcp_{server}_{tool}` |
/// | Codex | `Bash` (its `PermissionRequest` hook) | `run_shell_command` |
/// | Codex | `exec_command`, `shell`, `local_shell` | `run_shell_command` |
/// | Codex | `apply_patch` | `replace` |
/// | Codex | `web_search` | `google_web_search` |
/// | Codex | `mcp__{server}__{tool}`, `{server}.{tool}` (MCP) | `mcp_{server}_{tool}` |
/// | ACP | kind `execute` | `run_shell_command` |
/// | ACP | kind `edit` | `replace` |
/// | ACP | kind `delete`, `move` | `replace` |
/// | ACP | kind `read` | `read_file` |
/// | ACP | kind `search` | `grep_search` |
/// | ACP | kind `fetch` | `web_fetch` |
///
/// Anything else keeps its own name, so a rule can still name an agent-specific tool.
pub const TOOL_NAME_MAP: &[(Agent, &str, &str)] = &[
    (Agent::ClaudeCode, "Bash", "run_shell_command"),
    (Agent::ClaudeCode, "Edit", "replace"),
    (Agent::ClaudeCode, "MultiEdit", "replace"),
    (Agent::ClaudeCode, "NotebookEdit", "replace"),
    (Agent::ClaudeCode, "Write", "write_file"),
    (Agent::ClaudeCode, "Read", "read_file"),
    (Agent::ClaudeCode, "Glob", "glob"),
    (Agent::ClaudeCode, "Grep", "grep_search"),
    (Agent::ClaudeCode, "LS", "list_directory"),
    (Agent::ClaudeCode, "WebFetch", "web_fetch"),
    (Agent::ClaudeCode, "WebSearch", "google_web_search"),
    (Agent::ClaudeCode, "TodoWrite", "write_todos"),
    (Agent::Codex, "Bash", "run_shell_command"),
    (Agent::Codex, "exec_command", "run_shell_command"),
    (Agent::Codex, "shell", "run_shell_command"),
    (Agent::Codex, "local_shell", "run_shell_command"),
    (Agent::Codex, "apply_patch", "replace"),
    (Agent::Codex, "web_search", "google_web_search"),
    (Agent::Acp, "execute", "run_shell_command"),
    (Agent::Acp, "edit", "replace"),
    (Agent::Acp, "delete", "replace"),
    (Agent::Acp, "move", "replace"),
    (Agent::Acp, "read", "read_file"),
    (Agent::Acp, "search", "grep_search"),
    (Agent::Acp, "fetch", "web_fetch"),
];

/// The agents whose tool names are mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Gemini CLI: its names are the reference's.
    Gemini,
    /// Claude Code's `PreToolUse` hook.
    ClaudeCode,
    /// OpenAI Codex's approval requests.
    Codex,
    /// An Agent Client Protocol `session/request_permission` (by the tool call's `kind`).
    Acp,
}

/// The reference's name (and the MCP server, if any) for an agent's tool.
pub fn map_tool_name(agent: Agent, native: &str) -> (String, Option<String>) {
    if let Some((_, _, mapped)) = TOOL_NAME_MAP
        .iter()
        .find(|(a, n, _)| *a == agent && *n == native)
    {
        return ((*mapped).to_string(), None);
    }
    if matches!(agent, Agent::ClaudeCode | Agent::Codex) {
        // `mcp__{server}__{tool}`, as both name MCP tools in their hooks.
        if let Some(rest) = native.strip_prefix("mcp__") {
            if let Some(i) = rest.find("__") {
                let (server, tool) = (&rest[..i], &rest[i + 2..]);
                if !server.is_empty() && !tool.is_empty() {
                    return (
                        format_mcp_tool_name(server, Some(tool)),
                        Some(server.to_string()),
                    );
                }
            }
        }
    }
    match agent {
        Agent::Codex => {
            if let Some((server, tool)) = native.split_once('.') {
                if !server.is_empty() && !tool.is_empty() {
                    return (
                        format_mcp_tool_name(server, Some(tool)),
                        Some(server.to_string()),
                    );
                }
            }
        }
        Agent::Gemini | Agent::ClaudeCode | Agent::Acp => {}
    }
    (native.to_string(), None)
}

/// The agent a request's `context.agent` names (`name/version`, or the name alone), for the
/// agents whose tool names are mapped: `claude-code`, `codex`, `acp`; anything else is read
/// as Gemini CLI (its names are the reference's, nothing is mapped).
pub fn agent_of_context(agent: Option<&str>) -> Agent {
    let name = agent
        .map(|a| a.split('/').next().unwrap_or(a).trim().to_ascii_lowercase())
        .unwrap_or_default();
    match name.as_str() {
        "claude-code" | "claude" => Agent::ClaudeCode,
        "codex" | "codex-cli" => Agent::Codex,
        "acp" => Agent::Acp,
        _ => Agent::Gemini,
    }
}

/// An agent's tool call as the reference's: its name (by [`map_tool_name`]), its MCP server,
/// and its arguments renamed to the reference tool's (`Glob`'s `path` is `glob`'s `dir_path`,
/// Codex's argv `command` is one command line, and so on), so a rule written for Gemini CLI's
/// tools decides the same call from any agent. `None` when nothing is mapped (the call is
/// already in the reference's terms, or the tool is the agent's own).
pub fn map_call(
    agent: Agent,
    name: &str,
    args: &serde_json::Value,
) -> Option<(String, serde_json::Value, Option<String>)> {
    use serde_json::{Map, Value};
    if agent == Agent::Gemini {
        return None;
    }
    let (mapped, server) = map_tool_name(agent, name);
    if mapped == name && server.is_none() {
        return None;
    }
    let empty = Map::new();
    let a = args.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    let copy = |from: &str, to: &str, out: &mut Map<String, Value>| {
        if let Some(v) = a.get(from).filter(|v| !v.is_null()) {
            out.insert(to.to_string(), v.clone());
        }
    };
    match (agent, mapped.as_str()) {
        (Agent::ClaudeCode | Agent::Codex, "run_shell_command") => {
            match a.get("command").or_else(|| a.get("cmd")) {
                Some(Value::Array(argv)) => {
                    out.insert("command".into(), Value::String(argv_command(argv)));
                }
                Some(v) => {
                    out.insert("command".into(), v.clone());
                }
                None => {}
            }
            copy("description", "description", &mut out);
            copy("workdir", "dir_path", &mut out);
            copy("run_in_background", "is_background", &mut out);
        }
        (Agent::ClaudeCode, "replace") if name == "NotebookEdit" => {
            copy("notebook_path", "file_path", &mut out);
            copy("new_source", "new_string", &mut out);
        }
        (Agent::ClaudeCode, "replace") => {
            copy("file_path", "file_path", &mut out);
            copy("old_string", "old_string", &mut out);
            copy("new_string", "new_string", &mut out);
        }
        (Agent::Codex, "replace") => {
            // apply_patch: the first file the patch touches.
            let patch = a
                .get("input")
                .or_else(|| a.get("patch"))
                .and_then(Value::as_str);
            if let Some(path) = patch.and_then(patch_file) {
                out.insert("file_path".into(), Value::String(path));
            }
        }
        (Agent::ClaudeCode, "write_file") => {
            copy("file_path", "file_path", &mut out);
            copy("content", "content", &mut out);
        }
        (Agent::ClaudeCode, "read_file") => {
            copy("file_path", "file_path", &mut out);
            copy("offset", "offset", &mut out);
            copy("limit", "limit", &mut out);
        }
        (Agent::ClaudeCode, "glob") => {
            copy("pattern", "pattern", &mut out);
            copy("path", "dir_path", &mut out);
        }
        (Agent::ClaudeCode, "grep_search") => {
            copy("pattern", "pattern", &mut out);
            copy("path", "dir_path", &mut out);
            copy("glob", "include", &mut out);
        }
        (Agent::ClaudeCode, "list_directory") => copy("path", "dir_path", &mut out),
        (Agent::ClaudeCode, "web_fetch") => {
            // The reference's web_fetch takes one prompt holding the URL.
            let url = a.get("url").and_then(Value::as_str).unwrap_or_default();
            let prompt = a.get("prompt").and_then(Value::as_str).unwrap_or_default();
            let text = [url, prompt]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            out.insert("prompt".into(), Value::String(text));
        }
        (_, "google_web_search") => copy("query", "query", &mut out),
        (Agent::ClaudeCode, "write_todos") => copy("todos", "todos", &mut out),
        // MCP tools and ACP kinds keep their arguments.
        _ => return Some((mapped, args.clone(), server)),
    }
    Some((mapped, Value::Object(out), server))
}

/// Codex's argv as one command line: `["bash", "-lc", SCRIPT]` is the script; anything else
/// is its words, quoted where a shell would need it.
fn argv_command(argv: &[serde_json::Value]) -> String {
    let words: Vec<&str> = argv.iter().filter_map(|v| v.as_str()).collect();
    if let [sh, flag, script] = words.as_slice() {
        let shell = sh.rsplit('/').next().unwrap_or(sh);
        if matches!(shell, "bash" | "sh" | "zsh") && matches!(*flag, "-c" | "-lc") {
            return (*script).to_string();
        }
    }
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                (*w).to_string()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first file a Codex patch adds, updates or deletes.
fn patch_file(patch: &str) -> Option<String> {
    patch.lines().find_map(|l| {
        ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .map(|p| p.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            tool_aliases("grep_search"),
            ["grep_search", "search_file_content"]
        );
        assert_eq!(
            tool_aliases("search_file_content"),
            ["search_file_content", "grep_search"]
        );
        assert_eq!(
            parse_mcp_tool_name("mcp_my_server_tool"),
            Some(("my", "server_tool"))
        );
        assert!(tool_name_warning("read_fiel", 0)
            .unwrap()
            .contains("\"read_file\", \"write_file\", \"replace\""));
        assert!(tool_name_warning("rm", 0).is_none());
        assert!(is_build_file("/w", "sub/Cargo.toml"));
        assert!(is_build_file("/w", "x.BZL"));
        assert!(!is_build_file("/w", "src/lib.rs"));
        assert_eq!(
            map_tool_name(Agent::ClaudeCode, "mcp__github__create_issue").0,
            "mcp_github_create_issue"
        );
        assert_eq!(
            map_tool_name(Agent::ClaudeCode, "Bash").0,
            "run_shell_command"
        );
    }
}
