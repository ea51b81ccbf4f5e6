//! The layering that `daemon/src/lib.rs` and the README state, checked against the sources: every
//! path into another module (`crate::…`, `super::…`, `askbus::…`, a child's `pub use`)
//! outside test code is an edge, and each edge must be one the table below allows, with no
//! cycles. A new dependency between modules is a design decision: make it here and in the
//! docs, or find it a better home.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules that are layers of their own although they sit inside another module's folder:
/// the pure broker may build a telemetry record without depending on the writer thread, and
/// the daemon's config reads federation's settings without the federation task.
const OWN_LAYERS: &[&str] = &["telemetry::record", "federation::config"];

/// Every allowed edge between layers, top to bottom. The client crate's modules come first
/// (the daemon re-exports them, so `crate::protocol` in the daemon is the client's module).
const ALLOWED: &[(&str, &[&str])] = &[
    ("protocol", &[]),
    ("questions", &["protocol"]),
    ("approvals", &["protocol", "questions"]),
    ("trust", &[]),
    ("client", &["history", "protocol", "trust"]),
    ("paths", &["client", "trust"]),
    ("history", &["protocol"]),
    (
        "store",
        &[
            "approvals",
            "broker",
            "history",
            "intake",
            "paths",
            "protocol",
        ],
    ),
    ("telemetry::record", &["protocol"]),
    (
        "broker",
        &["approvals", "protocol", "questions", "telemetry::record"],
    ),
    ("intake", &["approvals", "broker", "protocol", "questions"]),
    ("access", &["broker"]),
    ("outbox", &["protocol"]),
    ("federation::config", &["broker"]),
    ("telemetry", &["paths", "protocol", "telemetry::record"]),
    ("metrics", &["broker", "telemetry"]),
    (
        "hub",
        &[
            "broker",
            "metrics",
            "outbox",
            "protocol",
            "store",
            "telemetry",
            "telemetry::record",
        ],
    ),
    (
        "connection",
        &[
            "broker",
            "history",
            "hub",
            "intake",
            "outbox",
            "protocol",
            "store",
            "telemetry",
        ],
    ),
    (
        "config",
        &[
            "access",
            "broker",
            "federation::config",
            "history",
            "metrics",
            "paths",
            "protocol",
            "store",
        ],
    ),
    (
        "server",
        &[
            "access",
            "broker",
            "config",
            "connection",
            "federation::config",
            "hub",
            "metrics",
            "paths",
            "protocol",
            "store",
            "telemetry",
        ],
    ),
    ("systemd", &["hub"]),
    (
        "federation",
        &[
            "approvals",
            "broker",
            "federation::config",
            "hub",
            "intake",
            "outbox",
            "protocol",
        ],
    ),
];

/// Inside the protocol module, its parts form a DAG too (no module that reads frames is
/// needed to write them, and the reference parser needs no fast path).
const PROTOCOL_ALLOWED: &[(&str, &[&str])] = &[
    ("protocol::codec", &[]),
    ("protocol::error", &[]),
    ("protocol::json", &[]),
    ("protocol::frames", &["protocol::error"]),
    ("protocol::parse", &["protocol::error", "protocol::frames"]),
    (
        "protocol::encode_fast",
        &["protocol::codec", "protocol::frames", "protocol::json"],
    ),
];

