//! `askbus schema`: prints the protocol's JSON Schemas from proto/schema/, embedded in the
//! binary at build time (see build.rs), so a tool can validate frames without the source tree.

use std::io::Write;
use std::process::ExitCode;

use crate::fail::exit;
use anyhow::Result;
use serde_json::{Map, Value};

include!(concat!(env!("OUT_DIR"), "/schemas.rs"));

/// Short names for the frames that exist in both directions, from a producer's point of view
/// (what it sends, what it gets); every other frame type is unique on its own.
const PREFERRED: &[(&str, &str)] = &[
    ("request", "client/ask-user-request"),
    ("response", "server/ask-user-response"),
    ("stats", "server/stats"),
    ("telemetry", "telemetry-record"),
];

/// Finds a schema by its path under proto/schema/ (`client/ask-user-request`), its frame type
/// (`bus-event`, `ask-user-withdrawn`), the type without `ask-user-` (`withdrawn`), or a
/// [`PREFERRED`] short name. `Err` lists the candidates when the name is ambiguous.
pub fn find(name: &str) -> Result<(&'static str, &'static str), Vec<&'static str>> {
    let name = name
        .trim_end_matches(".schema.json")
        .trim_end_matches(".json");
    if let Some(hit) = SCHEMAS.iter().find(|(n, _)| *n == name) {
        return Ok(*hit);
    }
    if let Some((_, path)) = PREFERRED.iter().find(|(alias, _)| *alias == name) {
        if let Some(hit) = SCHEMAS.iter().find(|(n, _)| n == path) {
            return Ok(*hit);
        }
    }
    let bare = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
    let short = |s: &str| bare(s).trim_start_matches("ask-user-").to_owned();
    let hits: Vec<_> = SCHEMAS
        .iter()
        .filter(|(n, _)| bare(n) == name || short(n) == name)
        .collect();
    match hits.as_slice() {
        [one] => Ok(**one),
        _ => Err(hits.iter().map(|(n, _)| *n).collect()),
    }
}

fn title(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("title").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

pub fn run(name: Option<String>, all: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let written = if all {
        let mut bundle = Map::new();
        for (n, text) in SCHEMAS {
            bundle.insert(format!("{n}.schema.json"), serde_json::from_str(text)?);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&bundle)?)
    } else if let Some(name) = name {
        match find(&name) {
            Ok((_, text)) => out.write_all(text.as_bytes()),
            Err(candidates) if candidates.is_empty() => {
                eprintln!("askbus schema: no schema named {name:?}; `askbus schema` lists them");
                return Ok(ExitCode::from(exit::NO_SUCH_SCHEMA));
            }
            Err(candidates) => {
                eprintln!(
                    "askbus schema: {name:?} could be {}; say which",
                    candidates.join(" or ")
                );
                return Ok(ExitCode::from(exit::NO_SUCH_SCHEMA));
            }
        }
    } else {
        let width = SCHEMAS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        SCHEMAS
            .iter()
            .try_for_each(|(n, text)| writeln!(out, "{n:<width$}  {}", title(text)))
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        r => r.map(|()| ExitCode::SUCCESS).map_err(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_embedded_and_parses() {
        let on_disk = walk(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../proto/schema"
        )));
        let embedded: Vec<_> = SCHEMAS.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, on_disk);
        for (n, text) in SCHEMAS {
            let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert!(v["$id"]
                .as_str()
                .unwrap()
                .ends_with(&format!("{n}.schema.json")));
        }
    }

    fn walk(root: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut dirs = vec![root.to_owned()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if let Some(rel) = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .and_then(|s| s.strip_suffix(".schema.json"))
                {
                    out.push(rel.to_owned());
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn names_resolve() {
        let name = |q: &str| find(q).map(|(n, _)| n);
        assert_eq!(name("request"), Ok("client/ask-user-request"));
        assert_eq!(name("response"), Ok("server/ask-user-response"));
        assert_eq!(
            name("client/ask-user-response"),
            Ok("client/ask-user-response")
        );
        assert_eq!(name("bus-event"), Ok("server/bus-event"));
        assert_eq!(name("withdrawn"), Ok("server/ask-user-withdrawn"));
        assert_eq!(name("cancel"), Ok("client/ask-user-cancel"));
        assert_eq!(name("watch"), Ok("client/watch"));
        assert_eq!(name("common"), Ok("common"));
        assert_eq!(name("telemetry"), Ok("telemetry-record"));
        assert_eq!(name("hello.schema.json"), Ok("client/hello"));
        assert_eq!(
            name("ask-user-request"),
            Err(vec!["client/ask-user-request", "server/ask-user-request"])
        );
        assert_eq!(name("nope"), Err(vec![]));
    }
}
