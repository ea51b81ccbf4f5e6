//! Micro-benchmarks of the daemon's hot path, in time per operation: turning an inbound frame's
//! payload into what the broker takes (a question's, and an approval's beside it), encoding the
//! frames it sends, and the pure broker's insert / resolve / expire at a realistic pending-table
//! size.
//!
//! Inputs come from proto/examples/ (golden frames, read at startup and sent compact, as
//! producers write them) where one fits; the typical one-choice request and the four-question
//! mixed one are built here. Before measuring, each benchmark checks that its input takes the
//! success path, so a protocol change cannot turn it into a benchmark of an error.
//!
//! Run: `cargo bench --bench hot_path` (about two minutes; `-- --quick` gives rough figures in
//! seconds). `cargo test --bench hot_path` runs each benchmark once, as a test of its set-up.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use askbusd::broker::{
    Broker, Effects, Limits, Msg, PeerId, PeerInfo, ReplayBudget, ReplayStep, Valid,
};
use askbusd::intake::{self, Request};
use askbusd::protocol::{
    self, codec, encode, encode_fast, AskUserRequest, AskUserResponse, End, Inbound, ProducerInfo,
    RequestQuestions, ServerFrame, UiRequest, UiRequestRef,
};
use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::{json, Value};
use tokio_util::codec::Encoder;

/// The broker's clock type (tokio's, which outside a runtime is the system's monotonic clock).
type Now = tokio::time::Instant;

/// Pending requests in the table while broker operations are measured.
const PREFILL: usize = 10_000;
/// Producers the prefill is spread over: 100 each stays under the per-connection quota (128).
const PREFILL_PRODUCERS: u64 = 100;
/// Operations timed back to back between untimed set-up and clean-up steps. Small enough that
/// the table stays near `PREFILL` and under the bench producer's quota.
const CHUNK: u64 = 64;
/// Deadline of the prefilled requests: far beyond anything the expire benchmark reaches.
const PREFILL_TIMEOUT_MS: u64 = 86_400_000;
/// Timeout of the requests the benchmarks ask (the golden request's).
const TIMEOUT_MS: u64 = 120_000;

const UI: PeerId = 1;
const PRODUCER: PeerId = 2;

