//! The approvals' fast path against the reference on arbitrary input:
//! - `protocol::canonical`: text it calls canonical is exactly what serde_json writes back;
//! - `approvals::fast::check_request` (the daemon's read of a `tool-confirmation-request`):
//!   whatever it takes is what `parse::reference` and `approvals::check` make of the frame,
//!   whether the frame is compact, pretty, or carries values of any shape;
//! - `parse::fast` on `tool-confirmation-response`s, against `parse::reference`;
//! - the fast encoders of approval frames (`UiApprovalRef::encode`, `approval_ack`,
//!   `approval_withdrawn`, `approval_response`) against `encode` of the same `ServerFrame`.

// The daemon's fast paths exist only with the `fast` feature (`cargo test -p askbus` turns it
// on through the crate's own dev-dependency; the packaged crate's tests, with `--features fast`).
#![cfg(feature = "fast")]

use askbus::approvals::{self, fast};
use askbus::protocol::canonical::is_canonical;
use askbus::protocol::parse::{self, reference};
use askbus::protocol::{
    encode, encode_fast, ApprovalAck, ApprovalResponse, ApprovalWithdrawn, Inbound, Outcome,
    ProducerInfo, RequestContext, ServerFrame, ToolOutcome, UiApproval, UiApprovalRef,
    WithdrawReason,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Strings biased towards what JSON writers treat specially: quotes, backslashes, control
/// characters (short escapes and `\u00XX`), DEL, non-ASCII and astral characters.
fn arb_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just("\n".to_owned()),
        Just("\u{1b}[1m".to_owned()),
        Just("\u{0}".to_owned()),
        Just("\u{7f}".to_owned()),
        Just("é".to_owned()),
        Just("😀".to_owned()),
        Just("/".to_owned()),
        "[a-zA-Z0-9 ]{1,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|v| v.concat())
}

/// Any JSON, numbers of every kind included (floats and huge integers, which serde_json
/// rewrites, must never be called canonical as sent).
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        let key = prop_oneof![
            Just("name".to_owned()),
            Just("args".to_owned()),
            Just("type".to_owned()),
            Just("title".to_owned()),
            arb_string(),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Usually `valid`, sometimes absent, null or anything at all.
fn field(valid: BoxedStrategy<Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        12 => valid.prop_map(Some),
        2 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => arb_json().prop_map(Some),
    ]
}

fn strings() -> BoxedStrategy<Value> {
    prop::collection::vec(arb_string(), 0..3)
        .prop_map(|v| json!(v))
        .boxed()
}

