//! The 610 policy reference cases (shared/conformance, copied into policy/tests/data), each run
//! end to end through the real `askbus policy test` binary, with its `argv`, an empty
//! `workspace` directory as cwd and an empty HOME elsewhere, as the cases were made.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn write_files(dir: &Path, files: &serde_json::Map<String, Value>) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text.as_str().unwrap()).unwrap();
    }
}

/// What the contract compares: exit, decision, rule (missing = null), errors as a multiset.
fn normalize(v: &Value, exit: i64) -> Value {
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
        .expect("errors")
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
fn every_policy_reference_case_through_askbus_policy_test() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/tests/data/policy_reference_cases.json"),
    )
    .unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 610);
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("workspace");
    let home = root.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mut failures = vec![];
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        let dir = root.path().join("cases").join(id);
        let mut subst: Vec<(String, String)> = vec![];
        for (i, d) in case["policyDirs"].as_array().unwrap().iter().enumerate() {
            let p = dir.join(format!("dir{i}"));
            write_files(&p, d["files"].as_object().unwrap());
            subst.push((format!("$DIR{i}"), p.to_string_lossy().into_owned()));
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
            subst.push((format!("$EXT{i}"), p.to_string_lossy().into_owned()));
        }
        // Longest names first, so $DIR1 never eats the front of $DIR10.
        subst.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        let argv: Vec<String> = case["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let mut a = a.as_str().unwrap().to_string();
                for (k, v) in &subst {
                    a = a.replace(k.as_str(), v);
                }
                a
            })
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_askbus"))
            .args(&argv)
            .current_dir(&ws)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap();
        let exit = i64::from(out.status.code().unwrap_or(-1));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got = match serde_json::from_str::<Value>(&stdout) {
            Ok(v) => normalize(&v, exit),
            Err(_) => Value::String(format!(
                "exit {exit}, stdout {stdout:?}, stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            )),
        };
        let exp = &case["expected"];
        let want = normalize(exp, exp["exit"].as_i64().unwrap());
        if got != want {
            failures.push(format!("{id}\n  want {want}\n  got  {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
