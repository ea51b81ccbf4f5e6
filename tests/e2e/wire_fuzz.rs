//! Black-box wire fuzzing of the real daemon: mutated frames (bit flips, truncations, wrong
//! types in every field, deep nesting, huge strings, invalid UTF-8, lying length prefixes)
//! from several connections, while a legitimate producer/UI pair keeps exchanging questions.
//! The daemon must never exit, the pair must lose nothing, and every malformed frame must get
//! the error code an independent oracle predicts, or a closed connection.
//!
//! `ASKBUS_FUZZ_FRAMES` sets the number of frames (default 200,000); `ASKBUS_FUZZ_SEED` the seed.

use crate::harness as common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{answer, Daemon};
use serde_json::{json, Value};

const FUZZERS: usize = 4;
const BATCH: usize = 64;

/// Frames to mutate: every kind a peer may send, valid to begin with.
fn seeds() -> Vec<Value> {
    let q = json!([
        {"question": "Pick one", "header": "DB", "type": "choice", "multiSelect": false,
         "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]},
        {"question": "Name?", "header": "Name", "type": "text", "placeholder": "x"},
        {"question": "Ok?", "header": "Ok", "type": "yesno"}
    ]);
    vec![
        json!({"type": "hello", "protocol": 1, "client": "fuzz/1"}),
        json!({"type": "ping", "id": 3}),
        json!({"type": "stats"}),
        json!({"type": "ask-user-request", "correlationId": "fz-1", "questions": q, "timeoutMs": 50, "noUi": "wait"}),
        json!({"type": "ask-user-cancel", "correlationId": "fz-1"}),
        json!({"type": "ask-user-response", "correlationId": "fz-2", "answers": {"0": "A", "1": "x"}, "cancelled": false}),
        json!({"type": "subscribe", "client": "fuzz-ui"}),
        json!({"type": "watch"}),
    ]
}

/// A value of some other JSON type than `v`.
fn wrong_type(rng: &mut fastrand::Rng, v: &Value) -> Value {
    let choices = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1.5e300),
        json!(""),
        json!("x".repeat(rng.usize(0..300))),
        json!([]),
        json!([1, "a", null]),
        json!({}),
        json!({"nested": {"deeper": [v.clone()]}}),
    ];
    choices[rng.usize(0..choices.len())].clone()
}

/// Replaces one randomly chosen value anywhere in `v` (including the frame's own fields).
fn mutate_field(rng: &mut fastrand::Rng, v: &mut Value) {
    match v {
        Value::Object(map) if !map.is_empty() && rng.u8(0..4) != 0 => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.usize(0..keys.len())];
            if rng.u8(0..5) == 0 {
                map.remove(key);
            } else {
                mutate_field(rng, map.get_mut(key).unwrap());
            }
        }
        Value::Array(items) if !items.is_empty() && rng.u8(0..4) != 0 => {
            let i = rng.usize(0..items.len());
            mutate_field(rng, &mut items[i]);
        }
        other => *other = wrong_type(rng, other),
    }
}

fn nested(depth: usize) -> String {
    "[".repeat(depth) + &"]".repeat(depth)
}

