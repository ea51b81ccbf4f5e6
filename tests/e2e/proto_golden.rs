//! The language-neutral contract in `proto/` against the code: every golden example validates
//! against its JSON Schema, client examples parse (or are refused) as `index.json` says,
//! server examples decode and re-encode unchanged, the examples agree with what the questions
//! module computes for them, and the schemas' enums are the code's. No daemon needed: the
//! server examples were captured from a real one, and these tests keep them true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use askbusd::approvals;
use askbusd::broker::{BrokerError, Limits};
use askbusd::hub::Hub;
use askbusd::protocol::ToolOutcome;
use askbusd::protocol::{
    encode, parse_inbound, ClientFrame, End, ErrorCode, Inbound, NoUiPolicy, Outcome,
    RequestContext, ServerFrame, SubscribeFilter, UiInfo, WithdrawReason, DEFAULT_MAX_FRAME_BYTES,
    MAX_CORRELATION_ID_CHARS, PROTOCOL_VERSION,
};
use askbusd::questions::{self, DaemonOutcome};
use askbusd::telemetry::{Counters, Record, TelemetrySink};
use jsonschema::{Resource, Validator};
use serde_json::{json, Value};

/// Every schema's `$id` is this plus its path under proto/schema/, so relative `$ref`s
/// resolve the same way in every language without touching the network.
const SCHEMA_BASE: &str = "https://askbus.example/proto/v1/schema/";

fn proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `proto/<rel>` parsed.
fn load(rel: &str) -> Value {
    read_json(&proto().join(rel))
}

/// Files under `dir`, as paths relative to proto/ with `/` separators, sorted.
fn files_under(dir: &str) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                let parts: Vec<_> = rel.iter().map(|p| p.to_string_lossy()).collect();
                out.insert(parts.join("/"));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&proto(), &proto().join(dir), &mut out);
    out
}

struct Example {
    file: String,
    direction: String,
    schema: String,
    entry: Value,
    value: Value,
}

fn examples() -> Vec<Example> {
    let index = load("examples/index.json");
    index["examples"]
        .as_array()
        .expect("index.json has an examples array")
        .iter()
        .map(|e| {
            let field = |k: &str| {
                e[k].as_str()
                    .unwrap_or_else(|| panic!("index entry {e} has no string {k:?}"))
                    .to_owned()
            };
            let file = field("file");
            Example {
                value: load(&file),
                direction: field("direction"),
                schema: field("schema"),
                file,
                entry: e.clone(),
            }
        })
        .collect()
}

fn example(file: &str) -> Value {
    load(&format!("examples/{file}"))
}

/// Every schema file, keyed by its path under proto/.
fn schemas() -> BTreeMap<String, Value> {
    files_under("schema")
        .into_iter()
        .map(|rel| {
            let v = load(&rel);
            (rel, v)
        })
        .collect()
}

/// A validator for `proto/<rel>` with every other schema registered under its `$id`.
fn validator(all: &BTreeMap<String, Value>, rel: &str) -> Validator {
    let resources = all.values().map(|s| {
        let id = s["$id"]
            .as_str()
            .expect("every schema has an $id")
            .to_owned();
        (
            id,
            Resource::from_contents(s.clone()).expect("a 2020-12 resource"),
        )
    });
    jsonschema::draft202012::options()
        .with_resources(resources)
        .build(&all[rel])
        .unwrap_or_else(|e| panic!("{rel} does not compile: {e}"))
}

fn schema_errors(v: &Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("at {}: {e}", e.instance_path))
        .collect()
}

#[test]
fn every_schema_is_valid_draft_2020_12_with_its_path_as_id() {
    let all = schemas();
    assert!(
        all.len() >= 17,
        "schema files went missing: {:?}",
        all.keys()
    );
    for (rel, schema) in &all {
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{rel}"
        );
        let id = format!("{SCHEMA_BASE}{}", rel.strip_prefix("schema/").unwrap());
        assert_eq!(
            schema["$id"],
            id.as_str(),
            "{rel}: $id must mirror its path"
        );
        if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
            panic!("{rel} is not a valid draft 2020-12 schema: {e}");
        }
        // Compiling resolves every $ref: a dangling one fails here.
        validator(&all, rel);
        // Frames are open to additive fields: no frame schema may forbid unknown keys.
        assert!(schema.get("additionalProperties").is_none(), "{rel}");
        assert!(schema.get("unevaluatedProperties").is_none(), "{rel}");
    }
}

#[test]
fn index_lists_every_example_once_with_a_matching_schema() {
    let listed: Vec<String> = examples().into_iter().map(|e| e.file).collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "index.json lists a file twice");
    let mut on_disk = files_under("examples");
    assert!(on_disk.remove("examples/index.json"));
    let unlisted: Vec<_> = on_disk.difference(&unique).collect();
    let missing: Vec<_> = unique.difference(&on_disk).collect();
    assert!(
        unlisted.is_empty(),
        "examples not in index.json: {unlisted:?}"
    );
    assert!(
        missing.is_empty(),
        "index.json names missing files: {missing:?}"
    );

    let all = schemas();
    for ex in examples() {
        let dir = ex.file.split('/').nth(1).unwrap();
        assert_eq!(
            dir, ex.direction,
            "{}: direction must match its folder",
            ex.file
        );
        assert!(
            all.contains_key(&ex.schema),
            "{}: no {}",
            ex.file,
            ex.schema
        );
        if ex.direction == "telemetry" || ex.direction == "shown" {
            continue;
        }
        let ty = ex.value["type"]
            .as_str()
            .expect("a frame has a string type");
        assert_eq!(ex.entry["type"], ty, "{}", ex.file);
        assert_eq!(
            all[&ex.schema]["properties"]["type"]["const"], ty,
            "{}",
            ex.file
        );
        for cause in ex.entry["causedBy"].as_array().into_iter().flatten() {
            let cause = cause.as_str().unwrap();
            assert!(
                cause.starts_with("examples/client/"),
                "{}: {cause}",
                ex.file
            );
            assert!(
                unique.contains(cause),
                "{}: causedBy {cause} is not listed",
                ex.file
            );
        }
        match ex.direction.as_str() {
            "client" => assert!(ex.entry["accepted"].is_boolean(), "{}", ex.file),
            "server" => {
                let to = ex.entry["to"].as_str().unwrap_or_default();
                let to_ok = ["any", "ui", "producer", "observer"].contains(&to);
                assert!(to_ok, "{}: to {to:?}", ex.file);
            }
            other => panic!("{}: unknown direction {other}", ex.file),
        }
    }
}