fn golden(rel: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples")
        .join(rel);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A frame's payload as a peer sends it: compact JSON, keys in the order written.
fn compact(frame: &Value) -> Vec<u8> {
    serde_json::to_vec(frame).expect("a JSON value serializes")
}

/// The typical request: one choice question with three options (343 bytes compact).
fn choice3() -> Value {
    json!({
        "type": "ask-user-request",
        "correlationId": "7c0d2f4e-3b1a-4c9e-8f53-2a6d9e1b4c70",
        "questions": [{
            "question": "Which database should we use?",
            "header": "Database",
            "type": "choice",
            "options": [
                {"label": "SQLite", "description": "One file"},
                {"label": "PostgreSQL", "description": "A server"},
                {"label": "DuckDB", "description": "Embedded"}
            ]
        }],
        "timeoutMs": TIMEOUT_MS
    })
}

/// A larger request: every question type, a multi-select, escaped newlines to normalize.
fn mixed4() -> Value {
    json!({
        "type": "ask-user-request",
        "correlationId": "0b9f6c1e-58d2-4a7b-9e31-c4d8a2f05e17",
        "questions": [
            {
                "question": "Which database should the new service use?",
                "header": "Database",
                "type": "choice",
                "options": [
                    {"label": "SQLite", "description": "A single file; nothing to run"},
                    {"label": "PostgreSQL", "description": "A server; best for many writers"},
                    {"label": "DuckDB", "description": "Embedded, columnar"}
                ]
            },
            {
                "question": "Which environments should get the migration?",
                "header": "Targets",
                "type": "choice",
                "multiSelect": true,
                "options": [
                    {"label": "dev", "description": "Local and CI databases"},
                    {"label": "staging", "description": "The shared pre-release stack"},
                    {"label": "prod", "description": "Customer data; needs a window"},
                    {"label": "dr", "description": "The disaster-recovery replica"}
                ]
            },
            {
                "question": "Add a migration for the existing users table?\\nIt renames two columns.",
                "header": "Migrate",
                "type": "yesno"
            },
            {
                "question": "What should the migration be called?",
                "header": "Name",
                "type": "text",
                "placeholder": "e.g. 0042_rename_user_columns"
            }
        ],
        "timeoutMs": TIMEOUT_MS
    })
}

/// What `Conn::handle` does with a plain ask-user-request's payload before the broker takes
/// it: the door, `intake::read`, which takes these plain questions on its fast path.
fn decode_request(payload: &[u8]) -> Valid {
    match intake::read(payload) {
        Ok(Request::Ask(req)) => req,
        other => panic!("not a valid ask-user-request: {other:?}"),
    }
}

/// The reference path, which decides every frame and words every error: the reference parser
/// (no fast envelope) and the reference validation and normalization of the questions (no
/// one-pass shortcut). `fast/NAME` against `reference/NAME` is what the fast paths save.
fn decode_request_reference(payload: &[u8]) -> askbusd::questions::Normalized {
    match protocol::parse::reference::parse(payload) {
        Ok(Inbound::AskUserRequest(req)) => {
            askbusd::questions::normalize(&req.questions.into_params())
                .expect("questions are valid")
        }
        other => panic!("not a valid ask-user-request: {other:?}"),
    }
}

/// The fast parser alone (the frame's own fields; the questions kept as their text).
fn parse_request(payload: &[u8]) -> AskUserRequest {
    match protocol::parse::fast::parse(payload) {
        Some(Inbound::AskUserRequest(req)) => req,
        other => panic!("not an ask-user-request: {other:?}"),
    }
}

fn parse_response(payload: &[u8]) -> AskUserResponse {
    match protocol::parse::fast::parse(payload) {
        Some(Inbound::AskUserResponse(resp)) => resp,
        other => panic!("not an ask-user-response: {other:?}"),
    }
}

fn bench_decode(c: &mut Criterion) {
    let inputs = [
        ("choice3", compact(&choice3())),
        ("golden2", compact(&golden("client/ask-user-request.json"))),
        ("mixed4", compact(&mixed4())),
    ];
    let mut g = c.benchmark_group("decode_validate_normalize");
    for (name, payload) in &inputs {
        decode_request(payload);
        g.throughput(Throughput::Bytes(payload.len() as u64));
        g.bench_function(format!("fast/{name}"), |b| {
            b.iter(|| decode_request(black_box(payload)))
        });
        decode_request_reference(payload);
        g.bench_function(format!("reference/{name}"), |b| {
            b.iter(|| decode_request_reference(black_box(payload)))
        });
    }
    g.finish();

    // The two halves of the typical request's cost: the frame's own fields, then the questions.
    let payload = &inputs[0].1;
    let mut g = c.benchmark_group("decode_parts");
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function("parse_inbound/choice3", |b| {
        b.iter(|| parse_request(black_box(payload)))
    });
    g.bench_function("check/choice3", |b| {
        b.iter_batched(
            || parse_request(payload),
            |req| match req.questions {
                RequestQuestions::Raw(raw) => {
                    askbusd::questions::fast::normalize(raw.get()).expect("questions are plain")
                }
                RequestQuestions::Params(_) => panic!("the fast parser keeps questions as text"),
            },
            BatchSize::SmallInput,
        )
    });
    let response = compact(&golden("client/ask-user-response.json"));
    assert_eq!(parse_response(&response).answers.len(), 2);
    g.throughput(Throughput::Bytes(response.len() as u64));
    g.bench_function("parse_inbound/response", |b| {
        b.iter(|| parse_response(black_box(&response)))
    });
    g.finish();
}

/// The reference path of an approval: the reference parser, then `approvals::check`.
fn decode_approval_reference(payload: &[u8]) -> askbusd::approvals::ValidApproval {
    match protocol::parse::reference::parse(payload) {
        Ok(Inbound::ToolConfirmationRequest(req)) => {
            askbusd::approvals::check(req).expect("the approval is valid")
        }
        other => panic!("not a valid tool-confirmation-request: {other:?}"),
    }
}

/// An approval costs what a question does (issue 18): each golden approval's fast and
/// reference decode, beside the typical question's fast decode in the same group.
fn bench_decode_approval(c: &mut Criterion) {
    let question = compact(&choice3());
    let inputs = [
        (
            "exec",
            compact(&golden("client/tool-confirmation-request.json")),
        ),
        (
            "edit",
            compact(&golden("client/tool-confirmation-request.edit.json")),
        ),
        (
            "mcp",
            compact(&golden("client/tool-confirmation-request.mcp.json")),
        ),
    ];
    let mut g = c.benchmark_group("decode_validate_approval");
    decode_request(&question);
    g.throughput(Throughput::Bytes(question.len() as u64));
    g.bench_function("question_fast/choice3", |b| {
        b.iter(|| decode_request(black_box(&question)))
    });
    for (name, payload) in &inputs {
        let fast = askbusd::approvals::fast::check_request(payload)
            .unwrap_or_else(|| panic!("the {name} approval takes the fast path"));
        assert_eq!(fast, decode_approval_reference(payload), "{name}");
        g.throughput(Throughput::Bytes(payload.len() as u64));
        g.bench_function(format!("fast/{name}"), |b| {
            b.iter(|| askbusd::approvals::fast::check_request(black_box(payload)))
        });
        g.bench_function(format!("reference/{name}"), |b| {
            b.iter(|| decode_approval_reference(black_box(payload)))
        });
    }
    g.finish();
}

fn bench_encode(c: &mut Criterion) {
    // The UI-bound request as the broker encodes it: its questions are already JSON text.
    let golden_ui = golden("server/ask-user-request.json");
    let ui: UiRequest = match serde_json::from_value(golden_ui.clone()) {
        Ok(ServerFrame::AskUserRequest(r)) => r,
        other => panic!("not a server ask-user-request: {other:?}"),
    };
    let questions = serde_json::to_string(&ui.questions).expect("questions serialize");
    let producer: ProducerInfo = ui.producer.clone();
    let ui_ref = UiRequestRef {
        correlation_id: &ui.correlation_id,
        questions: &questions,
        timeout_ms: ui.timeout_ms,
        producer: &producer,
        context: ui.context.as_deref(),
        node: None,
    };
    assert_eq!(
        ui_ref.encode(),
        compact(&golden_ui),
        "UI request encodes as the golden frame"
    );

    let golden_resp = golden("server/ask-user-response.answered.json");
    let resp: ServerFrame = serde_json::from_value(golden_resp.clone()).expect("golden parses");
    assert_eq!(
        encode(&resp),
        compact(&golden_resp),
        "response encodes as the golden frame"
    );

    let ServerFrame::AskUserResponse(producer_response) = &resp else {
        panic!("not a response")
    };
    assert_eq!(
        encode_fast::response(producer_response),
        compact(&golden_resp),
        "the hand-written response is the golden frame"
    );

    let mut g = c.benchmark_group("encode");
    let ui_frame = ServerFrame::AskUserRequest(ui.clone());
    assert_eq!(
        encode(&ui_frame),
        ui_ref.encode(),
        "fast and reference agree"
    );
    g.bench_function("ui_request/fast", |b| {
        b.iter(|| black_box(&ui_ref).encode())
    });
    g.bench_function("ui_request/reference", |b| {
        b.iter(|| encode(black_box(&ui_frame)))
    });
    g.bench_function("producer_response/fast", |b| {
        b.iter(|| encode_fast::response(black_box(producer_response)))
    });
    g.bench_function("producer_response/reference", |b| {
        b.iter(|| encode(black_box(&resp)))
    });

    // The writer's step: the length prefix and payload appended to the connection's buffer,
    // which is emptied onto the socket between frames (cleared here).
    let frame: Bytes = ui_ref.encode();
    let mut codec = codec(u32::MAX as usize);
    let mut buf = BytesMut::with_capacity(8 * 1024);
    codec.encode(frame.clone(), &mut buf).expect("frame fits");
    assert_eq!(buf.len(), protocol::LENGTH_PREFIX_BYTES + frame.len());
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("length_delimited/ui_request", |b| {
        b.iter(|| {
            buf.clear();
            codec
                .encode(black_box(frame.clone()), &mut buf)
                .expect("frame fits");
        })
    });
    g.finish();
}

/// A broker as the daemon holds it under load: one live UI, `PREFILL` pending requests from
/// `PREFILL_PRODUCERS` producers, and the bench's own producer with nothing pending.
struct Table {
    broker: Broker,
    fx: Effects,
    template: Value,
    t0: Now,
    next_id: u64,
}

impl Table {
    fn new() -> Table {
        let mut broker = Broker::new(Limits::default());
        let mut fx = Effects::default();
        let peer = |client: &str, pid: i32| PeerInfo {
            client: Some(client.to_owned()),
            pid: Some(pid),
            uid: 1000,
            ..PeerInfo::default()
        };
        let t0 = Now::now();
        broker.connect(UI, peer("askbus-ui/0.1.0", 100));
        broker.subscribe(UI, None, Default::default(), &mut fx);
        // Nothing to replay yet: the UI goes live, so every ask below is delivered to it.
        let budget = ReplayBudget {
            frames: 64,
            bytes: usize::MAX,
            room: usize::MAX,
        };
        assert_eq!(broker.replay(UI, budget, t0, &mut fx), ReplayStep::Done);
        broker.connect(PRODUCER, peer("my-agent/1.2.0", 200));
        let mut table = Table {
            broker,
            fx,
            template: choice3(),
            t0,
            next_id: 0,
        };
        for i in 0..PREFILL as u64 {
            let producer = 1000 + i % PREFILL_PRODUCERS;
            if i < PREFILL_PRODUCERS {
                table
                    .broker
                    .connect(producer, peer("my-agent/1.2.0", producer as i32));
            }
            let req = table.request(PREFILL_TIMEOUT_MS);
            table.fx.clear();
            table.broker.ask(producer, req, t0, &mut table.fx);
        }
        assert_eq!(table.broker.pending_len(), PREFILL);
        table.fx.clear();
        table
    }

    /// A fresh validated request (a new correlationId), built the way the connection does.
    fn request(&mut self, timeout_ms: u64) -> Valid {
        self.next_id += 1;
        self.template["correlationId"] = json!(format!("bench-{}", self.next_id));
        self.template["timeoutMs"] = json!(timeout_ms);
        decode_request(&compact(&self.template))
    }

    /// `n` fresh requests; their ids are `bench-{k}` for the next `n` values of `next_id`.
    fn requests(&mut self, n: u64) -> Vec<Valid> {
        (0..n).map(|_| self.request(TIMEOUT_MS)).collect()
    }

    fn sends_to(&self, peer: PeerId) -> usize {
        self.fx
            .sends
            .iter()
            .filter(|(to, msg)| *to == peer && matches!(msg, Msg::Frame(_)))
            .count()
    }
}

/// Runs `iters` operations in chunks of `CHUNK`, timing only `timed` (one operation per call,
/// `Effects` cleared before each as the hub drains it); `prepare` and `cleanup` run untimed
/// around each chunk and keep the table at `PREFILL` pending. Not `iter_batched`: its set-up
/// cannot reach the broker the routine mutates, and inserts must be undone to keep the size.
fn chunked<S>(
    table: &mut Table,
    iters: u64,
    mut prepare: impl FnMut(&mut Table, u64) -> Vec<S>,
    mut timed: impl FnMut(&mut Table, usize, S),
    mut cleanup: impl FnMut(&mut Table, &[String]),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        left -= n;
        let first_id = table.next_id;
        let inputs = prepare(table, n);
        let ids: Vec<String> = (first_id + 1..=table.next_id)
            .map(|i| format!("bench-{i}"))
            .collect();
        let start = std::time::Instant::now();
        for (i, input) in inputs.into_iter().enumerate() {
            table.fx.clear();
            timed(table, i, input);
        }
        total += start.elapsed();
        cleanup(table, &ids);
        assert_eq!(
            table.broker.pending_len(),
            PREFILL,
            "table back to its size"
        );
    }
    total
}