struct Source {
    module: Vec<String>,
    text: String,
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path.strip_prefix(root).unwrap();
        if path.is_dir() {
            if rel == Path::new("bin") {
                continue; // The binaries sit on top of everything.
            }
            collect(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match module.last().map(String::as_str) {
            Some("lib") => module.clear(),
            Some("mod") => {
                module.pop();
            }
            // Unit-test files (`mod tests;` under `#[cfg(test)]`) are test code.
            Some("tests") => continue,
            _ => {}
        }
        let text = std::fs::read_to_string(&path).unwrap();
        out.push(Source {
            module,
            text: strip_tests_and_comments(&text),
        });
    }
}

/// The file without its `#[cfg(test)]` items (test modules and test-only imports) and
/// without comments.
fn strip_tests_and_comments(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") || trimmed.starts_with("#[cfg(all(test") {
            // Skip the next item: one line, or a braced block up to its closing brace.
            let mut depth = 0i32;
            for next in lines.by_ref() {
                depth += next.matches('{').count() as i32 - next.matches('}').count() as i32;
                if depth <= 0 && (next.trim_end().ends_with(';') || next.trim_end().ends_with('}'))
                {
                    break;
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every module path a source names: `crate::a::b`, `super::a`, `self::a`, `askbus::a`, and
/// (from a `use` line) a child module declared with `mod`.
fn referenced_paths(src: &Source, modules: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let children: BTreeSet<String> = src
        .text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("pub ");
            let l = l.trim_start_matches("pub(crate) ");
            l.strip_prefix("mod ")
                .map(|r| r.trim_end_matches(';').trim().to_owned())
        })
        .collect();
    let mut paths = Vec::new();
    let text = &src.text;
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        // A path starting here: idents joined by `::` (a `{` group is expanded below).
        let start = i;
        while i < bytes.len() && (is_ident(bytes[i]) || bytes[i] == b':') {
            i += 1;
        }
        let head: Vec<&str> = text[start..i]
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let Some(&first) = head.first() else { continue };
        let mut base: Vec<String> = match first {
            "crate" | "askbus" => Vec::new(),
            "super" => {
                let mut m = src.module.clone();
                m.pop();
                m
            }
            "self" => src.module.clone(),
            child if children.contains(child) && line_is_use(text, start) => {
                let mut m = src.module.clone();
                m.push(child.to_owned());
                paths.push(m);
                continue;
            }
            _ => continue,
        };
        let mut rest = head[1..].to_vec();
        while rest.first() == Some(&"super") {
            base.pop();
            rest.remove(0);
        }
        base.extend(rest.iter().map(|s| s.to_string()));
        if text[i..].starts_with('{') {
            // `crate::{a, b::c}`: one path per member.
            let close = matching_brace(&text[i..]).map_or(text.len(), |n| i + n);
            for member in text[i + 1..close].split(',') {
                let member = member.split_whitespace().next().unwrap_or("");
                let mut p = base.clone();
                p.extend(
                    member
                        .split("::")
                        .filter(|s| !s.is_empty() && *s != "{" && *s != "self")
                        .map(|s| s.trim_matches(|c: char| !is_ident(c as u8)).to_owned())
                        .filter(|s| !s.is_empty()),
                );
                paths.push(p);
            }
            i = close;
        } else {
            paths.push(base);
        }
    }
    // Resolve each path to the longest module it names.
    paths
        .into_iter()
        .filter_map(|p| {
            (0..=p.len())
                .rev()
                .map(|n| p[..n].to_vec())
                .find(|m| modules.contains(m))
        })
        .collect()
}

fn line_is_use(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let line = text[line_start..at].trim_start();
    line.starts_with("use ") || line.starts_with("pub use ")
}

fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (n, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(n);
                }
            }
            _ => {}
        }
    }
    None
}

/// The layer a module belongs to at this granularity: the longest of `layers` it is in.
fn layer_of(module: &[String], layers: &BTreeSet<String>) -> Option<String> {
    (1..=module.len())
        .rev()
        .map(|n| module[..n].join("::"))
        .find(|m| layers.contains(m))
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    collect(
        &root.join("daemon/src"),
        &root.join("daemon/src"),
        &mut sources,
    );
    collect(
        &root.join("clients/rust/src"),
        &root.join("clients/rust/src"),
        &mut sources,
    );
    sources
}

/// The edges between `layers` that the sources contain, each with a file that makes it.
fn edges(sources: &[Source], layers: &BTreeSet<String>) -> BTreeMap<(String, String), String> {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges = BTreeMap::new();
    for src in sources {
        let Some(from) = layer_of(&src.module, layers) else {
            continue;
        };
        for target in referenced_paths(src, &modules) {
            let Some(to) = layer_of(&target, layers) else {
                continue;
            };
            if to != from {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| src.module.join("::"));
            }
        }
    }
    edges
}