/// JSON as agents send it in tool arguments: no floats.
fn plain_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((arb_string(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn object() -> BoxedStrategy<Value> {
    let value = prop_oneof![8 => plain_json(), 1 => arb_json()];
    prop::collection::vec(("[a-z]{1,3}", value), 0..4)
        .prop_map(|kv| Value::Object(kv.into_iter().collect()))
        .boxed()
}

fn diff_stat() -> BoxedStrategy<Value> {
    prop::collection::vec(0u64..100, 8)
        .prop_map(|n| {
            json!({"model_added_lines": n[0], "model_removed_lines": n[1], "model_added_chars": n[2],
                   "model_removed_chars": n[3], "user_added_lines": n[4], "user_removed_lines": n[5],
                   "user_added_chars": n[6], "user_removed_chars": n[7]})
        })
        .boxed()
}

/// `details` of every kind, each field usually of the reference's shape.
fn details() -> impl Strategy<Value = Value> {
    let s = || arb_string().prop_map(Value::String).boxed();
    let kind = prop_oneof![
        Just("exec"),
        Just("edit"),
        Just("mcp"),
        Just("info"),
        Just("sandbox_expansion"),
        Just("exit_plan_mode"),
        Just("ask_user"),
        Just("shell"),
    ];
    let fields = (
        field(s()),
        field(s()),
        field(s()),
        field(strings()),
        field(object()),
        field(diff_stat()),
        field(any::<bool>().prop_map(Value::Bool).boxed()),
        field(
            (strings(), any::<bool>())
                .prop_map(|(r, n)| json!({"fileSystem": {"read": r}, "network": n}))
                .boxed(),
        ),
    );
    (kind, fields).prop_map(|(kind, (a, b, c, list, obj, stat, flag, perms))| {
        let names: &[&str] = match kind {
            "exec" => &[
                "command",
                "rootCommand",
                "title",
                "rootCommands",
                "",
                "",
                "",
                "",
            ],
            "edit" => &[
                "fileName",
                "filePath",
                "fileDiff",
                "",
                "",
                "diffStat",
                "isModifying",
                "",
            ],
            "mcp" => &[
                "serverName",
                "toolName",
                "toolDisplayName",
                "",
                "toolArgs",
                "",
                "",
                "",
            ],
            "info" => &["prompt", "title", "", "urls", "", "", "", ""],
            "sandbox_expansion" => &[
                "command",
                "rootCommand",
                "title",
                "",
                "",
                "",
                "",
                "additionalPermissions",
            ],
            _ => &["planPath", "title", "systemMessage", "", "", "", "", ""],
        };
        let mut d = Map::new();
        d.insert("type".into(), json!(kind));
        if kind != "exec" && kind != "info" && kind != "sandbox_expansion" && kind != "shell" {
            d.insert("title".into(), json!("T"));
        }
        if kind == "edit" {
            d.insert("originalContent".into(), Value::Null);
            d.insert("newContent".into(), json!("x"));
        }
        for (name, v) in names.iter().zip([a, b, c, list, obj, stat, flag, perms]) {
            if let (false, Some(v)) = (name.is_empty(), v) {
                d.insert((*name).into(), v);
            }
        }
        Value::Object(d)
    })
}

fn outcome() -> impl Strategy<Value = ToolOutcome> {
    prop::sample::select(ToolOutcome::ALL.to_vec())
}

/// A `tool-confirmation-request`, mostly of the shapes agents send.
fn request() -> impl Strategy<Value = Value> {
    let tool_call = (
        field(arb_string().prop_map(Value::String).boxed()),
        field(object()),
        field(arb_string().prop_map(Value::String).boxed()),
    )
        .prop_map(|(name, args, id)| {
            let mut c = Map::new();
            for (k, v) in [("name", name), ("args", args), ("id", id)] {
                if let Some(v) = v {
                    c.insert(k.into(), v);
                }
            }
            Value::Object(c)
        });
    (
        "[a-z0-9-]{1,12}",
        field(tool_call.boxed()),
        field(arb_string().prop_map(Value::String).boxed()),
        field(object()),
        field(details().boxed()),
        field(
            prop::collection::vec(outcome().prop_map(|o| json!(o.as_str())), 0..4)
                .prop_map(Value::Array)
                .boxed(),
        ),
        field((1u64..100_000).prop_map(|ms| json!(ms)).boxed()),
        field(Just(json!({"agent": "gemini-cli/0.61.0", "cwd": "/src"})).boxed()),
    )
        .prop_map(
            |(id, call, server, annotations, details, outcomes, timeout, ctx)| {
                let mut f = Map::new();
                f.insert("type".into(), json!("tool-confirmation-request"));
                f.insert("correlationId".into(), json!(id));
                for (k, v) in [
                    ("toolCall", call),
                    ("serverName", server),
                    ("toolAnnotations", annotations),
                    ("details", details),
                    ("outcomes", outcomes),
                    ("timeoutMs", timeout),
                    ("context", ctx),
                ] {
                    if let Some(v) = v {
                        f.insert(k.into(), v);
                    }
                }
                Value::Object(f)
            },
        )
}

/// What the reference makes of a request frame.
fn by_reference(text: &[u8]) -> Option<approvals::ValidApproval> {
    match reference::parse(text) {
        Ok(Inbound::ToolConfirmationRequest(req)) => approvals::check(req).ok(),
        _ => None,
    }
}

fn reason() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Answered),
        Just(Outcome::Dismissed),
        Just(Outcome::Timeout),
        Just(Outcome::NoUi),
        Just(Outcome::Withdrawn),
        Just(Outcome::Shutdown),
    ]
}

