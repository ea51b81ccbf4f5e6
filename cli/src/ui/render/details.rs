//! What an approval asks to do, laid out per kind of Gemini CLI core's
//! `SerializableConfirmationDetails` so a person decides fast: `exec` the command with its root
//! commands highlighted and where it runs; `edit` the file and a coloured unified diff; `mcp`
//! server, tool and arguments; `info` the prompt and its URLs; `sandbox_expansion` the command
//! and the permissions it wants; `ask_user` the questions; `exit_plan_mode` the plan. Without
//! details (or of a kind this UI does not know) the tool call itself. Every string is bus text:
//! it is sanitized by the wrapping helpers before it is laid out.

use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use serde_json::{Map, Value};

use super::text::{chop, wrap};
use super::{ACCENT, BAD, DIM, GOOD, WARN};
use askbus::protocol::UiApproval;

/// The lines describing `a`, `width` columns wide; `cwd` is where the agent runs (its context).
pub fn lines(a: &UiApproval, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let d = a.details.as_ref().and_then(Value::as_object);
    let s = |k: &str| d.and_then(|d| d.get(k)).and_then(Value::as_str);
    let cwd = a.context.as_ref().and_then(|c| c.cwd.as_deref());
    match s("type") {
        Some("exec") => {
            let roots = root_names(d.expect("typed details"));
            command(&mut out, s("command").unwrap_or(""), &roots, width);
            if let Some(cwd) = cwd {
                labelled(&mut out, "cwd", cwd, Style::new().fg(DIM), width);
            }
            let list = |k: &str| strings(d.and_then(|d| d.get(k)));
            let commands = list("commands");
            if commands.len() > 1 {
                out.push(Line::styled("Commands:", Style::new().fg(DIM)));
                for c in commands {
                    out.extend(chop(
                        &[("  • ", Style::new().fg(DIM)), (&c, Style::new())],
                        width,
                        4,
                    ));
                }
            }
            let flags = list("untrustedFlags");
            if !flags.is_empty() {
                warning(
                    &mut out,
                    &format!("Untrusted flags: {}", flags.join(" ")),
                    width,
                );
            }
            let builds = list("modifiedBuildFiles");
            if !builds.is_empty() {
                warning(
                    &mut out,
                    &format!("Modifies build files: {}", builds.join(", ")),
                    width,
                );
            }
        }
        Some("sandbox_expansion") => {
            let d = d.expect("typed details");
            command(&mut out, s("command").unwrap_or(""), &root_names(d), width);
            if let Some(cwd) = cwd {
                labelled(&mut out, "cwd", cwd, Style::new().fg(DIM), width);
            }
            out.push(Line::styled(
                "Asks the sandbox for:",
                Style::new().fg(WARN).bold(),
            ));
            let perms = d.get("additionalPermissions");
            let fs = perms.and_then(|p| p.get("fileSystem"));
            for (k, label) in [("read", "read"), ("write", "write")] {
                let paths = strings(fs.and_then(|f| f.get(k)));
                if !paths.is_empty() {
                    labelled(
                        &mut out,
                        &format!("  {label}"),
                        &paths.join(", "),
                        Style::new(),
                        width,
                    );
                }
            }
            if perms
                .and_then(|p| p.get("network"))
                .and_then(Value::as_bool)
                == Some(true)
            {
                out.push(Line::raw("  network access"));
            }
        }
        Some("edit") => edit(&mut out, d.expect("typed details"), width),
        Some("mcp") => {
            let d = d.expect("typed details");
            labelled(
                &mut out,
                "Server",
                s("serverName").unwrap_or(""),
                Style::new().bold(),
                width,
            );
            let name = s("toolName").unwrap_or("");
            let shown = match s("toolDisplayName") {
                Some(dn) if !dn.is_empty() && dn != name => format!("{dn} ({name})"),
                _ => name.to_owned(),
            };
            labelled(
                &mut out,
                "Tool",
                &shown,
                Style::new().fg(ACCENT).bold(),
                width,
            );
            annotations(&mut out, a.tool_annotations.as_ref(), width);
            if let Some(desc) = s("toolDescription").filter(|t| !t.is_empty()) {
                for l in wrap(desc, width) {
                    out.push(Line::styled(l, Style::new().fg(DIM)));
                }
            }
            match d.get("toolArgs") {
                Some(args) => json_block(&mut out, "Arguments:", args, width),
                None => out.push(Line::styled("(no arguments)", Style::new().fg(DIM))),
            }
        }
        Some("info") => {
            for l in wrap(s("prompt").unwrap_or(""), width) {
                out.push(Line::raw(l));
            }
            let urls = strings(d.and_then(|d| d.get("urls")));
            if !urls.is_empty() {
                out.push(Line::raw(""));
                out.push(Line::styled("URLs:", Style::new().fg(DIM)));
                for u in urls {
                    let link = Style::new().fg(ACCENT).add_modifier(Modifier::UNDERLINED);
                    out.extend(chop(
                        &[("  • ", Style::new().fg(DIM)), (&u, link)],
                        width,
                        4,
                    ));
                }
            }
        }
        Some("ask_user") => {
            let qs = d
                .and_then(|d| d.get("questions"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            out.push(Line::styled(
                format!("Asks you {} question{}:", qs.len(), plural(qs.len())),
                Style::new().fg(DIM),
            ));
            for (i, q) in qs.iter().enumerate() {
                let get = |k: &str| q.get(k).and_then(Value::as_str).unwrap_or("");
                let head = match get("header") {
                    "" => format!("{}. ", i + 1),
                    h => format!("{}. [{h}] ", i + 1),
                };
                for l in wrap(&format!("{head}{}", get("question")), width) {
                    out.push(Line::raw(l));
                }
                for o in q
                    .get("options")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let label = o.get("label").and_then(Value::as_str).unwrap_or("");
                    out.extend(chop(
                        &[("   – ", Style::new().fg(DIM)), (label, Style::new())],
                        width,
                        5,
                    ));
                }
            }
        }
        Some("exit_plan_mode") => {
            out.push(Line::raw(
                "The agent is done planning and wants to start work.",
            ));
            labelled(
                &mut out,
                "Plan",
                s("planPath").unwrap_or(""),
                Style::new().bold(),
                width,
            );
        }
        // A kind newer than this UI (the daemon checks the known ones): everything it holds.
        Some(_) => {
            let mut rest: Map<String, Value> = d.cloned().unwrap_or_default();
            for k in ["type", "title", "systemMessage"] {
                rest.remove(k);
            }
            tool_call(&mut out, a, width);
            json_block(&mut out, "Details:", &Value::Object(rest), width);
        }
        None => tool_call(&mut out, a, width),
    }
    out
}

/// The root command names to highlight: `rootCommands`, else `rootCommand` ("rm, cargo").
fn root_names(d: &Map<String, Value>) -> Vec<String> {
    let roots = strings(d.get("rootCommands"));
    if !roots.is_empty() {
        return roots;
    }
    d.get("rootCommand")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split(',')
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// "Label: value", the value wrapped under itself.
fn labelled(out: &mut Vec<Line<'static>>, label: &str, value: &str, style: Style, width: usize) {
    let lead = format!("{label}: ");
    let indent = lead.chars().count();
    out.extend(chop(
        &[(&lead, Style::new().fg(DIM)), (value, style)],
        width,
        indent,
    ));
}

fn warning(out: &mut Vec<Line<'static>>, text: &str, width: usize) {
    for l in wrap(&format!("⚠ {text}"), width) {
        out.push(Line::styled(l, Style::new().fg(WARN)));
    }
}

/// `$ command`, each line of it, with the root commands in bold colour.
fn command(out: &mut Vec<Line<'static>>, cmd: &str, roots: &[String], width: usize) {
    let plain = Style::new().bold();
    let root = Style::new().fg(Color::Yellow).bold().underlined();
    for (n, line) in cmd.split('\n').enumerate() {
        let mut pieces: Vec<(&str, Style)> =
            vec![(if n == 0 { "$ " } else { "  " }, Style::new().fg(DIM))];
        let mut at = 0;
        for (start, end) in root_ranges(line, roots) {
            pieces.push((&line[at..start], plain));
            pieces.push((&line[start..end], root));
            at = end;
        }
        pieces.push((&line[at..], plain));
        out.extend(chop(&pieces, width, 2));
    }
}

/// Byte ranges of `line` where a command word names one of `roots` (its basename): words in
/// command position, after the start, a `;`, `&`, `|`, `(`, a backquote or `$(`, skipping
/// `VAR=value` assignments and `sudo`/`env`/`time`-style prefixes.
pub fn root_ranges(line: &str, roots: &[String]) -> Vec<(usize, usize)> {
    const PREFIXES: [&str; 12] = [
        "sudo", "env", "time", "nohup", "exec", "command", "nice", "then", "do", "else", "if", "!",
    ];
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut at_command = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if matches!(c, b';' | b'&' | b'|' | b'(' | b')' | b'`' | b'{' | b'}') {
            at_command = c != b')' && c != b'}';
            i += 1;
            continue;
        }
        if c == b'$' && bytes.get(i + 1) == Some(&b'(') {
            at_command = true;
            i += 2;
            continue;
        }
        // A word, quotes kept whole.
        let start = i;
        let mut quote = None;
        while i < bytes.len() {
            let b = bytes[i];
            match quote {
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None if b == b'\'' || b == b'"' => quote = Some(b),
                None if b.is_ascii_whitespace()
                    || matches!(b, b';' | b'&' | b'|' | b'(' | b')' | b'`') =>
                {
                    break
                }
                None => {}
            }
            i += 1;
        }
        let word = &line[start..i];
        if !at_command {
            continue;
        }
        let assignment = word.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if assignment || PREFIXES.contains(&word) {
            if roots.iter().any(|r| r == word) {
                out.push((start, i));
            }
            continue;
        }
        let base = word
            .trim_matches(['\'', '"'])
            .rsplit('/')
            .next()
            .unwrap_or(word);
        if roots.iter().any(|r| r == base) {
            out.push((start, i));
        }
        at_command = false;
    }
    out
}

fn edit(out: &mut Vec<Line<'static>>, d: &Map<String, Value>, width: usize) {
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
    let diff = s("fileDiff");
    let new_file = d.get("originalContent").is_some_and(Value::is_null);
    let (mut added, mut removed) = (0u64, 0u64);
    let mut hunks = false;
    for l in diff.lines() {
        hunks |= l.starts_with("@@");
        if hunks && l.starts_with('+') {
            added += 1;
        } else if hunks && l.starts_with('-') {
            removed += 1;
        }
    }
    if let Some(stat) = d.get("diffStat") {
        let n = |k: &str| stat.get(k).and_then(Value::as_u64).unwrap_or(0);
        added = n("model_added_lines") + n("user_added_lines");
        removed = n("model_removed_lines") + n("user_removed_lines");
    }
    // "✎ main.rs (new file)  +40 −3": the file and the size of the change on one row.
    let stat = format!("  +{added} −{removed}");
    let new = if new_file { " (new file)" } else { "" };
    let room = width.saturating_sub(2 + new.len() + stat.chars().count());
    out.push(Line::from(vec![
        Span::styled("✎ ", Style::new().fg(ACCENT)),
        Span::styled(
            super::truncate(s("fileName"), room.max(4)),
            Style::new().bold(),
        ),
        Span::styled(new, Style::new().fg(GOOD)),
        Span::styled(format!("  +{added}"), Style::new().fg(GOOD)),
        Span::styled(format!(" −{removed}"), Style::new().fg(BAD)),
    ]));
    let path = s("filePath");
    if !path.is_empty() && path != s("fileName") {
        out.extend(chop(&[(path, Style::new().fg(DIM))], width, 0));
    }
    if d.get("isBuildFile").and_then(Value::as_bool) == Some(true) {
        warning(
            out,
            "A build file: changing it can run code on the next build.",
            width,
        );
    }
    if diff.trim().is_empty() {
        out.push(Line::styled(
            "(no changes in the diff)",
            Style::new().fg(DIM),
        ));
    }
    // The patch's file header repeats the file name above: the hunks are what to read.
    let mut in_hunks = false;
    for l in diff.lines() {
        let l = l.strip_suffix('\r').unwrap_or(l);
        in_hunks |= l.starts_with("@@");
        if !in_hunks
            && (l.starts_with("Index:")
                || l.starts_with("===")
                || l.starts_with("---")
                || l.starts_with("+++"))
        {
            continue;
        }
        let style = if l.starts_with("@@") {
            Style::new().fg(ACCENT)
        } else if l.starts_with('+') {
            Style::new().fg(GOOD)
        } else if l.starts_with('-') {
            Style::new().fg(BAD)
        } else if l.starts_with('\\') {
            Style::new().fg(DIM)
        } else {
            Style::new()
        };
        out.extend(chop(&[(l, style)], width, 1));
    }
}

/// MCP tool annotations worth knowing before allowing (the server's own claims).
fn annotations(out: &mut Vec<Line<'static>>, ann: Option<&Value>, width: usize) {
    let flag = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_bool);
    if flag("destructiveHint") == Some(true) {
        warning(out, "The server marks this tool destructive.", width);
    } else if flag("readOnlyHint") == Some(true) {
        out.push(Line::styled(
            "The server marks this tool read-only.",
            Style::new().fg(DIM),
        ));
    }
}

