//! The questions module against outcomes recorded from the reference implementation
//! (`AskUserTool` in `@google/gemini-cli-core` 0.61.0; see tests/data/ and the conformance
//! README the cases came with). Every disagreement is listed before the test fails, so one
//! run shows the whole picture rather than the first mismatch.

use std::collections::BTreeMap;

use askbus::protocol::RequestQuestions;
#[cfg(feature = "fast")]
use askbus::questions::fast::{check_request, normalize as normalize_plain};
use askbus::questions::{answered_result, check, dismissed_result, meta, normalize, validate};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn validation_agrees_with_reference() {
    let cases = load("ask_user_reference_cases.json");
    assert_eq!(cases.len(), 1035, "the reference case file changed size");
    let mut disagreements = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let got = validate(&case["params"]);
        let agrees = match (case["ok"].as_bool(), &got) {
            (Some(true), Ok(normalized)) => {
                Some(&Value::Array(normalized.clone())) == case.get("normalized")
            }
            (Some(false), Err(e)) => case["error"].as_str() == Some(e.as_str()),
            _ => false,
        };
        if !agrees {
            disagreements.push(format!(
                "case {n}: params {}\n  expected {}\n  got {got:?}",
                case["params"],
                if case["ok"] == true {
                    case["normalized"].to_string()
                } else {
                    case["error"].to_string()
                }
            ));
        }
    }
    let agreed = cases.len() - disagreements.len();
    println!(
        "validation: {agreed}/{} agree with the reference",
        cases.len()
    );
    for d in disagreements.iter().take(30) {
        println!("{d}");
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements",
        disagreements.len()
    );
}

/// The daemon's fast path must say exactly what the reference says wherever it
/// speaks, and must speak for most of the valid cases (else it is not worth having).
#[cfg(feature = "fast")]
#[test]
fn fast_path_agrees_with_the_reference() {
    let cases = load("ask_user_reference_cases.json");
    let (mut taken, mut valid, mut taken_in_frames) = (0, 0, 0);
    for (n, case) in cases.iter().enumerate() {
        let Some(questions) = case["params"].get("questions") else {
            continue;
        };
        let tree = normalize(&case["params"]);
        valid += usize::from(tree.is_ok());
        // The daemon's whole-frame pass: the same questions inside a request.
        let id = format!("case-{n}");
        let frame = serde_json::json!({"type": "ask-user-request", "correlationId": id,
            "timeoutMs": 5000, "questions": questions})
        .to_string();
        if let Some((head, one)) = check_request(frame.as_bytes()) {
            taken_in_frames += 1;
            let tree = tree
                .as_ref()
                .unwrap_or_else(|e| panic!("case {n}: fast frame path accepted, reference: {e}"));
            assert_eq!(one.questions, tree.questions, "case {n}");
            assert_eq!(one.meta, tree.meta, "case {n}");
            assert_eq!(head.correlation_id, id);
        }
        if let Some(plain) = normalize_plain(&questions.to_string()) {
            taken += 1;
            let tree =
                tree.unwrap_or_else(|e| panic!("case {n}: fast path accepted, reference: {e}"));
            assert_eq!(plain.questions, tree.questions, "case {n}");
            assert_eq!(plain.meta, tree.meta, "case {n}");
        }
        // And through `check`, the entry point the daemon uses, from the raw text.
        let raw = serde_json::value::to_raw_value(questions).unwrap();
        let checked = check(RequestQuestions::Raw(raw));
        match (checked, normalize(&case["params"])) {
            (Ok(a), Ok(b)) => assert_eq!(a.questions, b.questions, "case {n}"),
            (Err(a), Err(b)) => assert_eq!(a, b, "case {n}"),
            (a, b) => panic!("case {n}: check {a:?}, normalize {b:?}"),
        }
    }
    println!("fast path took {taken} of {valid} valid cases");
    assert_eq!(
        taken_in_frames, taken,
        "the whole-frame pass must take what the questions pass takes"
    );
    assert!(
        taken * 2 > valid,
        "the fast path took only {taken} of {valid}"
    );
}

#[test]
fn the_size_bound_is_never_below_the_result_of_a_reference_case() {
    for case in load("ask_user_result_cases.json")
        .iter()
        .filter(|c| c["cancelled"] == false)
    {
        let normalized = validate(&case["params"]).unwrap();
        let m = meta(&normalized);
        let answers: BTreeMap<usize, String> = case["answers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_str().unwrap().to_owned()))
            .collect();
        let r = answered_result(&m, &answers);
        let bound = askbus::questions::answered_result_size_bound(&m, &answers);
        assert!(
            bound >= r.llm_content.len() + r.return_display.len(),
            "{case}"
        );
    }
}

#[test]
fn results_agree_with_reference() {
    let cases = load("ask_user_result_cases.json");
    assert_eq!(cases.len(), 120, "the result case file changed size");
    let mut disagreements = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let normalized = validate(&case["params"]).expect("result cases use valid params");
        let m = meta(&normalized);
        let got = if case["cancelled"] == true {
            dismissed_result(&m)
        } else {
            let answers: BTreeMap<usize, String> = case["answers"]
                .as_object()
                .expect("answers is an object")
                .iter()
                .map(|(k, v)| {
                    let i = k.parse().expect("answer keys are indices");
                    (i, v.as_str().expect("answers are strings").to_owned())
                })
                .collect();
            answered_result(&m, &answers)
        };
        let want = &case["result"];
        let mut wrong = Vec::new();
        if want["llmContent"].as_str() != Some(got.llm_content.as_str()) {
            wrong.push(format!(
                "llmContent: want {} got {:?}",
                want["llmContent"], got.llm_content
            ));
        }
        if want["returnDisplay"].as_str() != Some(got.return_display.as_str()) {
            wrong.push(format!(
                "returnDisplay: want {} got {:?}",
                want["returnDisplay"], got.return_display
            ));
        }
        let data = serde_json::to_value(&got.data).expect("data serializes");
        if want["data"] != data {
            wrong.push(format!("data: want {} got {data}", want["data"]));
        }
        if !wrong.is_empty() {
            disagreements.push(format!("case {n}: {}", wrong.join("\n  ")));
        }
    }
    let agreed = cases.len() - disagreements.len();
    println!("results: {agreed}/{} agree with the reference", cases.len());
    for d in disagreements.iter().take(30) {
        println!("{d}");
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements",
        disagreements.len()
    );
}
