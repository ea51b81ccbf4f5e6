//! The rules by tool name: which rules a call can match, and their `argsPattern` literals found
//! in one pass, so a check visits a few candidates in the sorted order instead of every rule.

use super::*;

/// The rules that can match a tool name, by index into the sorted rules.
///
/// A rule with a wildcard `toolName` can match any call; any other rule only a call named its
/// `toolName`, or `mcp_{mcpName}_{toolName}`, or (an `mcp_…` rule) a call of the server whose
/// bare tool name it completes. The index keeps each rule under those names, so the candidates
/// for a call are a superset of the rules that match it, in the same order; every candidate is
/// still matched in full, so the decisions are the scan's.
///
/// A wildcard rule that can match only the calls of one MCP server (an `mcpName`, or a
/// `mcp_{server}_*` tool name) is kept under that server, and one that needs some server
/// (`mcpName = "*"`, `mcp_*`) apart: hundreds of MCP servers' `toolName = "*"` rules are then
/// no candidates for a built-in tool's call.
///
/// Each name's list also holds the wildcard rules that need no server (when there are few),
/// so a call by one name of no server needs no merge; and the `argsPattern` literals of a
/// list's rules are searched for in one pass ([`Literals`]) instead of one scan per rule.
#[derive(Debug, Default)]
pub(super) struct Index {
    exact: std::collections::HashMap<String, Vec<usize>>,
    /// Wildcard rules a call of no server can match.
    wild: Vec<usize>,
    /// Wildcard rules that need some server.
    any_server: Vec<usize>,
    /// Wildcard rules that need one server, by its name.
    by_server: std::collections::HashMap<String, Vec<usize>>,
    /// Per name: its rules and the wildcard ones, merged, with their literals' automaton.
    merged: std::collections::HashMap<String, (Vec<usize>, Option<Literals>)>,
}

/// The required literals of some rules' patterns, found in a text in one pass: a rule whose
/// literal is absent cannot match and its regex is not run.
#[derive(Debug)]
pub(super) struct Literals {
    ac: aho_corasick::AhoCorasick,
    /// Pattern number -> rule index.
    rules: Vec<usize>,
    /// The list's other rules (no literal to look for), in order: with the rules whose literal
    /// is found, the only candidates that can match.
    uncovered: Vec<usize>,
}

/// The most entries the merged lists may hold in all (names × their rules and the wildcard
/// ones; 2 MiB of indexes): within it every name's list has the wildcard rules merged in, so
/// a call by one name gets the literal search over all its candidates. Hundreds of wildcard
/// rules are common (each MCP server's `toolName = "*"`), and without the merge each check
/// would sort and visit them all with no literal search.
pub(super) const MAX_MERGED_ENTRIES: usize = 1 << 18;

impl Literals {
    pub(super) fn new(rules: &[Rule], list: &[usize]) -> Option<Literals> {
        let mut pats: Vec<Vec<u8>> = vec![];
        let mut idx = vec![];
        for &i in list {
            // Searched as UTF-8: as UTF-16LE bytes every pattern holds NULs, and the
            // searcher's rare-byte prefilter stopped at every other byte of the args. A
            // literal that is not well-formed UTF-16 (a lone surrogate) has no UTF-8 form:
            // its rule stays a candidate for every call.
            if let Some(re) = &rules[i].args_pattern {
                if let Ok(lit) = String::from_utf16(re.required()) {
                    if !lit.is_empty() {
                        pats.push(lit.into_bytes());
                        idx.push(i);
                    }
                }
            }
        }
        if pats.len() < 4 {
            return None;
        }
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .build(&pats)
            .ok()?;
        let uncovered = list
            .iter()
            .copied()
            .filter(|i| idx.binary_search(i).is_err())
            .collect();
        Some(Literals {
            ac,
            rules: idx,
            uncovered,
        })
    }