/// The tool call itself: its name and arguments.
fn tool_call(out: &mut Vec<Line<'static>>, a: &UiApproval, width: usize) {
    let name = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    labelled(out, "Tool", name, Style::new().fg(ACCENT).bold(), width);
    annotations(out, a.tool_annotations.as_ref(), width);
    match a.tool_call.get("args") {
        Some(args) => json_block(out, "Arguments:", args, width),
        None => out.push(Line::styled("(no arguments)", Style::new().fg(DIM))),
    }
}

/// A JSON value pretty-printed under a label, indentation kept.
fn json_block(out: &mut Vec<Line<'static>>, label: &str, v: &Value, width: usize) {
    out.push(Line::styled(label.to_owned(), Style::new().fg(DIM)));
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    for l in text.lines() {
        out.extend(chop(&[("  ", Style::new()), (l, Style::new())], width, 4));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(line: &str, r: &[&str]) -> Vec<String> {
        let r: Vec<String> = r.iter().map(|s| s.to_string()).collect();
        root_ranges(line, &r)
            .into_iter()
            .map(|(a, b)| line[a..b].to_owned())
            .collect()
    }

    #[test]
    fn root_commands_in_command_position_only() {
        assert_eq!(
            roots("rm -rf build && cargo build", &["rm", "cargo"]),
            ["rm", "cargo"]
        );
        // An argument that happens to be a root name is not highlighted.
        assert_eq!(roots("echo rm; rm x", &["rm", "echo"]), ["echo", "rm"]);
        assert_eq!(
            roots("FOO=1 sudo /usr/bin/git push | tee log", &["git", "tee"]),
            ["/usr/bin/git", "tee"]
        );
        assert_eq!(roots("x=$(curl -s 'a b|c') ", &["curl"]), ["curl"]);
        assert_eq!(roots("ls 'rm'", &["rm"]), Vec::<String>::new());
        assert_eq!(roots("", &["rm"]), Vec::<String>::new());
    }
}
