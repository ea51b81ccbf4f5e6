//! Shell commands split as the reference splits them: tree-sitter-bash 0.25.0 (the grammar
//! web-tree-sitter 0.25.10 loads in Gemini CLI), walked the way `shell-utils.js` walks it.
//!
//! The source is parsed as UTF-16 so every index is a UTF-16 code unit, as JavaScript's
//! `startIndex` and `slice` are; a part's text, its start and the "atomic" test
//! (`text.length === command.length`) then agree with the reference's for any input.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

use crate::regex::{js_trim_utf16, JsRegex};
use crate::shellquote::{self, Entry, Env};

/// One part of a command, as `parseCommandDetails` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// The command name, or a pseudo-name such as `redirection (>)` or `subshell`.
    pub name: String,
    /// The part's source text, trimmed (UTF-16).
    pub text: Vec<u16>,
    /// Where it starts in the command, in UTF-16 units.
    pub start: usize,
}

/// A parsed command: its parts in source order, and whether the parse was unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The parts.
    pub details: Vec<Detail>,
    /// A syntax error, no part at all, or a `${x@P}` prompt transform.
    pub has_error: bool,
}

/// The pseudo-names that are not commands to check on their own.
pub const REDIRECTION_NAMES: &[&str] = &[
    "redirection (<)",
    "redirection (>)",
    "heredoc (<<)",
    "herestring (<<<)",
    "command substitution",
    "backtick substitution",
    "process substitution",
    "subshell",
];

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new({
        let mut p = Parser::new();
        p.set_language(&tree_sitter_bash::LANGUAGE.into()).expect("tree-sitter-bash loads");
        p
    });
}

fn parse_tree(units: &[u16]) -> Option<Tree> {
    if js_trim_utf16(units).is_empty() {
        return None;
    }
    PARSER.with(|p| p.borrow_mut().parse_utf16_le(units, None))
}

fn text_of(node: &Node, src: &[u16]) -> Vec<u16> {
    let (s, e) = (node.start_byte() / 2, node.end_byte() / 2);
    src.get(s..e.min(src.len())).unwrap_or(&[]).to_vec()
}

fn normalize_command_name(raw: &[u16]) -> String {
    if raw.len() >= 2 {
        let (f, l) = (raw[0], raw[raw.len() - 1]);
        if (f == u16::from(b'"') && l == u16::from(b'"'))
            || (f == u16::from(b'\'') && l == u16::from(b'\''))
        {
            return String::from_utf16_lossy(&raw[1..raw.len() - 1]);
        }
    }
    String::from_utf16_lossy(js_trim_utf16(raw))
}

fn extract_name(node: &Node, src: &[u16]) -> Option<String> {
    match node.kind() {
        "command" => node
            .child_by_field_name("name")
            .map(|n| normalize_command_name(&text_of(&n, src))),
        "declaration_command" | "unset_command" | "test_command" => node
            .child(0)
            .map(|n| normalize_command_name(&text_of(&n, src))),
        "file_redirect" => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                let t = text_of(&child, src);
                if t.contains(&u16::from(b'<')) {
                    return Some("redirection (<)".into());
                }
                if t.contains(&u16::from(b'>')) {
                    return Some("redirection (>)".into());
                }
            }
            Some("redirection (>)".into())
        }
        "heredoc_redirect" => Some("heredoc (<<)".into()),
        "herestring_redirect" => Some("herestring (<<<)".into()),
        "command_substitution" => Some("command substitution".into()),
        "backtick_substitution" => Some("backtick substitution".into()),
        "process_substitution" => Some("process substitution".into()),
        "subshell" => Some("subshell".into()),
        _ => None,
    }
}

