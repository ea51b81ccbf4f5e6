//! What a person is shown for an agent's tool call: the reference's
//! `SerializableConfirmationDetails` (`exec` for a shell command, `edit` for a file write or
//! edit with its unified diff, `mcp` for an MCP tool, `info` for a web fetch), built from the
//! tool's name and arguments as each agent names them. A tool this does not know gets no
//! details: UIs then show the tool's name and arguments as they are.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// A file larger than this is not read for the diff: the request must fit in one frame, and a
/// person does not review a megabyte diff on a phone. The call is still asked, without details.
const MAX_DIFF_FILE_BYTES: u64 = 256 * 1024;

/// The tool call as the agent made it, in the agent's own names.
pub struct ToolCall<'a> {
    pub name: &'a str,
    pub args: &'a Map<String, Value>,
    /// The agent's working directory: relative paths are relative to it.
    pub cwd: &'a Path,
    /// For an MCP tool: the server's and the tool's own names, when the agent says them.
    pub mcp: Option<(String, String)>,
}

/// The details for `call`, if its kind is known, and a one-line title for UIs' lists.
pub fn details(call: &ToolCall<'_>) -> (Option<Value>, String) {
    let str_arg = |k: &str| call.args.get(k).and_then(Value::as_str);
    let shell = matches!(
        call.name,
        "run_shell_command" | "Bash" | "shell" | "exec_command"
    );
    if shell {
        if let Some(command) = command_arg(call.args) {
            let roots = root_commands(&command);
            let title = format!("Run `{}`", first_line(&command));
            let details = json!({
                "type": "exec",
                "title": "Confirm Shell Command",
                "command": command,
                "rootCommand": roots.join(", "),
                "rootCommands": roots,
            });
            return (Some(details), title);
        }
    }
    if let Some((server, tool)) = &call.mcp {
        let mut d = json!({
            "type": "mcp",
            "title": "Confirm MCP Tool Execution",
            "serverName": server,
            "toolName": tool,
            "toolDisplayName": tool,
            "toolArgs": call.args,
        });
        if let Some(obj) = d.as_object_mut() {
            obj.retain(|_, v| !v.is_null());
        }
        return (Some(d), format!("MCP tool {tool} ({server})"));
    }
    match call.name {
        // Gemini CLI's write_file and Claude Code's Write: the whole new content.
        "write_file" | "Write" => {
            if let (Some(path), Some(content)) = (
                str_arg("file_path").or_else(|| str_arg("path")),
                str_arg("content"),
            ) {
                return edit(call.cwd, path, "Confirm Write", |_| {
                    Some(content.to_owned())
                });
            }
        }
        // Gemini CLI's replace and Claude Code's Edit: one string replaced by another.
        "replace" | "Edit" => {
            if let (Some(path), Some(old), Some(new)) = (
                str_arg("file_path"),
                str_arg("old_string"),
                str_arg("new_string"),
            ) {
                let all = call.args.get("replace_all").and_then(Value::as_bool) == Some(true)
                    || call.args.get("allow_multiple").and_then(Value::as_bool) == Some(true);
                return edit(call.cwd, path, "Confirm Edit", |original| {
                    let original = original.unwrap_or_default();
                    if old.is_empty() {
                        // Gemini's replace creates a file from an empty old_string.
                        return Some(new.to_owned());
                    }
                    original.contains(old).then(|| {
                        if all {
                            original.replace(old, new)
                        } else {
                            original.replacen(old, new, 1)
                        }
                    })
                });
            }
        }
        "web_fetch" | "WebFetch" => {
            let prompt = str_arg("prompt").unwrap_or_default();
            let mut urls: Vec<String> = str_arg("url").map(str::to_owned).into_iter().collect();
            urls.extend(
                urls_in(prompt)
                    .filter(|u| !urls.contains(u))
                    .collect::<Vec<_>>(),
            );
            let shown = if prompt.is_empty() {
                urls.join("\n")
            } else {
                prompt.to_owned()
            };
            let title = match urls.first() {
                Some(u) => format!("Fetch {u}"),
                None => "Fetch a web page".to_owned(),
            };
            return (
                Some(json!({
                    "type": "info",
                    "title": "Confirm Web Fetch",
                    "prompt": shown,
                    "urls": urls,
                })),
                title,
            );
        }
        _ => {}
    }
    (None, format!("Use {}", call.name))
}