/// One mutated payload (sent behind a correct length prefix).
fn mutated_payload(rng: &mut fastrand::Rng, seeds: &[Value], max: usize) -> Vec<u8> {
    let mut frame = seeds[rng.usize(0..seeds.len())].clone();
    match rng.u8(0..10) {
        0..=3 => {
            mutate_field(rng, &mut frame);
            frame.to_string().into_bytes()
        }
        4 => {
            // Bit flips.
            let mut bytes = frame.to_string().into_bytes();
            for _ in 0..rng.usize(1..4) {
                let i = rng.usize(0..bytes.len());
                bytes[i] ^= 1 << rng.u8(0..8);
            }
            bytes
        }
        5 => {
            let bytes = frame.to_string().into_bytes();
            bytes[..rng.usize(0..bytes.len())].to_vec()
        }
        6 => {
            // Invalid UTF-8 inside a string.
            let text = frame.to_string();
            let at = text.find("\":\"").map_or(1, |i| i + 3);
            let mut bytes = text.into_bytes();
            bytes.splice(at..at, [0xff, 0xc3, 0x28]);
            bytes
        }
        7 => {
            // Nesting past what any parser should recurse into, in a field or as the frame.
            let depth = rng.usize(100..5000);
            if rng.bool() {
                nested(depth).into_bytes()
            } else {
                format!(r#"{{"type":"ping","id":{}}}"#, nested(depth)).into_bytes()
            }
        }
        8 => {
            // A huge string, up to the frame limit.
            let len = rng.usize(1000..max - 64);
            frame["client"] = json!("y".repeat(len));
            let mut bytes = frame.to_string().into_bytes();
            bytes.truncate(max);
            bytes
        }
        _ => {
            let len = rng.usize(0..64);
            (0..len).map(|_| rng.u8(..)).collect()
        }
    }
}

/// What the daemon must answer for a payload, decided without the daemon's code: `Some(code)`
/// for a frame it must reject with that code before looking further, `None` when the frame is
/// well-formed enough that its verdict depends on content (any valid reply is fine).
fn oracle(payload: &[u8]) -> Option<&'static str> {
    let Ok(v) = serde_json::from_slice::<Value>(payload) else {
        return Some("invalid-json");
    };
    let Value::Object(obj) = v else {
        return Some("invalid-frame");
    };
    let Some(Value::String(ty)) = obj.get("type") else {
        return Some("invalid-frame");
    };
    let known = [
        "hello",
        "ping",
        "stats",
        "subscribe",
        "watch",
        "ask-user-request",
        "ask-user-cancel",
        "ask-user-response",
    ];
    if !known.contains(&ty.as_str()) {
        return Some("unknown-type");
    }
    None
}

const CODES: [&str; 16] = [
    "invalid-json",
    "invalid-frame",
    "unknown-type",
    "frame-too-large",
    "invalid-request",
    "duplicate-correlation-id",
    "too-many-pending",
    "not-pending",
    "not-subscribed",
    "invalid-response",
    "unsupported-protocol",
    "forbidden",
    "too-many-connections",
    "frame-timeout",
    "origin-unreachable",
    "store-unavailable",
];

#[derive(Default, Debug)]
struct Tally {
    frames: usize,
    predicted_errors: usize,
    closed_connections: usize,
    by_code: HashMap<String, usize>,
}

async fn fuzz_connection(d: Arc<Daemon>, seed: u64, frames: usize, max: usize) -> Tally {
    let mut rng = fastrand::Rng::with_seed(seed);
    let seeds = seeds();
    let mut tally = Tally::default();
    let mut conn = d.connect().await;
    let mut sync = 0u64;
    while tally.frames < frames {
        // Now and then, a lying length prefix on a throwaway connection.
        if rng.u16(0..2000) == 0 {
            let mut liar = d.connect().await;
            let declared = if rng.bool() {
                u32::MAX
            } else {
                (max + 1) as u32
            };
            liar.send_raw(&declared.to_be_bytes()).await;
            liar.recv_error("frame-too-large").await;
            liar.expect_closed().await;
            tally.frames += 1;
            tally.closed_connections += 1;
            continue;
        }
        let batch: Vec<Vec<u8>> = (0..BATCH.min(frames - tally.frames))
            .map(|_| mutated_payload(&mut rng, &seeds, max))
            .collect();
        let mut expected: HashMap<&'static str, usize> = HashMap::new();
        for payload in &batch {
            conn.send_payload(payload).await;
            if let Some(code) = oracle(payload) {
                *expected.entry(code).or_default() += 1;
            }
        }
        tally.frames += batch.len();
        sync += 1;
        conn.send(json!({"type": "ping", "id": format!("sync-{sync}")}))
            .await;
        let mut got: HashMap<String, usize> = HashMap::new();
        let mut closed = false;
        loop {
            let Some(f) = conn.recv_within(Duration::from_secs(10)).await else {
                closed = true;
                break;
            };
            if f["type"] == "pong" && f["id"] == format!("sync-{sync}") {
                break;
            }
            if f["type"] == "error" {
                let code = f["code"]
                    .as_str()
                    .expect("error frames carry a code")
                    .to_owned();
                assert!(CODES.contains(&code.as_str()), "unknown code {code}");
                assert!(f["message"].as_str().is_some_and(|m| !m.is_empty()));
                *got.entry(code).or_default() += 1;
            }
        }
        for (code, n) in &got {
            *tally.by_code.entry(code.clone()).or_default() += n;
        }
        if closed {
            // Only a frame whose error closes the connection may end it, and it must have
            // said so first.
            let closing = ["unsupported-protocol"];
            assert!(
                closing.iter().any(|c| got.contains_key(*c)),
                "connection closed without a closing error; got {got:?}"
            );
            tally.closed_connections += 1;
            conn = d.connect().await;
            continue;
        }
        for (code, n) in expected {
            let seen = got.get(code).copied().unwrap_or(0);
            assert!(seen >= n, "expected {n} × {code}, got {got:?}");
            tally.predicted_errors += n;
        }
    }
    tally
}