fn has_prompt_transform(root: Node, src: &[u16]) -> bool {
    let mut stack = vec![root];
    while let Some(cur) = stack.pop() {
        if cur.kind() == "expansion" && cur.child_count() > 0 {
            for i in 0..cur.child_count() - 1 {
                let (op, tr) = (cur.child(i), cur.child(i + 1));
                if let (Some(op), Some(tr)) = (op, tr) {
                    let tt = String::from_utf16_lossy(&text_of(&tr, src));
                    if text_of(&op, src) == [u16::from(b'@')] && tt.to_lowercase() == "p" {
                        return true;
                    }
                }
            }
        }
        for i in (0..cur.named_child_count()).rev() {
            if let Some(c) = cur.named_child(i) {
                stack.push(c);
            }
        }
    }
    false
}

/// A text's parse and whether it redirects.
type Memo = (Option<Parsed>, bool);

thread_local! {
    /// Parses are pure functions of the text, and one check asks for the same texts several
    /// times (the whole command, its redirection test, each part): remembered per thread, a
    /// bounded number of them.
    static MEMO: RefCell<std::collections::HashMap<Vec<u16>, Memo>> =
        RefCell::new(std::collections::HashMap::new());
}

fn memo(command: &[u16]) -> (Option<Parsed>, bool) {
    if let Some(hit) = MEMO.with(|m| m.borrow().get(command).cloned()) {
        return hit;
    }
    let computed = (parse_uncached(command), redirection_uncached(command));
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= 256 {
            m.clear();
        }
        m.insert(command.to_vec(), computed.clone());
    });
    computed
}

/// The reference's `parseCommandDetails` on Linux (bash): `None` when there is nothing to parse.
pub fn parse_command_details(command: &[u16]) -> Option<Parsed> {
    memo(command).0
}

fn parse_uncached(command: &[u16]) -> Option<Parsed> {
    let tree = parse_tree(command)?;
    let root = tree.root_node();
    let mut details = vec![];
    let mut stack = vec![root];
    while let Some(cur) = stack.pop() {
        if let Some(name) = extract_name(&cur, command) {
            details.push(Detail {
                name,
                text: js_trim_utf16(&text_of(&cur, command)).to_vec(),
                start: cur.start_byte() / 2,
            });
        }
        for i in (0..cur.child_count()).rev() {
            if let Some(c) = cur.child(i) {
                stack.push(c);
            }
        }
    }
    let has_error = root.has_error() || details.is_empty() || has_prompt_transform(root, command);
    details.sort_by_key(|d| d.start);
    Some(Parsed { details, has_error })
}

/// The reference's `hasRedirection` (bash).
pub fn has_redirection(command: &[u16]) -> bool {
    if !command
        .iter()
        .any(|&u| u == u16::from(b'>') || u == u16::from(b'<'))
    {
        return false;
    }
    memo(command).1
}

fn redirection_uncached(command: &[u16]) -> bool {
    let fallback = command
        .iter()
        .any(|&u| u == u16::from(b'>') || u == u16::from(b'<'));
    if !fallback {
        return false;
    }
    let Some(tree) = parse_tree(command) else {
        return fallback;
    };
    let mut stack = vec![tree.root_node()];
    while let Some(cur) = stack.pop() {
        if matches!(
            cur.kind(),
            "redirected_statement" | "file_redirect" | "heredoc_redirect" | "herestring_redirect"
        ) {
            return true;
        }
        for i in (0..cur.child_count()).rev() {
            if let Some(c) = cur.child(i) {
                stack.push(c);
            }
        }
    }
    false
}

/// The reference's `splitCommands`: the parts' texts, redirections left out; none on an error.
pub fn split_commands(command: &[u16]) -> Vec<Vec<u16>> {
    match parse_command_details(command) {
        Some(p) if !p.has_error => p
            .details
            .into_iter()
            .filter(|d| !REDIRECTION_NAMES.contains(&d.name.as_str()))
            .map(|d| d.text)
            .filter(|t| !t.is_empty())
            .collect(),
        _ => vec![],
    }
}

thread_local! {
    static WRAPPER: JsRegex = JsRegex::with_flags(
        r"^\s*(?:(?:(?:\S+\/)?(?:sh|bash|zsh))\s+-c|cmd\.exe\s+\/c|powershell(?:\.exe)?\s+(?:-NoProfile\s+)?-Command|pwsh(?:\.exe)?\s+(?:-NoProfile\s+)?-Command)\s+",
        "i",
    ).expect("the wrapper pattern");
}

