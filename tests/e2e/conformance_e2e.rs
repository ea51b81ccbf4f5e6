//! The shared reference cases end to end through the real daemon: every accepted parameter
//! set reaches a UI exactly as the reference normalizes it, every rejected one gets the
//! reference's message, and every result case hands the producer the reference's result.

use crate::harness as common;

use std::collections::HashMap;

use common::Daemon;
use serde_json::{json, Map, Value};

fn cases(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/clients/rust/tests/data/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The frame for a parameter set: the params object is the frame, plus our fields.
fn frame_for(params: &Value, id: &str) -> Value {
    let mut frame = Map::new();
    frame.insert("type".into(), json!("ask-user-request"));
    frame.insert("correlationId".into(), json!(id));
    for (k, v) in params
        .as_object()
        .expect("params are objects in every case")
    {
        frame.insert(k.clone(), v.clone());
    }
    Value::Object(frame)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_reference_validation_cases_agree_through_the_daemon() {
    let cases = cases("ask_user_reference_cases.json");
    assert_eq!(cases.len(), 1035);
    let d = Daemon::start_with(&["--max-pending-per-connection", "2000", "--no-telemetry"]);
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    // Pipeline every case, then read the verdicts.
    for (i, case) in cases.iter().enumerate() {
        producer
            .send(frame_for(&case["params"], &format!("case-{i}")))
            .await;
    }
    producer.send(json!({"type": "ping"})).await;
    let mut errors: HashMap<String, Value> = HashMap::new();
    loop {
        let f = producer.recv().await;
        match f["type"].as_str().unwrap() {
            "pong" => break,
            "error" => {
                errors.insert(f["correlationId"].as_str().unwrap().to_owned(), f);
            }
            other => panic!("unexpected {other}: {f}"),
        }
    }
    let accepted = cases.iter().filter(|c| c["ok"] == true).count();
    let mut received: HashMap<String, Value> = HashMap::new();
    for _ in 0..accepted {
        let r = ui.recv_type("ask-user-request").await;
        received.insert(
            r["correlationId"].as_str().unwrap().to_owned(),
            r["questions"].clone(),
        );
    }
    let mut agree = 0;
    let mut disagree = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = format!("case-{i}");
        let ok = if case["ok"] == true {
            received.get(&id) == Some(&case["normalized"]) && !errors.contains_key(&id)
        } else {
            errors
                .get(&id)
                .is_some_and(|e| e["code"] == "invalid-request" && e["message"] == case["error"])
                && !received.contains_key(&id)
        };
        if ok {
            agree += 1;
        } else {
            disagree.push(i);
        }
    }
    eprintln!(
        "reference validation cases through the daemon: {agree}/{} agree",
        cases.len()
    );
    assert!(disagree.is_empty(), "cases disagreeing: {disagree:?}");
    // Accepted questions are forwarded byte-for-byte in the reference's key order too.
    let first_ok = cases.iter().position(|c| c["ok"] == true).unwrap();
    let got = serde_json::to_string(&received[&format!("case-{first_ok}")]).unwrap();
    assert_eq!(
        got,
        serde_json::to_string(&cases[first_ok]["normalized"]).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_reference_result_cases_agree_through_the_daemon() {
    let cases = cases("ask_user_result_cases.json");
    assert_eq!(cases.len(), 120);
    let d = Daemon::start_with(&["--max-pending-per-connection", "500", "--no-telemetry"]);
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    let mut agree = 0;
    let mut disagree = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = format!("result-{i}");
        producer.send(frame_for(&case["params"], &id)).await;
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], id);
        let response = if case["cancelled"] == true {
            json!({"type": "ask-user-response", "correlationId": id, "answers": {}, "cancelled": true})
        } else {
            // The answers in the order the reference was given them.
            let mut answers = Map::new();
            for key in case["answerOrder"].as_array().unwrap() {
                let key = key.as_str().unwrap();
                answers.insert(key.to_owned(), case["answers"][key].clone());
            }
            json!({"type": "ask-user-response", "correlationId": id, "answers": answers})
        };
        ui.send(response).await;
        ui.recv_type("ask-user-ack").await;
        let got = producer.recv_type("ask-user-response").await;
        let expected = &case["result"];
        let same = got["result"]["llmContent"] == expected["llmContent"]
            && got["result"]["returnDisplay"] == expected["returnDisplay"]
            && got["result"]["data"] == expected["data"]
            && serde_json::to_string(&got["result"]["data"]).unwrap()
                == serde_json::to_string(&expected["data"]).unwrap();
        if same {
            agree += 1;
        } else {
            eprintln!("case {i}: got {}\nexpected {}", got["result"], expected);
            disagree.push(i);
        }
    }
    eprintln!(
        "reference result cases through the daemon: {agree}/{} agree",
        cases.len()
    );
    assert!(disagree.is_empty(), "cases disagreeing: {disagree:?}");
}