    /// The candidates of the list for a call with these args (`None`: no truthy args): the
    /// rules without a literal and, when there are args, those whose literal occurs in them,
    /// in rule order. A rule whose literal is absent cannot match (nor can a rule with a
    /// pattern when there are no args), so these are every candidate that can.
    pub(super) fn candidates(&self, text: Option<&[u16]>) -> (Vec<usize>, Vec<usize>) {
        let mut found: Vec<usize> = match text {
            Some(t) => self.found(t).into_iter().collect(),
            None => vec![],
        };
        found.sort_unstable();
        if found.is_empty() {
            return (self.uncovered.clone(), found);
        }
        let mut out = Vec::with_capacity(self.uncovered.len() + found.len());
        let (mut a, mut b) = (self.uncovered.iter().peekable(), found.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) => {
                    if x < y {
                        out.push(x);
                        a.next();
                    } else {
                        out.push(y);
                        b.next();
                    }
                }
                (Some(&&x), None) => {
                    out.push(x);
                    a.next();
                }
                (None, Some(&&y)) => {
                    out.push(y);
                    b.next();
                }
                (None, None) => break,
            }
        }
        (out, found)
    }

    /// The rules whose literal occurs in `text`. A well-formed literal found in the UTF-16
    /// text is found in its UTF-8 form: only lone surrogates change (to U+FFFD), and no
    /// literal holds one.
    pub(super) fn found(&self, text: &[u16]) -> std::collections::HashSet<usize> {
        // Args are mostly ASCII: then the UTF-8 form is the low bytes.
        let utf8: Vec<u8> = if text.iter().all(|&u| u < 0x80) {
            text.iter().map(|&u| u as u8).collect()
        } else {
            String::from_utf16_lossy(text).into_bytes()
        };
        self.ac
            .find_overlapping_iter(&utf8)
            .map(|m| self.rules[m.pattern().as_usize()])
            .collect()
    }

    pub(super) fn covers(&self, rule: usize) -> bool {
        self.rules.binary_search(&rule).is_ok()
    }
}

impl Index {
    pub(super) fn new(rules: &[Rule]) -> Index {
        let mut ix = Index::default();
        for (i, r) in rules.iter().enumerate() {
            let rt = r.tool_name.as_str();
            if rt.contains('*') {
                match server_needed(r) {
                    Needs::Nothing => ix.wild.push(i),
                    Needs::AnyServer => ix.any_server.push(i),
                    Needs::Server(s) => ix.by_server.entry(s.to_owned()).or_default().push(i),
                }
                continue;
            }
            ix.exact.entry(rt.to_string()).or_default().push(i);
            if let Some(m) = r.mcp_name.as_deref().filter(|m| !m.is_empty()) {
                if !rt.starts_with("mcp_") {
                    let key = tools::format_mcp_tool_name(m, Some(rt));
                    let list = ix.exact.entry(key).or_default();
                    if list.last() != Some(&i) {
                        list.push(i);
                    }
                }
            }
        }
        let entries: usize = ix.exact.values().map(|l| l.len() + ix.wild.len()).sum();
        if entries <= MAX_MERGED_ENTRIES {
            let keys: Vec<String> = ix.exact.keys().cloned().collect();
            for k in keys {
                let mut list = ix.exact[&k].clone();
                list.extend(ix.wild.iter().copied());
                list.sort_unstable();
                list.dedup();
                let lits = Literals::new(rules, &list);
                ix.merged.insert(k, (list, lits));
            }
        }
        ix
    }

    /// A call by exactly one name, of no server: its merged list, if there is one. (A call
    /// of the server `""` is of some server: `mcpName = "*"` rules can match it.)
    pub(super) fn single(
        &self,
        names: &[String],
        server: Option<&str>,
    ) -> Option<&(Vec<usize>, Option<Literals>)> {
        match names {
            [n] if server.is_none() => self.merged.get(n.as_str()),
            _ => None,
        }
    }

    /// The candidates for a call named any of `names` (of `server`), in rule order.
    pub(super) fn candidates(&self, names: &[String], server: Option<&str>) -> Vec<usize> {
        let mut lists: Vec<&[usize]> = vec![&self.wild];
        if let Some(srv) = server {
            lists.push(&self.any_server);
            if let Some(l) = self.by_server.get(srv) {
                lists.push(l);
            }
        }
        for n in names {
            if let Some(l) = self.exact.get(n.as_str()) {
                lists.push(l);
            }
            if let Some(srv) = server.filter(|s| !s.is_empty() && !n.is_empty()) {
                if let Some(l) = self
                    .exact
                    .get(tools::format_mcp_tool_name(srv, Some(n)).as_str())
                {
                    lists.push(l);
                }
            }
        }
        let mut out: Vec<usize> = lists.iter().flat_map(|l| l.iter().copied()).collect();
        if lists.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
        out
    }
}