fn withdraw_reason() -> impl Strategy<Value = WithdrawReason> {
    prop_oneof![
        Just(WithdrawReason::Answered),
        Just(WithdrawReason::Timeout),
        Just(WithdrawReason::Withdrawn),
        Just(WithdrawReason::ProducerGone),
        Just(WithdrawReason::Shutdown),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn canonical_text_is_what_serde_json_writes_back(v in arb_json(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            serde_json::to_string(&v).unwrap()
        };
        if is_canonical(&text) {
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
    }

    #[test]
    fn the_fast_path_takes_only_what_the_reference_makes_the_same(
        frame in request(), pretty in any::<bool>()
    ) {
        let text = if pretty {
            serde_json::to_vec_pretty(&frame).unwrap()
        } else {
            serde_json::to_vec(&frame).unwrap()
        };
        let reference = by_reference(&text);
        if let Some(fast) = fast::check_request(&text) {
            prop_assert_eq!(Some(&fast), reference.as_ref());
            // And what UIs are sent of it is the reference's frame, byte for byte.
            let producer = ProducerInfo { client: Some("p/1".into()), pid: Some(7), uid: 1000 };
            let context = fast.context.as_ref();
            let by_ref = fast.body.ui_frame_ref(&fast.correlation_id, 5, &producer, context, Some("n1")).encode();
            let mut ui = fast.body.ui_frame(&fast.correlation_id, 5, &producer, context);
            ui.node = Some("n1".into());
            prop_assert_eq!(by_ref, encode(&ServerFrame::ToolConfirmationRequest(ui)));
        }
    }

    #[test]
    fn decisions_read_fast_are_the_references(
        id in "[a-z0-9]{0,4}",
        confirmed in prop::option::of(any::<bool>()),
        o in prop::option::of(outcome()),
        message in prop::option::of(arb_string()),
        dismissed in prop::option::of(any::<bool>()),
        payload in any::<bool>(),
    ) {
        let mut f = Map::new();
        f.insert("type".into(), json!("tool-confirmation-response"));
        f.insert("correlationId".into(), json!(id));
        if let Some(c) = confirmed { f.insert("confirmed".into(), json!(c)); }
        if let Some(o) = o { f.insert("outcome".into(), json!(o.as_str())); }
        if let Some(m) = message { f.insert("message".into(), json!(m)); }
        if let Some(d) = dismissed { f.insert("dismissed".into(), json!(d)); }
        if payload { f.insert("payload".into(), json!({"newContent": "x"})); }
        let text = serde_json::to_vec(&Value::Object(f)).unwrap();
        if let Some(fast) = parse::fast::parse(&text) {
            prop_assert_eq!(Ok(fast), reference::parse(&text));
        }
    }

    #[test]
    fn approval_frames_are_the_bytes_serde_writes(
        id in arb_string(),
        r in reason(),
        w in withdraw_reason(),
        o in outcome(),
        confirmed in any::<bool>(),
        message in prop::option::of(arb_string()),
        payload in prop::option::of(object()),
    ) {
        let ack = ServerFrame::ToolConfirmationAck(ApprovalAck {
            correlation_id: id.clone(), reason: r, confirmed, outcome: o,
        });
        prop_assert_eq!(encode_fast::approval_ack(&id, r, confirmed, o), encode(&ack));
        let gone = ServerFrame::ToolConfirmationWithdrawn(ApprovalWithdrawn {
            correlation_id: id.clone(), reason: w, node: None, answered_by: None,
        });
        prop_assert_eq!(encode_fast::approval_withdrawn(&id, w), encode(&gone));
        let response = ApprovalResponse {
            correlation_id: id,
            confirmed,
            outcome: o,
            reason: r,
            message,
            payload: payload.and_then(|p| p.as_object().cloned()),
        };
        prop_assert_eq!(
            encode_fast::approval_response(&response),
            encode(&ServerFrame::ToolConfirmationResponse(response))
        );
    }

    #[test]
    fn ui_approvals_are_the_bytes_serde_writes(
        id in arb_string(),
        call in object(),
        server in prop::option::of(arb_string()),
        annotations in prop::option::of(object()),
        subagent in prop::option::of(arb_string()),
        details in prop::option::of(arb_json()),
        outcomes in prop::collection::vec(outcome(), 0..7),
        timeout_ms in any::<u64>(),
        client in prop::option::of(arb_string()),
        project in prop::option::of(arb_string()),
        node in prop::option::of(arb_string()),
    ) {
        let text = |v: &Value| serde_json::to_string(v).unwrap();
        // The daemon's texts are serde's writing of a value read back exactly (a float
        // serde_json reads inexactly is covered by the reference path, which never re-reads).
        let exact = |v: &Value| serde_json::from_str::<Value>(&text(v)).unwrap() == *v;
        prop_assume!(exact(&call) && annotations.iter().all(exact) && details.iter().all(exact));
        let (call_text, annotations_text, details_text) =
            (text(&call), annotations.as_ref().map(text), details.as_ref().map(text));
        let producer = ProducerInfo { client, pid: None, uid: 0 };
        let context = project.map(|p| RequestContext { project: Some(p), ..RequestContext::default() });
        let fast = UiApprovalRef {
            correlation_id: &id,
            tool_call: &call_text,
            server_name: server.as_deref(),
            tool_annotations: annotations_text.as_deref(),
            subagent: subagent.as_deref(),
            details: details_text.as_deref(),
            outcomes: &outcomes,
            timeout_ms,
            producer: &producer,
            context: context.as_ref(),
            node: node.as_deref(),
        }
        .encode();
        let reference = ServerFrame::ToolConfirmationRequest(UiApproval {
            correlation_id: id.clone(),
            tool_call: call,
            server_name: server,
            tool_annotations: annotations,
            subagent,
            details,
            outcomes,
            timeout_ms,
            producer,
            context,
            node,
        });
        prop_assert_eq!(fast, encode(&reference));
    }
}

/// The generators reach the fast path: without this, a fast path that never takes anything
/// would pass every property above.
#[test]
fn the_fast_path_takes_most_plain_requests() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut taken, mut valid) = (0, 0);
    for _ in 0..400 {
        let frame = request().new_tree(&mut runner).unwrap().current();
        let text = serde_json::to_vec(&frame).unwrap();
        if by_reference(&text).is_some() {
            valid += 1;
            if fast::check_request(&text).is_some() {
                taken += 1;
            }
        }
    }
    assert!(valid >= 20, "only {valid} valid requests generated");
    assert!(
        taken * 2 >= valid,
        "the fast path took {taken} of {valid} valid requests"
    );
}