/// The reference's `stripShellWrapper`: `bash -c "…"` and friends give their script.
pub fn strip_shell_wrapper(command: &[u16]) -> Vec<u16> {
    // Every wrapper the pattern knows has a `-c`, `/c` or `-Command` (any case): without
    // one the pattern cannot match, and a check asks this of every part of every command.
    let flag = command.windows(2).any(|w| {
        (w[0] == u16::from(b'-') || w[0] == u16::from(b'/'))
            && (w[1] == u16::from(b'c') || w[1] == u16::from(b'C'))
    });
    let m = if flag {
        WRAPPER.with(|re| re.find_at(command, 0))
    } else {
        None
    };
    let Some((ms, me)) = m else {
        return js_trim_utf16(command).to_vec();
    };
    // Anchored at ^: the match starts at 0.
    debug_assert_eq!(ms, 0);
    let matched = String::from_utf16_lossy(&command[ms..me]);
    let mut new_command = js_trim_utf16(&command[me..]).to_vec();
    let dq = u16::from(b'"');
    let sq = u16::from(b'\'');
    if new_command.len() >= 2 {
        let (f, l) = (new_command[0], new_command[new_command.len() - 1]);
        if (f == dq && l == dq) || (f == sq && l == sq) {
            let is_posix = crate::regex::js_trim(&matched).ends_with("-c");
            let inner = new_command[1..new_command.len() - 1].to_vec();
            if is_posix && f == dq {
                let text = String::from_utf16_lossy(&new_command);
                new_command = match shellquote::parse(&text, Env::KeepDollar) {
                    Ok(entries) if entries.len() == 1 => match &entries[0] {
                        Entry::Word(w) => w.encode_utf16().collect(),
                        _ => inner,
                    },
                    _ => inner,
                };
            } else {
                new_command = inner;
            }
        }
    }
    new_command
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }
    fn names(s: &str) -> (Vec<String>, bool) {
        let p = parse_command_details(&u(s)).unwrap();
        (p.details.into_iter().map(|d| d.name).collect(), p.has_error)
    }

    #[test]
    fn splits_like_the_reference() {
        assert_eq!(
            names("ls && rm -rf /"),
            (vec!["ls".into(), "rm".into()], false)
        );
        assert_eq!(
            names("echo $(whoami) > out"),
            (
                vec![
                    "echo".into(),
                    "command substitution".into(),
                    "whoami".into(),
                    "redirection (>)".into()
                ],
                false
            )
        );
        assert!(names("echo 'unterminated").1);
        assert!(parse_command_details(&u("   ")).is_none());
        assert!(has_redirection(&u("ls > x")));
        assert!(!has_redirection(&u("echo '>'")));
        assert_eq!(
            String::from_utf16_lossy(&strip_shell_wrapper(&u("bash -c \"ls $X\""))),
            "ls $X"
        );
        assert_eq!(
            String::from_utf16_lossy(&strip_shell_wrapper(&u("sh -c 'ls; rm'"))),
            "ls; rm"
        );
    }

    /// The `-c`/`/c` look-ahead before the pattern keeps every wrapper, in any case, and
    /// leaves the rest trimmed as the pattern's miss does.
    #[test]
    fn wrappers_in_any_case_are_stripped_and_others_only_trimmed() {
        for (command, stripped) in [
            ("CMD.EXE /C dir", "dir"),
            ("cmd.exe /c 'dir x'", "dir x"),
            ("/usr/bin/bash -C ls", "ls"),
            ("  ZSH -c \"git log\"", "git log"),
            ("powershell.exe -NoProfile -Command Get-Item", "Get-Item"),
            ("PWSH -command ls", "ls"),
            ("  ls -la ", "ls -la"),
            ("echo a-c", "echo a-c"),
            ("bash script.sh", "bash script.sh"),
        ] {
            assert_eq!(
                String::from_utf16_lossy(&strip_shell_wrapper(&u(command))),
                stripped,
                "{command}"
            );
        }
    }
}