/// What server a wildcard rule needs of a call, as [`Engine`]'s matching reads its
/// `mcpName` and tool name: a superset is safe (every candidate is matched in full), so a rule
/// whose two say different servers is kept under either.
enum Needs<'a> {
    Nothing,
    AnyServer,
    Server(&'a str),
}

fn server_needed(r: &Rule) -> Needs<'_> {
    let rt = r.tool_name.as_str();
    let by_name = if rt == "mcp_*" {
        Needs::AnyServer
    } else if rt.starts_with("mcp_") && rt.ends_with("_*") && rt.len() >= 6 {
        Needs::Server(&rt[4..rt.len() - 2])
    } else {
        Needs::Nothing
    };
    match (r.mcp_name.as_deref(), by_name) {
        (Some("*"), Needs::Server(s)) | (None, Needs::Server(s)) => Needs::Server(s),
        (Some("*"), _) => Needs::AnyServer,
        (Some(m), _) => Needs::Server(m),
        (None, n) => n,
    }
}

#[cfg(test)]
impl Engine {
    /// The same engine visiting every rule in order, with no literal search: the scan the
    /// index must agree with.
    fn scanning(&self) -> Engine {
        let mut e = self.with(self.options.clone(), self.place.clone());
        e.index = std::sync::Arc::new(Index {
            wild: (0..self.rules.len()).collect(),
            ..Index::default()
        });
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{load_shipped, load_text, Mode, Tier};

    /// Decisions and matched rules through the index (tool lists, wildcard rules merged in or
    /// kept by the server they need, rules visited only when their literal is in the args)
    /// equal a scan of every rule, on rule sets where the literal search is in play, for calls
    /// of no server, of the server `""`, and of servers with and without rules of their own.
    #[test]
    fn the_index_decides_as_a_scan_of_every_rule() {
        let mut text = String::new();
        for i in 0..40 {
            let d = ["allow", "deny", "ask_user"][i % 3];
            text.push_str(&format!(
                "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"tool{i} run\"\ndecision = \"{d}\"\npriority = {}\n\n\
                 [[rule]]\ntoolName = \"write_file\"\nargsPattern = \"\\\"file_path\\\":\\\"gen{i}/\"\ndecision = \"{d}\"\npriority = {}\n\n",
                (i * 37) % 900,
                (i * 53) % 900,
            ));
        }
        // Wildcard rules of MCP servers, and anchored command patterns (whose literal runs
        // through the `^`), in the numbers people have them.
        for i in 0..80 {
            let d = ["allow", "deny", "ask_user"][i % 3];
            text.push_str(&format!(
                "[[rule]]\ntoolName = \"*\"\nmcpName = \"srv{i}\"\ndecision = \"{d}\"\npriority = {}\n\n\
                 [[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = \"^tool{i} run( |$)\"\ndecision = \"{d}\"\npriority = {}\n\n\
                 [[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = \"make\\\\s+t{i}\\\\b\"\ndecision = \"{d}\"\npriority = {}\n\n",
                (i * 29) % 900,
                (i * 31) % 900,
                (i * 41) % 900,
            ));
        }
        text.push_str(
            "[[rule]]\ntoolName = \"*\"\nargsPattern = \"secret\"\ndecision = \"deny\"\npriority = 500\n\n\
             [[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"git\"\ndecision = \"allow\"\npriority = 300\n\n\
             [[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = \"rm .*\"\ndecision = \"deny\"\npriority = 700\n\n\
             [[rule]]\ntoolName = \"write_file\"\ndecision = \"ask_user\"\npriority = 10\nmodes = [\"autoEdit\"]\n\n\
             [[rule]]\ntoolName = \"*\"\nmcpName = \"*\"\nargsPattern = \"drop\"\ndecision = \"deny\"\npriority = 650\n\n\
             [[rule]]\ntoolName = \"mcp_*\"\ndecision = \"ask_user\"\npriority = 640\n\n\
             [[rule]]\ntoolName = \"mcp_srv5_*\"\ndecision = \"allow\"\npriority = 660\n",
        );
        let mut loaded = load_text(&text, "user.toml", "user.toml", Tier::User);
        loaded.extend(load_shipped());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
        let place = Place {
            workspace: "/nonexistent-ws".into(),
            home: "/nonexistent".into(),
            hermetic: true,
        };
        let engine = Engine::new(
            loaded.rules,
            loaded.checkers,
            Options::default(),
            place.clone(),
        )
        .expect("engine");
        let shell = |c: &str| format!("{{\"command\":{}}}", serde_json::json!(c));
        let mut calls: Vec<(&str, String)> = vec![
            ("run_shell_command", shell("tool7 run")),
            (
                "run_shell_command",
                shell("tool7 run && tool8 run; tool9 run | git status"),
            ),
            ("run_shell_command", shell("tool3 run --x && rm -rf build")),
            ("run_shell_command", shell("git log && tool12 run secret")),
            ("run_shell_command", shell("tool1 runner")),
            ("run_shell_command", shell("echo tool5 run")),
            ("run_shell_command", "{}".into()),
            ("run_shell_command", "{\"command\":7}".into()),
            ("write_file", "{\"file_path\":\"gen4/a.rs\"}".into()),
            ("write_file", "{\"file_path\":\"gen4/secret\"}".into()),
            (
                "write_file",
                "{\"file_path\":\"gen44/a\",\"content\":\"gen5/\"}".into(),
            ),
            ("write_file", "{}".into()),
            // Lone surrogates and a pair beside literals: the literal search runs on UTF-8.
            ("write_file", r#"{"file_path":"gen4/\ud800x"}"#.into()),
            (
                "write_file",
                r#"{"file_path":"\udc00gen4/\ud83d\ude00"}"#.into(),
            ),
            ("read_file", "{\"file_path\":\"secret\"}".into()),
            ("read_file", "{\"file_path\":\"a\"}".into()),
            ("run_shell_command", shell("make   t7 && make t77")),
            ("run_shell_command", shell("make t7x; tool70 run")),
            ("mcp_srv3_query", "{\"sql\":\"select\"}".into()),
            ("query", "{\"sql\":\"select\"}".into()),
            ("query", "{\"sql\":\"drop table\"}".into()),
            ("mcp_srv5_query", "{\"sql\":\"select\"}".into()),
        ];
        for i in (0..40).step_by(3) {
            calls.push((
                "run_shell_command",
                shell(&format!("tool{i} run x; tool{} run", i + 1)),
            ));
            calls.push(("write_file", format!("{{\"file_path\":\"gen{i}/x\"}}")));
        }
        for mode in [Mode::Default, Mode::AutoEdit, Mode::Yolo, Mode::Plan] {
            for non_interactive in [false, true] {
                let options = Options {
                    mode,
                    non_interactive,
                    ..Options::default()
                };
                let indexed = engine.with(options, place.clone());
                let scan = indexed.scanning();
                for (tool, args) in &calls {
                    let args = crate::json::parse(args).expect("args");
                    for (has_args, server) in [
                        (true, None),
                        (false, None),
                        (true, Some("srv3")),
                        (true, Some("srv5")),
                        (true, Some("")),
                        (true, Some("nobody")),
                    ] {
                        let call = Call {
                            name: tool,
                            args: has_args.then_some(&args),
                            server,
                            annotations: None,
                            subagent: None,
                        };
                        let (a, b) = (indexed.check(&call), scan.check(&call));
                        assert_eq!(
                            (a.decision, &a.rule),
                            (b.decision, &b.rule),
                            "{tool} {args:?} {mode:?} {non_interactive}"
                        );
                        let (a, b) = (indexed.check_strict(&call), scan.check_strict(&call));
                        assert_eq!(
                            (a.decision, &a.rule),
                            (b.decision, &b.rule),
                            "strict {tool}"
                        );
                    }
                }
            }
        }
    }
}
