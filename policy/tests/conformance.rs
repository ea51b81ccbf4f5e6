//! The 610 reference cases, asked of the engine in process (the same cases run end to end
//! through `askbus policy test` in the root package's e2e tests).

use std::collections::BTreeMap;
use std::path::Path;

use askbus_policy::engine::Options;
use askbus_policy::json;
use askbus_policy::question::{answer, Question};
use askbus_policy::safety::Place;
use askbus_policy::{Mode, Tier};
use serde_json::Value;

fn write_files(dir: &Path, files: &serde_json::Map<String, Value>) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text.as_str().unwrap()).unwrap();
    }
}

/// The comparable part of an answer: exit, decision, rule (missing = null), errors as a multiset.
pub fn normalize(v: &Value, exit: i64) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("exit".into(), exit.into());
    if let Some(d) = v.get("decision") {
        out.insert("decision".into(), d.clone());
    }
    if let Some(r) = v.get("rule") {
        let rule = if r.is_null() {
            Value::Null
        } else {
            let mut m = serde_json::Map::new();
            for k in [
                "toolName",
                "decision",
                "priority",
                "source",
                "mcpName",
                "denyMessage",
            ] {
                m.insert(k.into(), r.get(k).cloned().unwrap_or(Value::Null));
            }
            Value::Object(m)
        };
        out.insert("rule".into(), rule);
    }
    let mut errs: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut m = BTreeMap::new();
            for k in ["file", "tier", "type", "message", "severity", "ruleIndex"] {
                m.insert(k, e.get(k).cloned().unwrap_or(Value::Null));
            }
            serde_json::to_string(&m).unwrap()
        })
        .collect();
    errs.sort();
    out.insert("errors".into(), errs.into());
    Value::Object(out)
}

#[test]
fn all_reference_cases_in_process() {
    let cases: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string("tests/data/policy_reference_cases.json").unwrap(),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("workspace");
    let home = root.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let ws = std::fs::canonicalize(&ws).unwrap();
    let place = Place {
        workspace: ws.to_string_lossy().into_owned(),
        home: std::fs::canonicalize(&home)
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        hermetic: false,
    };
    let only = std::env::var("CASE").ok();
    let mut failures = vec![];
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        if only.as_deref().is_some_and(|o| o != id) {
            continue;
        }
        let dir = root.path().join("cases").join(id);
        let mut q = Question {
            policy_dirs: vec![],
            extensions: vec![],
            defaults: case["defaults"].as_bool().unwrap(),
            options: Options {
                non_interactive: !case["interactive"].as_bool().unwrap(),
                mode: Mode::parse(case["mode"].as_str().unwrap()).unwrap(),
                disable_always_allow: case["disableAlwaysAllow"].as_bool().unwrap(),
                trusted: !case["untrusted"].as_bool().unwrap(),
            },
            tool: case["tool"].as_str().unwrap().to_string(),
            args: json::parse(case["argsJson"].as_str().unwrap_or("{}")).unwrap(),
            server: case["server"].as_str().map(str::to_string),
            annotations: case["annotationsJson"]
                .as_str()
                .map(|a| json::parse(a).unwrap()),
            subagent: case["subagent"].as_str().map(str::to_string),
        };
        for (i, d) in case["policyDirs"].as_array().unwrap().iter().enumerate() {
            let p = dir.join(format!("dir{i}"));
            write_files(&p, d["files"].as_object().unwrap());
            q.policy_dirs
                .push((Tier::parse(d["tier"].as_str().unwrap()).unwrap(), p));
        }
        for (i, e) in case
            .get("extensions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let p = dir.join(format!("ext{i}"));
            write_files(&p, e["files"].as_object().unwrap());
            q.extensions
                .push((e["name"].as_str().unwrap().to_string(), p));
        }
        let a = answer(&q, place.clone());
        let got = normalize(&serde_json::from_str(&a.json).unwrap(), i64::from(a.exit));
        let exp = &case["expected"];
        let want = normalize(exp, exp["exit"].as_i64().unwrap());
        if std::env::var("SHOW").is_ok() {
            eprintln!("{id}\n  want {want}\n  got  {got}");
        }
        if got != want {
            failures.push(format!(
                "{id} [{}]\n  want {want}\n  got  {got}",
                case["family"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