#[test]
fn every_example_validates_against_its_schema() {
    let all = schemas();
    let mut failures = Vec::new();
    for ex in examples() {
        let v = validator(&all, &ex.schema);
        let errors = schema_errors(&v, &ex.value);
        // `schemaValid: false`: a value the schema itself refuses, kept to show the daemon's
        // refusal of it; its schema must refuse it.
        if ex.entry["schemaValid"] == false {
            if errors.is_empty() {
                failures.push(format!("{}: {} accepts it", ex.file, ex.schema));
            }
            continue;
        }
        for e in errors {
            failures.push(format!("{} against {}: {e}", ex.file, ex.schema));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Changes one golden frame in place.
type Mutation = fn(&mut Value);

/// Guards against schemas that accept anything: each mutation of a golden frame breaks a rule
/// the protocol states, and its schema must say so.
#[test]
fn schemas_reject_what_the_protocol_forbids() {
    let all = schemas();
    let cases: Vec<(&str, &str, Mutation)> = vec![
        ("client/ask-user-request.json", "no correlationId", |v| {
            v.as_object_mut().unwrap().remove("correlationId");
        }),
        (
            "client/ask-user-request.json",
            "correlationId too long",
            |v| {
                v["correlationId"] = json!("x".repeat(MAX_CORRELATION_ID_CHARS + 1));
            },
        ),
        ("client/ask-user-request.json", "timeoutMs 0", |v| {
            v["timeoutMs"] = json!(0)
        }),
        ("client/ask-user-request.json", "noUi maybe", |v| {
            v["noUi"] = json!("maybe")
        }),
        (
            "client/tool-confirmation-request.mode.json",
            "interactive as a string",
            |v| v["context"]["interactive"] = json!("false"),
        ),
        (
            "client/tool-confirmation-request.mode.json",
            "approvalMode YOLO",
            |v| v["context"]["approvalMode"] = json!("YOLO"),
        ),
        ("client/ask-user-request.json", "five questions", |v| {
            let q = v["questions"][1].clone();
            let qs = v["questions"].as_array_mut().unwrap();
            qs.extend([q.clone(), q.clone(), q]);
        }),
        (
            "client/ask-user-request.json",
            "question without header",
            |v| {
                v["questions"][0].as_object_mut().unwrap().remove("header");
            },
        ),
        (
            "client/ask-user-request.json",
            "unknown question type",
            |v| {
                v["questions"][0]["type"] = json!("multiple");
            },
        ),
        (
            "client/ask-user-request.json",
            "option without description",
            |v| {
                v["questions"][0]["options"][1]
                    .as_object_mut()
                    .unwrap()
                    .remove("description");
            },
        ),
        ("client/ask-user-response.json", "answer key 01", |v| {
            v["answers"] = json!({"01": "PostgreSQL"});
        }),
        (
            "client/ask-user-response.json",
            "answer not a string",
            |v| {
                v["answers"]["0"] = json!(1);
            },
        ),
        (
            "client/ask-user-response.json",
            "no answers, not cancelled",
            |v| {
                v.as_object_mut().unwrap().remove("answers");
            },
        ),
        ("client/hello.json", "no protocol", |v| {
            v.as_object_mut().unwrap().remove("protocol");
        }),
        (
            "server/ask-user-response.answered.json",
            "answered but cancelled",
            |v| {
                v["cancelled"] = json!(true);
            },
        ),
        (
            "server/ask-user-response.timeout.json",
            "timeout with answers",
            |v| {
                v["answers"] = json!({"0": "SQLite"});
            },
        ),
        (
            "server/ask-user-response.timeout.json",
            "timeout text of another reason",
            |v| {
                v["reason"] = json!("no-ui");
                v["result"]["data"]["ask_user"]["reason"] = json!("no-ui");
            },
        ),
        (
            "server/ask-user-response.dismissed.json",
            "reason renamed",
            |v| {
                v["reason"] = json!("cancelled");
            },
        ),
        ("server/ask-user-request.json", "no producer", |v| {
            v.as_object_mut().unwrap().remove("producer");
        }),
        (
            "server/ask-user-withdrawn.json",
            "unknown withdraw reason",
            |v| {
                v["reason"] = json!("gone");
            },
        ),
        (
            "server/error.invalid-request.json",
            "unknown error code",
            |v| {
                v["code"] = json!("bad-request");
            },
        ),
        ("server/stats.json", "no errors map", |v| {
            v.as_object_mut().unwrap().remove("errors");
        }),
        ("telemetry/rejected.json", "rejected without code", |v| {
            v.as_object_mut().unwrap().remove("code");
        }),
        (
            "client/tool-confirmation-request.json",
            "no toolCall",
            |v| {
                v.as_object_mut().unwrap().remove("toolCall");
            },
        ),
        (
            "client/tool-confirmation-request.json",
            "exec details without rootCommand",
            |v| {
                v["details"].as_object_mut().unwrap().remove("rootCommand");
            },
        ),
        (
            "client/tool-confirmation-request.json",
            "unknown details type",
            |v| v["details"]["type"] = json!("shell"),
        ),
        (
            "client/tool-confirmation-request.edit.json",
            "originalContent a number",
            |v| v["details"]["originalContent"] = json!(3),
        ),
        (
            "client/tool-confirmation-request.mcp.json",
            "mcp details without toolName",
            |v| {
                v["details"].as_object_mut().unwrap().remove("toolName");
            },
        ),
        (
            "client/tool-confirmation-request.info.json",
            "urls not strings",
            |v| v["details"]["urls"] = json!([1]),
        ),
        (
            "client/tool-confirmation-request.json",
            "an outcome twice",
            |v| v["outcomes"] = json!(["cancel", "cancel"]),
        ),
        (
            "client/tool-confirmation-response.json",
            "confirmed with cancel",
            |v| v["outcome"] = json!("cancel"),
        ),
        (
            "client/tool-confirmation-response.deny.json",
            "denied with an approving outcome",
            |v| v["outcome"] = json!("proceed_once"),
        ),
        (
            "client/tool-confirmation-response.json",
            "neither confirmed nor dismissed",
            |v| {
                v.as_object_mut().unwrap().remove("confirmed");
            },
        ),
        (
            "server/tool-confirmation-response.timeout.json",
            "a timeout that approves",
            |v| {
                v["confirmed"] = json!(true);
                v["outcome"] = json!("proceed_once");
            },
        ),
        (
            "server/tool-confirmation-response.no-ui.json",
            "no-ui without a message",
            |v| {
                v.as_object_mut().unwrap().remove("message");
            },
        ),
        (
            "server/tool-confirmation-request.json",
            "outcomes without cancel",
            |v| v["outcomes"] = json!(["proceed_once"]),
        ),
    ];
    let index: BTreeMap<String, String> =
        examples().into_iter().map(|e| (e.file, e.schema)).collect();
    for (file, what, mutate) in cases {
        let path = format!("examples/{file}");
        let v = validator(&all, &index[&path]);
        let mut frame = example(file);
        assert!(v.is_valid(&frame), "{file} itself must be valid");
        mutate(&mut frame);
        assert!(!v.is_valid(&frame), "{file} with {what} passed its schema");
    }
}

#[test]
fn client_examples_are_accepted_or_refused_as_indexed() {
    let mut failures = Vec::new();
    for ex in examples().into_iter().filter(|e| e.direction == "client") {
        let payload = serde_json::to_vec(&ex.value).unwrap();
        let accepted = ex.entry["accepted"] == true;
        // The daemon refuses in two stages: the frame itself, then (for a request) the
        // reference's checks of its questions. Both count as "the daemon does not accept it".
        let verdict = parse_inbound(&payload).and_then(|frame| match &frame {
            Inbound::AskUserRequest(req) => questions::check(req.questions.clone())
                .map(|_| frame.clone())
                .map_err(|msg| askbusd::protocol::FrameError::new(ErrorCode::InvalidRequest, msg)),
            Inbound::ToolConfirmationRequest(req) => approvals::check(req.clone())
                .map(|_| frame.clone())
                .map_err(|r| {
                    askbusd::protocol::FrameError::new(ErrorCode::InvalidRequest, r.message)
                }),
            _ => Ok(frame),
        });
        match (accepted, verdict) {
            (true, Ok(frame)) => {
                let ty = ex.value["type"].as_str().unwrap();
                let same = matches!(
                    (ty, &frame),
                    ("hello", Inbound::Hello { .. })
                        | ("ping", Inbound::Ping { .. })
                        | ("stats", Inbound::Stats)
                        | ("subscribe", Inbound::Subscribe { .. })
                        | ("watch", Inbound::Watch { .. })
                        | ("ask-user-request", Inbound::AskUserRequest(_))
                        | ("ask-user-cancel", Inbound::AskUserCancel { .. })
                        | ("ask-user-response", Inbound::AskUserResponse(_))
                        | (
                            "tool-confirmation-request",
                            Inbound::ToolConfirmationRequest(_)
                        )
                        | (
                            "tool-confirmation-cancel",
                            Inbound::ToolConfirmationCancel { .. }
                        )
                        | (
                            "tool-confirmation-response",
                            Inbound::ToolConfirmationResponse(_)
                        )
                        | ("notify-report", Inbound::NotifyReport(_))
                        | ("history", Inbound::History(_))
                );
                if !same {
                    failures.push(format!("{}: parsed as {frame:?}", ex.file));
                }
            }
            (true, Err(e)) => failures.push(format!("{}: refused with {e}", ex.file)),
            (false, Ok(frame)) => failures.push(format!("{}: accepted as {frame:?}", ex.file)),
            (false, Err(e)) => {
                if ex.entry["rejectedWith"] != e.code.as_str() {
                    failures.push(format!(
                        "{}: refused with {} but index.json says {}",
                        ex.file, e.code, ex.entry["rejectedWith"]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn server_examples_decode_and_reencode_unchanged() {
    let mut failures = Vec::new();
    for ex in examples().into_iter().filter(|e| e.direction == "server") {
        match serde_json::from_value::<ServerFrame>(ex.value.clone()) {
            Ok(ServerFrame::Unknown) => failures.push(format!("{}: decoded as Unknown", ex.file)),
            Ok(frame) => {
                let back: Value = serde_json::from_slice(&encode(&frame)).unwrap();
                if back != ex.value {
                    failures.push(format!("{}: re-encodes as {back}", ex.file));
                }
            }
            Err(e) => failures.push(format!("{}: does not decode: {e}", ex.file)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a UI sees for a request is what the questions module makes of the producer's frame.
#[test]
fn server_requests_carry_the_normalized_client_questions() {
    for (client, server) in [
        (
            "client/ask-user-request.json",
            "server/ask-user-request.json",
        ),
        (
            "client/ask-user-request.minimal.json",
            "server/ask-user-request.minimal.json",
        ),
    ] {
        let sent = example(client);
        let got = example(server);
        let normalized = questions::validate(&sent).expect("the client example is valid");
        assert_eq!(got["questions"], Value::Array(normalized), "{server}");
        assert_eq!(got["correlationId"], sent["correlationId"], "{server}");
        let limit = sent["timeoutMs"]
            .as_u64()
            .unwrap_or(Limits::default().default_timeout_ms);
        let left = got["timeoutMs"].as_u64().unwrap();
        assert!(
            left <= limit && left > limit - 5_000,
            "{server}: timeoutMs {left}"
        );
    }
    // The normalization is visible in the example, so a UI author sees it happen.
    let sent = example("client/ask-user-request.json");
    let got = example("server/ask-user-request.json");
    assert_ne!(sent["questions"], got["questions"]);
    assert_eq!(
        got["producer"]["client"],
        example("client/hello.json")["client"]
    );
    assert!(example("server/ask-user-request.minimal.json")["producer"]
        .get("client")
        .is_none());
}

/// Every terminal response example is what the questions module computes for the client
/// examples that caused it: the answered and dismissed results are the reference's.
#[test]
fn server_responses_are_what_the_daemon_computes() {
    let request = example("client/ask-user-request.json");
    let id = request["correlationId"].clone();
    let meta = questions::meta(&questions::validate(&request).unwrap());
    let timeout_ms = request["timeoutMs"].as_u64().unwrap();

    let answer = example("client/ask-user-response.json");
    let answers: BTreeMap<usize, String> = answer["answers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_str().unwrap().to_owned()))
        .collect();
    let expected = [
        ("answered", questions::answered_result(&meta, &answers)),
        ("dismissed", questions::dismissed_result(&meta)),
        (
            "timeout",
            questions::daemon_result(&meta, DaemonOutcome::Timeout, timeout_ms),
        ),
        (
            "no-ui",
            questions::daemon_result(&meta, DaemonOutcome::NoUi, timeout_ms),
        ),
        (
            "withdrawn",
            questions::daemon_result(&meta, DaemonOutcome::Withdrawn, timeout_ms),
        ),
        (
            "shutdown",
            questions::daemon_result(&meta, DaemonOutcome::Shutdown, timeout_ms),
        ),
    ];
    for (reason, result) in expected {
        let file = format!("server/ask-user-response.{reason}.json");
        let got = example(&file);
        assert_eq!(got["correlationId"], id, "{file}");
        assert_eq!(got["reason"], reason, "{file}");
        assert_eq!(
            got["result"],
            serde_json::to_value(&result).unwrap(),
            "{file}"
        );
        let want_answers = if reason == "answered" {
            answer["answers"].clone()
        } else {
            json!({})
        };
        assert_eq!(got["answers"], want_answers, "{file}");
        assert_eq!(got["cancelled"], reason != "answered", "{file}");
    }
    let no_ui = example("client/ask-user-request.no-ui-reject.json");
    assert_eq!(no_ui["noUi"], "reject");
    let mut same = no_ui.clone();
    same.as_object_mut().unwrap().remove("noUi");
    assert_eq!(same, request, "the no-ui variant differs only in noUi");
    assert_eq!(example("client/ask-user-cancel.json")["correlationId"], id);
    assert_eq!(
        example("client/ask-user-response.dismissed.json")["correlationId"],
        id
    );
    assert_eq!(answer["correlationId"], id);
}

#[test]
fn error_examples_carry_the_daemons_messages() {
    let invalid = example("client/ask-user-request.invalid.json");
    let err = example("server/error.invalid-request.json");
    assert_eq!(err["code"], "invalid-request");
    assert_eq!(err["correlationId"], invalid["correlationId"]);
    assert_eq!(
        err["message"].as_str(),
        questions::validate(&invalid).err().as_deref()
    );

    let hello2 = serde_json::to_vec(&example("client/hello.protocol-2.json")).unwrap();
    let refused = parse_inbound(&hello2).unwrap_err();
    let err = example("server/error.unsupported-protocol.json");
    assert_eq!(err["code"], refused.code.as_str());
    assert_eq!(err["message"], refused.message.as_str());
    assert!(err.get("correlationId").is_none());
    assert!(refused.code.closes_connection());

    // 1 spelled as a float: the file's own text (serde keeps 1.0 a float when re-encoding).
    let text = std::fs::read(proto().join("examples/client/hello.protocol-1.0.json")).unwrap();
    assert!(String::from_utf8_lossy(&text).contains("\"protocol\": 1.0"));
    let refused = parse_inbound(&text).unwrap_err();
    let err = example("server/error.unsupported-protocol.float.json");
    assert_eq!(err["code"], refused.code.as_str());
    assert_eq!(err["message"], refused.message.as_str());
    assert!(refused.code.closes_connection());

    let err = example("server/error.not-pending.json");
    let id = example("client/ask-user-response.json")["correlationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let expected = BrokerError::NotPending(id.clone()).into_frame_error(&id);
    assert_eq!(err["code"], expected.code.as_str());
    assert_eq!(err["message"], expected.message.as_str());
    assert_eq!(err["correlationId"], id.as_str());

    let err = example("server/error.frame-timeout.json");
    assert_eq!(err["code"], "frame-timeout");
    assert!(err.get("correlationId").is_none());

    let err = example("server/error.frame-too-large.json");
    assert_eq!(err["code"], "frame-too-large");
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains(&DEFAULT_MAX_FRAME_BYTES.to_string()));
}

#[test]
fn welcome_pong_and_acks_match_the_code() {
    let limits = Limits::default();
    let expected = ServerFrame::Welcome {
        protocol: PROTOCOL_VERSION,
        server: askbusd::SERVER_NAME.to_owned(),
        max_frame_bytes: DEFAULT_MAX_FRAME_BYTES as u64,
        default_timeout_ms: limits.default_timeout_ms,
        max_timeout_ms: limits.max_timeout_ms,
    };
    let mut welcome = example("server/welcome.json");
    assert!(welcome["server"].as_str().unwrap().starts_with("askbusd/"));
    // The version is the one field that legitimately moves on.
    welcome["server"] = json!(askbusd::SERVER_NAME);
    assert_eq!(welcome, serde_json::to_value(&expected).unwrap());

    let ping = example("client/ping.json");
    let Inbound::Ping { id } = parse_inbound(&serde_json::to_vec(&ping).unwrap()).unwrap() else {
        panic!("ping parses as ping")
    };
    let pong = serde_json::to_value(ServerFrame::Pong { id }).unwrap();
    assert_eq!(pong, example("server/pong.json"));

    let id = example("client/ask-user-request.json")["correlationId"]
        .as_str()
        .unwrap()
        .to_owned();
    for (file, outcome) in [
        ("server/ask-user-ack.json", Outcome::Answered),
        ("server/ask-user-ack.dismissed.json", Outcome::Dismissed),
    ] {
        let ack = ServerFrame::AskUserAck {
            correlation_id: id.clone(),
            outcome,
        };
        assert_eq!(example(file), serde_json::to_value(ack).unwrap(), "{file}");
    }
    for (file, reason) in [
        ("server/ask-user-withdrawn.json", WithdrawReason::Answered),
        (
            "server/ask-user-withdrawn.withdrawn.json",
            WithdrawReason::Withdrawn,
        ),
        (
            "server/ask-user-withdrawn.shutdown.json",
            WithdrawReason::Shutdown,
        ),
    ] {
        let frame = ServerFrame::AskUserWithdrawn {
            correlation_id: id.clone(),
            reason,
            node: None,
            answered_by: None,
        };
        assert_eq!(
            example(file),
            serde_json::to_value(frame).unwrap(),
            "{file}"
        );
    }
}

/// The Rust client writes the client examples exactly: the examples are what a client sends.
#[test]
fn the_rust_client_encodes_the_client_examples() {
    let req = example("client/ask-user-request.json");
    let id = req["correlationId"].as_str().unwrap();
    let answers = BTreeMap::from([(0, "PostgreSQL".to_owned()), (1, "Yes".to_owned())]);
    let none = BTreeMap::new();
    let filter = SubscribeFilter {
        project: Some("askbus".into()),
        ..SubscribeFilter::default()
    };
    let ctx_req = example("client/ask-user-request.context.json");
    let context = RequestContext {
        agent: Some("gemini-cli/0.61.0".into()),
        session: Some("8f14e45f-ceea-467f-a0e6-5b3f3c7e9d21".into()),
        project: Some("askbus".into()),
        cwd: Some("/home/dev/src/askbus".into()),
        title: Some("Cut the 2.4.0 release".into()),
        ..RequestContext::default()
    };
    let bad_req = example("client/ask-user-request.context-invalid.json");
    let bad_context = RequestContext {
        project: Some("askbus".into()),
        title: Some("Cut the release\nthen deploy it".into()),
        ..RequestContext::default()
    };
    let cases = [
        (
            "client/hello.json",
            ClientFrame::Hello {
                protocol: 1,
                client: Some("my-agent/1.2.0"),
                via: None,
            },
        ),
        (
            "client/ping.json",
            ClientFrame::Ping {
                id: Some(json!(42)),
            },
        ),
        ("client/stats.json", ClientFrame::Stats),
        (
            "client/watch.json",
            ClientFrame::Watch {
                client: Some("askbus-watch/0.1.0"),
            },
        ),
        (
            "client/subscribe.json",
            ClientFrame::Subscribe {
                client: Some("askbus-tui/0.1.0"),
                filter: None,
                via: Some("tui"),
            },
        ),
        (
            "client/subscribe.filter.json",
            ClientFrame::Subscribe {
                client: Some("askbus-tui/0.1.0"),
                filter: Some(&filter),
                via: None,
            },
        ),
        (
            "client/ask-user-request.context.json",
            ClientFrame::AskUserRequest {
                correlation_id: ctx_req["correlationId"].as_str().unwrap(),
                questions: &ctx_req["questions"],
                timeout_ms: Some(300_000),
                no_ui: None,
                context: Some(&context),
            },
        ),
        (
            "client/ask-user-request.context-invalid.json",
            ClientFrame::AskUserRequest {
                correlation_id: bad_req["correlationId"].as_str().unwrap(),
                questions: &bad_req["questions"],
                timeout_ms: Some(300_000),
                no_ui: None,
                context: Some(&bad_context),
            },
        ),
        (
            "client/ask-user-request.json",
            ClientFrame::AskUserRequest {
                correlation_id: id,
                questions: &req["questions"],
                timeout_ms: Some(120_000),
                no_ui: None,
                context: None,
            },
        ),
        (
            "client/ask-user-request.no-ui-reject.json",
            ClientFrame::AskUserRequest {
                correlation_id: id,
                questions: &req["questions"],
                timeout_ms: Some(120_000),
                no_ui: Some(NoUiPolicy::Reject),
                context: None,
            },
        ),
        (
            "client/ask-user-cancel.json",
            ClientFrame::AskUserCancel {
                correlation_id: id,
                reason: None,
                via: None,
            },
        ),
        (
            "client/ask-user-response.json",
            ClientFrame::AskUserResponse {
                correlation_id: id,
                answers: &answers,
                cancelled: false,
                user: None,
            },
        ),
        (
            "client/ask-user-response.dismissed.json",
            ClientFrame::AskUserResponse {
                correlation_id: id,
                answers: &none,
                cancelled: true,
                user: None,
            },
        ),
    ];
    for (file, frame) in cases {
        let sent: Value = serde_json::from_slice(&encode(&frame)).unwrap();
        assert_eq!(sent, example(file), "{file}");
    }
}

/// The stats frame the hub builds has exactly the example's shape and passes the schema.
#[test]
fn the_hubs_stats_frame_has_the_documented_shape() {
    fn shape(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        if let Value::Object(map) = v {
            for (k, v) in map {
                let path = format!("{at}/{k}");
                out.insert(path.clone());
                shape(v, &path, out);
            }
        }
    }
    let hub = Hub::new(
        Limits::default(),
        TelemetrySink::disabled(),
        Arc::new(Counters::default()),
        "node",
    );
    let live: Value = serde_json::from_slice(&hub.stats_frame()).unwrap();
    let (mut a, mut b) = (BTreeSet::new(), BTreeSet::new());
    shape(&live, "", &mut a);
    shape(&example("server/stats.json"), "", &mut b);
    assert_eq!(a, b, "stats fields differ between the hub and the example");
    let all = schemas();
    let v = validator(&all, "schema/server/stats.schema.json");
    assert_eq!(schema_errors(&v, &live), Vec::<String>::new());
}

/// Telemetry records as the daemon serializes them pass the record schema.
#[test]
fn telemetry_records_match_their_schema() {
    let all = schemas();
    let v = validator(&all, "schema/telemetry-record.schema.json");
    let ex = example("telemetry/answered.json");
    let record = Record {
        ts: std::time::SystemTime::now(),
        node: Some(Arc::from("node")),
        correlation_id: ex["correlationId"].as_str().map(str::to_owned),
        reason: End::Answered,
        code: None,
        producer: serde_json::from_value(ex["producer"].clone()).unwrap(),
        agent: None,
        project: None,
        ui: Some(UiInfo {
            client: Some("askbus-tui/0.1.0".into()),
            pid: Some(1),
            node: None,
        }),
        decided_by: None,
        latency_ms: 201,
        question_types: vec!["choice", "yesno"],
        dismissed: false,
        empty_submission: false,
        answer_count: 2,
        approval: None,
    };
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(schema_errors(&v, &value), Vec::<String>::new());
    let fields = |v: &Value| {
        v.as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(fields(&value), fields(&ex));
    let rejected = Record {
        reason: End::Rejected,
        code: Some(ErrorCode::DuplicateCorrelationId),
        ui: None,
        latency_ms: 0,
        question_types: vec![],
        ..record
    };
    let value = serde_json::to_value(&rejected).unwrap();
    assert_eq!(schema_errors(&v, &value), Vec::<String>::new());
    assert_eq!(fields(&value), fields(&example("telemetry/rejected.json")));
    // A request with a context: its agent and project, nothing else of it.
    let with_context = example("telemetry/answered.context.json");
    let sent = example("client/ask-user-request.context.json");
    let record = Record {
        correlation_id: with_context["correlationId"].as_str().map(str::to_owned),
        agent: sent["context"]["agent"].as_str().map(str::to_owned),
        project: sent["context"]["project"].as_str().map(str::to_owned),
        question_types: vec!["yesno"],
        answer_count: 1,
        ..rejected
    };
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(schema_errors(&v, &value), Vec::<String>::new());
    assert_eq!(value["agent"], with_context["agent"]);
    assert_eq!(value["project"], with_context["project"]);
    assert_eq!(with_context["correlationId"], sent["correlationId"]);
    for leak in ["title", "session", "cwd"] {
        assert!(with_context.get(leak).is_none(), "{leak}");
    }
    // A request its producer withdrew as answered elsewhere (askbus acp's editor answered).
    let elsewhere = example("telemetry/withdrawn.answered-elsewhere.json");
    let record = Record {
        reason: End::Withdrawn,
        code: None,
        agent: None,
        project: None,
        decided_by: Some(Box::new(askbus::protocol::DecidedBy {
            via: Some("acp".into()),
            ..askbus::protocol::DecidedBy::of_end(End::Answered)
        })),
        latency_ms: 4180,
        question_types: vec!["choice", "yesno"],
        dismissed: true,
        answer_count: 0,
        ..record
    };
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(schema_errors(&v, &value), Vec::<String>::new());
    assert_eq!(fields(&value), fields(&elsewhere));
    assert_eq!(value["decidedBy"], elsewhere["decidedBy"]);
}

/// The context a producer sends is what a UI receives with the request, what observers see of
/// it (agent and project only) and what the daemon refuses, as the examples show.
#[test]
fn context_examples_are_what_the_daemon_makes_of_them() {
    let sent = example("client/ask-user-request.context.json");
    let got = example("server/ask-user-request.context.json");
    assert_eq!(got["context"], sent["context"]);
    assert_eq!(got["correlationId"], sent["correlationId"]);
    let normalized = questions::validate(&sent).unwrap();
    assert_eq!(got["questions"], Value::Array(normalized));
    let Inbound::AskUserRequest(req) = parse_inbound(&serde_json::to_vec(&sent).unwrap()).unwrap()
    else {
        panic!("a request")
    };
    let context = req.context.expect("the example has a context");
    assert_eq!(serde_json::to_value(&context).unwrap(), sent["context"]);
    // The UI it was captured for subscribed with the filter example, which matches it.
    let Inbound::Subscribe { filter, .. } =
        parse_inbound(&serde_json::to_vec(&example("client/subscribe.filter.json")).unwrap())
            .unwrap()
    else {
        panic!("a subscribe")
    };
    assert!(filter.matches(Some(&context)));
    assert!(!filter.matches(None));

    let ev = example("server/bus-event.request.context.json");
    assert_eq!(ev["agent"], sent["context"]["agent"]);
    assert_eq!(ev["project"], sent["context"]["project"]);
    let text = ev.to_string();
    for hidden in ["title", "session", "cwd"] {
        let value = sent["context"][hidden].as_str().unwrap();
        assert!(!text.contains(value), "the event leaks context.{hidden}");
    }
    assert!(!text.contains("Push the release tag"));

    let bad = example("client/ask-user-request.context-invalid.json");
    let refused = parse_inbound(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
    let err = example("server/error.invalid-request.context.json");
    assert_eq!(err["code"], refused.code.as_str());
    assert_eq!(err["message"], refused.message.as_str());
    assert_eq!(err["correlationId"], bad["correlationId"]);
    assert!(err["message"].as_str().unwrap().contains("context.title"));
}

#[test]
fn mode_examples_are_what_the_daemon_makes_of_them() {
    use askbusd::protocol::ApprovalMode;
    let sent = example("client/tool-confirmation-request.mode.json");
    let got = example("server/tool-confirmation-request.mode.json");
    assert_eq!(got["context"], sent["context"]);
    let Inbound::ToolConfirmationRequest(req) =
        parse_inbound(&serde_json::to_vec(&sent).unwrap()).unwrap()
    else {
        panic!("an approval")
    };
    let context = req.context.clone().expect("the example has a context");
    assert_eq!(
        (context.approval_mode, context.interactive),
        (Some(ApprovalMode::AutoEdit), Some(false))
    );
    assert_eq!(serde_json::to_value(&context).unwrap(), sent["context"]);
    // The schema's modes are the code's.
    let all = schemas();
    let modes: Vec<&str> = ApprovalMode::ALL.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        all["schema/common.schema.json"]["$defs"]["context"]["properties"]["approvalMode"]["enum"],
        json!(modes)
    );

    let bad = example("client/tool-confirmation-request.mode-invalid.json");
    let refused = parse_inbound(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
    let err = example("server/error.invalid-request.mode.json");
    assert_eq!(err["code"], refused.code.as_str());
    assert_eq!(err["message"], refused.message.as_str());
    assert_eq!(err["correlationId"], bad["correlationId"]);
}

/// The schemas' enums are the code's own lists, so renaming a code or reason fails here.
#[test]
fn schema_enums_are_the_codes() {
    let common = load("schema/common.schema.json");
    let defs = &common["$defs"];
    let names = |v: &Value| -> Vec<String> {
        v["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let codes: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(names(&defs["errorCode"]), codes);
    let closing: BTreeSet<String> = ErrorCode::ALL
        .iter()
        .filter(|c| c.closes_connection())
        .map(|c| c.as_str().to_owned())
        .collect();
    let documented: BTreeSet<String> = names(&defs["closingErrorCode"]).into_iter().collect();
    assert_eq!(documented, closing);
    let outcomes = [
        Outcome::Answered,
        Outcome::Dismissed,
        Outcome::Timeout,
        Outcome::NoUi,
        Outcome::Withdrawn,
        Outcome::Shutdown,
    ];
    let outcomes: Vec<String> = outcomes.iter().map(|o| o.as_str().to_owned()).collect();
    assert_eq!(names(&defs["outcome"]), outcomes);
    let reasons = [
        WithdrawReason::Answered,
        WithdrawReason::Timeout,
        WithdrawReason::Withdrawn,
        WithdrawReason::ProducerGone,
        WithdrawReason::Shutdown,
    ];
    let reasons: Vec<String> = reasons.iter().map(|r| r.as_str().to_owned()).collect();
    assert_eq!(names(&defs["withdrawReason"]), reasons);
    let policies: Vec<String> = [NoUiPolicy::Wait, NoUiPolicy::Reject]
        .iter()
        .map(|p| p.as_str().to_owned())
        .collect();
    assert_eq!(names(&defs["noUi"]), policies);
    assert_eq!(
        defs["correlationId"]["maxLength"],
        json!(MAX_CORRELATION_ID_CHARS)
    );
    assert_eq!(
        defs["client"]["maxLength"],
        json!(askbusd::protocol::MAX_CLIENT_CHARS)
    );
}

/// The questions schema is the reference's schema stage: over the 1,035 recorded reference
/// cases it passes exactly those that got past Ajv (accepted, or refused by the tool's own
/// "Question N…" checks) and fails those Ajv refused ("params…" messages).
#[test]
fn questions_schema_agrees_with_the_reference_schema_stage() {
    let all = schemas();
    let params_schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["questions"],
        "properties": {
            "questions": { "$ref": format!("{SCHEMA_BASE}common.schema.json#/$defs/questions") }
        }
    });
    let resources = all.values().map(|s| {
        let id = s["$id"].as_str().unwrap().to_owned();
        (id, Resource::from_contents(s.clone()).unwrap())
    });
    let v = jsonschema::draft202012::options()
        .with_resources(resources)
        .build(&params_schema)
        .unwrap();
    let path = proto().join("../clients/rust/tests/data/ask_user_reference_cases.json");
    let cases = read_json(&path);
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), 1035);
    let mut disagreements = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let error = case["error"].as_str().unwrap_or("");
        // SchemaValidator refuses a non-object before Ajv runs; JSON Schema reaches the
        // same verdict through "type": "object", except for arrays (JS objects) which Ajv
        // then refuses with a "params must …" message: either way, schema-invalid.
        let schema_stage_refused =
            error.starts_with("params") || error.starts_with("Value of params");
        if v.is_valid(&case["params"]) == schema_stage_refused {
            disagreements.push(format!("case {n}: {} → {error:?}", case["params"]));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of 1035 disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// Observers see the example request's shape (headers, types, effective timeout), never its
/// text or answers.
#[test]
fn bus_events_describe_the_example_request() {
    let request = example("client/ask-user-request.json");
    let normalized = questions::validate(&request).unwrap();
    let headers: Vec<Value> = normalized.iter().map(|q| q["header"].clone()).collect();
    let types: Vec<Value> = normalized.iter().map(|q| q["type"].clone()).collect();
    for (file, event) in [
        ("server/bus-event.request.json", "request"),
        ("server/bus-event.answered.json", "answered"),
    ] {
        let ev = example(file);
        assert_eq!(ev["event"], event, "{file}");
        assert_eq!(ev["correlationId"], request["correlationId"], "{file}");
        assert_eq!(ev["headers"], Value::Array(headers.clone()), "{file}");
        assert_eq!(ev["questionTypes"], Value::Array(types.clone()), "{file}");
        let text = ev.to_string();
        assert!(
            !text.contains("Which database"),
            "{file} leaks question text"
        );
        assert!(!text.contains("PostgreSQL"), "{file} leaks an answer");
    }
    assert_eq!(
        example("server/bus-event.request.json")["timeoutMs"],
        request["timeoutMs"]
    );
    let rejected = example("server/bus-event.rejected.json");
    assert_eq!(rejected["code"], "invalid-request");
    assert_eq!(
        rejected["correlationId"],
        example("client/ask-user-request.invalid.json")["correlationId"]
    );
    let schema = load("schema/server/bus-event.schema.json");
    let events: BTreeSet<&str> = schema["properties"]["event"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut expected: BTreeSet<&str> = ["request", "producer-gone", "rejected", "notify"].into();
    for o in [
        Outcome::Answered,
        Outcome::Dismissed,
        Outcome::Timeout,
        Outcome::NoUi,
        Outcome::Withdrawn,
        Outcome::Shutdown,
    ] {
        expected.insert(o.as_str());
    }
    assert_eq!(events, expected);
}

/// The approval examples agree with the code: the rules of `approvals`, the producer's
/// messages, and the Rust client writes the client examples exactly.
#[test]
fn approval_examples_agree_with_the_code() {
    let request = example("client/tool-confirmation-request.json");
    let id = request["correlationId"].as_str().unwrap();
    let timeout_ms = request["timeoutMs"].as_u64().unwrap();
    let Inbound::ToolConfirmationRequest(parsed) =
        parse_inbound(&serde_json::to_vec(&request).unwrap()).unwrap()
    else {
        panic!("an approval")
    };
    let valid = approvals::check(parsed).unwrap();
    let ui = example("server/tool-confirmation-request.json");
    let ServerFrame::ToolConfirmationRequest(got) = serde_json::from_value(ui.clone()).unwrap()
    else {
        panic!("a UI approval")
    };
    let want = valid
        .body
        .ui_frame(id, got.timeout_ms, &got.producer, valid.context.as_ref());
    assert_eq!(got, want, "the UI is shown what the producer sent");

    for reason in [
        Outcome::Dismissed,
        Outcome::Timeout,
        Outcome::NoUi,
        Outcome::Withdrawn,
        Outcome::Shutdown,
    ] {
        let file = format!("server/tool-confirmation-response.{}.json", reason.as_str());
        let v = example(&file);
        assert_eq!(v["correlationId"], id, "{file}");
        assert_eq!(v["confirmed"], false, "{file}");
        assert_eq!(v["outcome"], "cancel", "{file}");
        assert_eq!(
            v["message"].as_str(),
            approvals::daemon_message(reason, timeout_ms).as_deref(),
            "{file}"
        );
    }
    let deny = example("client/tool-confirmation-response.deny.json");
    let denied = example("server/tool-confirmation-response.denied.json");
    assert_eq!(denied["message"], deny["message"]);

    let invalid = example("client/tool-confirmation-request.invalid.json");
    let Inbound::ToolConfirmationRequest(parsed) =
        parse_inbound(&serde_json::to_vec(&invalid).unwrap()).unwrap()
    else {
        panic!("an approval")
    };
    let refused = approvals::check(parsed).unwrap_err();
    let err = example("server/error.invalid-request.tool-confirmation.json");
    assert_eq!(err["message"], refused.message.as_str());
    assert_eq!(err["correlationId"], refused.correlation_id.as_str());

    let outcomes = [
        ToolOutcome::ProceedOnce,
        ToolOutcome::ProceedAlways,
        ToolOutcome::Cancel,
    ];
    let message = deny["message"].as_str().unwrap();
    let cases = [
        (
            "client/tool-confirmation-request.json",
            ClientFrame::ToolConfirmationRequest {
                correlation_id: id,
                tool_call: &request["toolCall"],
                server_name: None,
                tool_annotations: None,
                subagent: None,
                details: Some(&request["details"]),
                outcomes: Some(&outcomes),
                timeout_ms: Some(timeout_ms),
                no_ui: None,
                context: None,
            },
        ),
        (
            "client/tool-confirmation-request.no-ui-reject.json",
            ClientFrame::ToolConfirmationRequest {
                correlation_id: id,
                tool_call: &request["toolCall"],
                server_name: None,
                tool_annotations: None,
                subagent: None,
                details: Some(&request["details"]),
                outcomes: Some(&outcomes),
                timeout_ms: Some(timeout_ms),
                no_ui: Some(NoUiPolicy::Reject),
                context: None,
            },
        ),
        (
            "client/tool-confirmation-cancel.json",
            ClientFrame::ToolConfirmationCancel {
                correlation_id: id,
                reason: None,
                via: None,
            },
        ),
        (
            "client/tool-confirmation-cancel.answered-elsewhere.json",
            ClientFrame::ToolConfirmationCancel {
                correlation_id: id,
                reason: Some("answered-elsewhere"),
                via: Some("acp"),
            },
        ),
        (
            "client/tool-confirmation-response.json",
            ClientFrame::ToolConfirmationResponse {
                correlation_id: id,
                confirmed: Some(true),
                outcome: Some(ToolOutcome::ProceedOnce),
                message: None,
                payload: None,
                dismissed: false,
                user: None,
            },
        ),
        (
            "client/tool-confirmation-response.deny.json",
            ClientFrame::ToolConfirmationResponse {
                correlation_id: id,
                confirmed: Some(false),
                outcome: Some(ToolOutcome::Cancel),
                message: Some(message),
                payload: None,
                dismissed: false,
                user: None,
            },
        ),
        (
            "client/tool-confirmation-response.user.json",
            ClientFrame::ToolConfirmationResponse {
                correlation_id: id,
                confirmed: Some(true),
                outcome: Some(ToolOutcome::ProceedOnce),
                message: None,
                payload: None,
                dismissed: false,
                user: Some("Alice Example (123456789)"),
            },
        ),
        (
            "client/tool-confirmation-response.dismissed.json",
            ClientFrame::ToolConfirmationResponse {
                correlation_id: id,
                confirmed: None,
                outcome: None,
                message: None,
                payload: None,
                dismissed: true,
                user: None,
            },
        ),
    ];
    for (file, frame) in cases {
        let sent: Value = serde_json::from_slice(&encode(&frame)).unwrap();
        assert_eq!(sent, example(file), "{file}");
    }
    let common = load("schema/common.schema.json");
    let names: Vec<&str> = common["$defs"]["toolConfirmationOutcome"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names, ToolOutcome::ALL.map(ToolOutcome::as_str));
    let types: Vec<&str> = common["$defs"]["confirmationDetails"]["properties"]["type"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(types, approvals::DETAIL_TYPES);
}

/// `shownSha256` (PROTOCOL.md, "What a request showed"): the crate's digest of each golden
/// frame is the one in the file, which clients/python/tests/test_shown.py computes with
/// Python's standard library from RFC 8785 (so the two implementations agree through it).
#[test]
fn shown_sha256_matches_the_independent_goldens() {
    use askbus::protocol::{shown_json, shown_sha256, ServerFrame};
    let shown: Vec<Example> = examples()
        .into_iter()
        .filter(|e| e.direction == "shown")
        .collect();
    assert_eq!(shown.len(), 2);
    for ex in shown {
        let frame: ServerFrame = serde_json::from_value(ex.value["frame"].clone())
            .unwrap_or_else(|e| panic!("{}: {e}", ex.file));
        let s = match &frame {
            ServerFrame::AskUserRequest(r) => r.shown(),
            ServerFrame::ToolConfirmationRequest(a) => a.shown(),
            other => panic!("{}: not a request: {other:?}", ex.file),
        };
        assert_eq!(
            shown_json(&s),
            ex.value["shown"].as_str().unwrap(),
            "{}",
            ex.file
        );
        assert_eq!(
            shown_sha256(&s),
            ex.value["shownSha256"].as_str().unwrap(),
            "{}",
            ex.file
        );
    }
}