/// The command of a shell tool call: a string, or (Codex) an argv array joined as a shell
/// would show it.
fn command_arg(args: &Map<String, Value>) -> Option<String> {
    match args.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(argv) => {
            let words: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
            Some(
                words?
                    .into_iter()
                    .map(shell_quote)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }
        _ => None,
    }
}

/// `word` as a POSIX shell would need it written: as is when it has only safe characters,
/// else in single quotes.
fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn edit(
    cwd: &Path,
    path: &str,
    verb: &str,
    new_content: impl FnOnce(Option<String>) -> Option<String>,
) -> (Option<Value>, String) {
    let file_path = absolute(cwd, path);
    let file_name = file_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_owned());
    let title = format!("{verb}: {path}");
    let original = match std::fs::metadata(&file_path) {
        Ok(m) if m.len() > MAX_DIFF_FILE_BYTES => return (None, title),
        Ok(_) => match std::fs::read_to_string(&file_path) {
            Ok(s) => Some(s),
            // Binary or unreadable: nothing a diff could show.
            Err(_) => return (None, title),
        },
        Err(_) => None,
    };
    let Some(new) = new_content(original.clone()) else {
        return (None, title);
    };
    let old_text = original.as_deref().unwrap_or_default();
    let diff = similar::TextDiff::from_lines(old_text, &new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{file_name}\tCurrent"),
            &format!("{file_name}\tProposed"),
        )
        .to_string();
    let details = json!({
        "type": "edit",
        "title": title,
        "fileName": file_name,
        "filePath": file_path.to_string_lossy(),
        "fileDiff": diff,
        "originalContent": original,
        "newContent": new,
        "isModifying": false,
    });
    (Some(details), title)
}

fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

fn urls_in(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')'))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| w.trim_end_matches(['.', ',', ';']).to_owned())
}