fn bench_broker(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("broker_{PREFILL}_pending"));

    // Insert: a validated request becomes pending and is encoded for the live UI.
    let mut t = Table::new();
    let req = t.request(TIMEOUT_MS);
    t.broker.ask(PRODUCER, req, t.t0, &mut t.fx);
    assert_eq!(t.sends_to(UI), 1, "an ask is delivered to the UI");
    let id = format!("bench-{}", t.next_id);
    t.broker.cancel(PRODUCER, &id, t.t0, &mut t.fx);
    g.bench_function("insert", |b| {
        b.iter_custom(|iters| {
            chunked(
                &mut t,
                iters,
                |t, n| t.requests(n),
                |t, _, req| t.broker.ask(PRODUCER, req, t.t0, &mut t.fx),
                |t, ids| {
                    assert_eq!(t.broker.pending_len(), PREFILL + ids.len());
                    for id in ids {
                        t.broker.cancel(PRODUCER, id, t.t0, &mut t.fx);
                    }
                },
            )
        })
    });

    // Resolve: the UI answers; the producer gets its tool result, the UI its ack.
    let mut t = Table::new();
    let mut answer = golden("client/ask-user-response.json");
    // The typical request has one question: keep the golden answer to it.
    answer["answers"] = json!({ "0": answer["answers"]["0"].clone() });
    let mut respond = |t: &mut Table, n: u64| -> Vec<AskUserResponse> {
        let first = t.next_id;
        for req in t.requests(n) {
            t.broker.ask(PRODUCER, req, t.t0, &mut t.fx);
        }
        t.fx.clear();
        (first + 1..=t.next_id)
            .map(|i| {
                answer["correlationId"] = json!(format!("bench-{i}"));
                parse_response(&compact(&answer))
            })
            .collect()
    };
    let resp = respond(&mut t, 1).pop().expect("one response");
    t.broker.respond(UI, resp, t.t0, &mut t.fx);
    assert_eq!(
        (t.sends_to(UI), t.sends_to(PRODUCER)),
        (1, 1),
        "ack and result"
    );
    assert_eq!(t.broker.stats().ended(End::Answered), 1);
    g.bench_function("resolve", |b| {
        b.iter_custom(|iters| {
            let before = t.broker.stats().ended(End::Answered);
            let d = chunked(
                &mut t,
                iters,
                &mut respond,
                |t, _, resp| t.broker.respond(UI, resp, t.t0, &mut t.fx),
                |_, _| {},
            );
            assert_eq!(
                t.broker.stats().ended(End::Answered) - before,
                iters,
                "every answer won"
            );
            d
        })
    });

    // Expire: each call comes just past one request's deadline, as the hub's timer does.
    let mut t = Table::new();
    // Request i of a chunk is asked i ms after t0, so deadlines are distinct and ordered.
    let asked_at = |t: &Table, i: usize| t.t0 + Duration::from_millis(i as u64);
    let due = Duration::from_millis(TIMEOUT_MS);
    let ask = |t: &mut Table, n: u64| -> Vec<()> {
        for (i, req) in t.requests(n).into_iter().enumerate() {
            t.broker.ask(PRODUCER, req, asked_at(t, i), &mut t.fx);
        }
        t.fx.clear();
        vec![(); n as usize]
    };
    ask(&mut t, 1);
    t.broker.expire(asked_at(&t, 0) + due, &mut t.fx);
    assert_eq!(
        (t.sends_to(UI), t.sends_to(PRODUCER)),
        (1, 1),
        "withdrawn and result"
    );
    assert_eq!(t.broker.stats().ended(End::Timeout), 1);
    g.bench_function("expire", |b| {
        b.iter_custom(|iters| {
            let before = t.broker.stats().ended(End::Timeout);
            let d = chunked(
                &mut t,
                iters,
                ask,
                |t, i, ()| t.broker.expire(asked_at(t, i) + due, &mut t.fx),
                |_, _| {},
            );
            assert_eq!(
                t.broker.stats().ended(End::Timeout) - before,
                iters,
                "one expiry per call"
            );
            d
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_decode,
    bench_decode_approval,
    bench_encode,
    bench_broker
);
criterion_main!(benches);