fn check(allowed: &[(&str, &[&str])], layers: &BTreeSet<String>) {
    let sources = sources();
    let found = edges(&sources, layers);
    let allowed: BTreeMap<&str, BTreeSet<&str>> = allowed
        .iter()
        .map(|(from, to)| (*from, to.iter().copied().collect()))
        .collect();
    let bad: Vec<String> = found
        .iter()
        .filter(|((from, to), _)| {
            !allowed
                .get(from.as_str())
                .is_some_and(|a| a.contains(to.as_str()))
        })
        .map(|((from, to), file)| format!("{from} -> {to} (in {file})"))
        .collect();
    assert!(
        bad.is_empty(),
        "edges the layering does not allow:\n  {}\n(allowed: {allowed:?})",
        bad.join("\n  ")
    );
    // No cycles: repeatedly remove layers nothing left depends on.
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in found.keys() {
        graph.entry(from).or_default().insert(to);
        graph.entry(to).or_default();
    }
    loop {
        let leaves: Vec<&str> = graph
            .iter()
            .filter(|(_, deps)| deps.is_empty())
            .map(|(m, _)| *m)
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            graph.remove(leaf);
            for deps in graph.values_mut() {
                deps.remove(leaf);
            }
        }
    }
    assert!(graph.is_empty(), "a cycle among {graph:?}");
}

#[test]
fn layers_depend_only_on_the_layers_the_docs_state() {
    let sources = sources();
    let mut layers: BTreeSet<String> = sources
        .iter()
        .filter(|s| s.module.len() == 1)
        .map(|s| s.module[0].clone())
        .collect();
    layers.extend(OWN_LAYERS.iter().map(|s| s.to_string()));
    for (layer, _) in ALLOWED {
        assert!(layers.contains(*layer), "no module {layer} any more");
    }
    for layer in &layers {
        assert!(
            ALLOWED.iter().any(|(l, _)| l == layer),
            "module {layer} is in no layer: add it to ALLOWED and to lib.rs's list"
        );
    }
    check(ALLOWED, &layers);
}

#[test]
fn the_protocol_module_is_a_dag_of_its_parts() {
    // `protocol` itself (mod.rs) is the facade: constants and re-exports of its parts, which
    // every part may name; the parts must not depend on each other in a circle.
    let layers: BTreeSet<String> = PROTOCOL_ALLOWED
        .iter()
        .map(|(l, _)| l.to_string())
        .collect();
    let found = edges(&sources(), &layers);
    assert!(!found.is_empty(), "the scan found no edges inside protocol");
    check(PROTOCOL_ALLOWED, &layers);
}

/// The scan itself must see edges: a parser that found none would pass everything.
#[test]
fn the_scan_sees_known_edges() {
    let sources = sources();
    let mut layers: BTreeSet<String> = sources
        .iter()
        .filter(|s| s.module.len() == 1)
        .map(|s| s.module[0].clone())
        .collect();
    layers.extend(OWN_LAYERS.iter().map(|s| s.to_string()));
    let found = edges(&sources, &layers);
    for (from, to) in [
        ("broker", "protocol"),
        ("broker", "questions"),
        ("broker", "telemetry::record"),
        ("hub", "broker"),
        ("server", "hub"),
        ("server", "config"),
        ("questions", "protocol"),
        ("telemetry", "telemetry::record"),
    ] {
        assert!(
            found.contains_key(&(from.to_owned(), to.to_owned())),
            "the scan missed {from} -> {to}: {:?}",
            found.keys().collect::<Vec<_>>()
        );
    }
    let text = strip_tests_and_comments(
        "use a;\n#[cfg(test)]\nmod tests {\n    use b;\n}\n// c\nuse d;\n",
    );
    assert_eq!(text, "use a;\nuse d;\n");
}