/// The commands a shell line runs, in order, without duplicates: the first word of each
/// pipeline stage and `&&`/`||`/`;`/`&`/newline-separated command, skipping leading
/// `VAR=value` assignments. Quotes are honoured; this is for showing a person what runs, not
/// a security boundary (the person reads the whole command too).
pub fn root_commands(command: &str) -> Vec<String> {
    let mut roots: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut at_start = true;
    let mut quote: Option<char> = None;
    let mut chars = command.chars().peekable();
    let finish_word = |word: &mut String, at_start: &mut bool, roots: &mut Vec<String>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        if *at_start {
            let assignment = w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
            if !assignment {
                *at_start = false;
                if !roots.contains(&w) {
                    roots.push(w);
                }
            }
        }
    };
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => {
                    if let Some(n) = chars.next() {
                        word.push(n);
                    }
                }
                '|' | '&' | ';' | '\n' | '(' | ')' => {
                    finish_word(&mut word, &mut at_start, &mut roots);
                    at_start = true;
                }
                c if c.is_whitespace() => finish_word(&mut word, &mut at_start, &mut roots),
                c => word.push(c),
            },
        }
    }
    finish_word(&mut word, &mut at_start, &mut roots);
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(name: &'a str, args: &'a Map<String, Value>, cwd: &'a Path) -> ToolCall<'a> {
        ToolCall {
            name,
            args,
            cwd,
            mcp: None,
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn roots_of_shell_lines() {
        assert_eq!(root_commands("touch created.txt"), ["touch"]);
        assert_eq!(
            root_commands("rm -rf build && cargo build | tee log; FOO=1 BAR=x make -j2 &"),
            ["rm", "cargo", "tee", "make"]
        );
        assert_eq!(root_commands("echo 'a && b' \"c | d\""), ["echo"]);
        assert_eq!(root_commands("git status\ngit diff"), ["git"]);
        assert_eq!(root_commands("(cd x && ls)"), ["cd", "ls"]);
        assert!(root_commands("").is_empty());
    }

    #[test]
    fn a_shell_command_is_exec() {
        let cwd = Path::new("/w");
        let args = obj(json!({"command": "rm -rf build && cargo build", "description": "x"}));
        for name in ["run_shell_command", "Bash"] {
            let (d, title) = details(&call(name, &args, cwd));
            assert_eq!(
                d.unwrap(),
                json!({"type": "exec", "title": "Confirm Shell Command",
                       "command": "rm -rf build && cargo build", "rootCommand": "rm, cargo",
                       "rootCommands": ["rm", "cargo"]})
            );
            assert_eq!(title, "Run `rm -rf build && cargo build`");
        }
        // Codex's argv form.
        let args = obj(json!({"command": ["bash", "-lc", "ls -la"]}));
        let (d, _) = details(&call("Bash", &args, cwd));
        assert_eq!(d.unwrap()["command"], "bash -lc 'ls -la'");
    }

    #[test]
    fn a_write_is_an_edit_with_a_diff() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let args = obj(json!({"file_path": "a.txt", "content": "one\nTWO\n"}));
        let (d, title) = details(&call("write_file", &args, dir.path()));
        let d = d.unwrap();
        assert_eq!(title, "Confirm Write: a.txt");
        assert_eq!(d["type"], "edit");
        assert_eq!(d["fileName"], "a.txt");
        assert_eq!(d["filePath"], dir.path().join("a.txt").to_str().unwrap());
        assert_eq!(d["originalContent"], "one\ntwo\n");
        assert_eq!(d["newContent"], "one\nTWO\n");
        assert_eq!(
            d["fileDiff"],
            "--- a.txt\tCurrent\n+++ a.txt\tProposed\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
        );
        // A new file: originalContent null.
        let args = obj(json!({"file_path": "new.txt", "content": "x\n"}));
        let (d, _) = details(&call("Write", &args, dir.path()));
        assert_eq!(d.unwrap()["originalContent"], Value::Null);
    }

    #[test]
    fn an_edit_replaces_once_or_all() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.rs");
        std::fs::write(&f, "a a a\n").unwrap();
        let path = f.to_str().unwrap();
        let args = obj(json!({"file_path": path, "old_string": "a", "new_string": "b"}));
        assert_eq!(
            details(&call("Edit", &args, dir.path())).0.unwrap()["newContent"],
            "b a a\n"
        );
        let args = obj(
            json!({"file_path": path, "old_string": "a", "new_string": "b", "replace_all": true}),
        );
        assert_eq!(
            details(&call("Edit", &args, dir.path())).0.unwrap()["newContent"],
            "b b b\n"
        );
        // Nothing to replace: no diff to show, the UI shows the arguments.
        let args = obj(json!({"file_path": path, "old_string": "zz", "new_string": "b"}));
        assert!(details(&call("replace", &args, dir.path())).0.is_none());
    }

    #[test]
    fn mcp_tools_and_fetches() {
        let cwd = Path::new("/w");
        let args = obj(json!({"q": 1}));
        let c = ToolCall {
            name: "mcp__github__search",
            args: &args,
            cwd,
            mcp: Some(("github".into(), "search".into())),
        };
        let (d, title) = details(&c);
        assert_eq!(
            d.unwrap(),
            json!({"type": "mcp", "title": "Confirm MCP Tool Execution", "serverName": "github",
                   "toolName": "search", "toolDisplayName": "search", "toolArgs": {"q": 1}})
        );
        assert_eq!(title, "MCP tool search (github)");
        let args = obj(json!({"prompt": "Summarize https://example.com/a."}));
        let (d, _) = details(&call("web_fetch", &args, cwd));
        assert_eq!(d.unwrap()["urls"], json!(["https://example.com/a"]));
        let (d, t) = details(&call("read_file", &args, cwd));
        assert!(d.is_none());
        assert_eq!(t, "Use read_file");
    }
}