#[test]
fn the_daemon_survives_mutated_frames_and_the_legitimate_pair_loses_nothing() {
    let total: usize = std::env::var("ASKBUS_FUZZ_FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let seed: u64 = std::env::var("ASKBUS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("fuzzing with ASKBUS_FUZZ_SEED={seed}");
    let max = 64 * 1024;
    let d = Arc::new(Daemon::start_with(&[
        "--max-frame-bytes",
        &max.to_string(),
        "--no-telemetry",
        "--max-timeout-ms",
        "1000",
    ]));
    let rt = common::rt();
    let started = Instant::now();
    let (tallies, exchanged) = rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let legit = tokio::spawn(legitimate_pair(d.clone(), stop.clone()));
        let fuzzers: Vec<_> = (0..FUZZERS)
            .map(|i| {
                let d = d.clone();
                tokio::spawn(fuzz_connection(
                    d,
                    seed.wrapping_add(i as u64),
                    total / FUZZERS,
                    max,
                ))
            })
            .collect();
        let mut tallies = Vec::new();
        for f in fuzzers {
            tallies.push(f.await.expect("fuzzer task"));
        }
        stop.store(true, Ordering::Relaxed);
        (tallies, legit.await.expect("legitimate pair"))
    });
    let frames: usize = tallies.iter().map(|t| t.frames).sum();
    let predicted: usize = tallies.iter().map(|t| t.predicted_errors).sum();
    let closed: usize = tallies.iter().map(|t| t.closed_connections).sum();
    let mut by_code: HashMap<String, usize> = HashMap::new();
    for t in &tallies {
        for (c, n) in &t.by_code {
            *by_code.entry(c.clone()).or_default() += n;
        }
    }
    eprintln!(
        "{frames} mutated frames in {:?}: {predicted} rejections predicted by the oracle and matched, {closed} connections closed, \
         errors by code {by_code:?}; legitimate pair exchanged {exchanged} questions, none lost",
        started.elapsed()
    );
    assert!(frames >= total - FUZZERS);
    let d = Arc::try_unwrap(d).ok().expect("all tasks done");
    let mut d = d;
    assert!(d.is_running(), "the daemon exited:\n{}", d.log_text());
}

/// Asks and answers continuously until `stop`; every question must come back answered with
/// exactly the answer sent for it. Returns how many round trips it made.
async fn legitimate_pair(d: Arc<Daemon>, stop: Arc<AtomicBool>) -> usize {
    let mut producer = d.connect().await;
    let mut ui = d.connect().await;
    ui.send(json!({"type": "subscribe", "client": "legit-ui"}))
        .await;
    ui.recv_type("subscribed").await;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = format!("legit-{n}-{}", fastrand::u64(..));
        producer.send(common::choice_request(&id)).await;
        // The UI also sees fuzzers' requests; it answers only its own.
        loop {
            let f = ui.recv().await;
            if f["type"] == "ask-user-request" && f["correlationId"] == id.as_str() {
                break;
            }
        }
        ui.send(answer(&id, json!({"0": format!("answer-{n}")})))
            .await;
        let resp = producer.recv_type("ask-user-response").await;
        assert_eq!(resp["correlationId"], id.as_str());
        assert_eq!(resp["answers"]["0"], format!("answer-{n}"));
        n += 1;
    }
    n
}
