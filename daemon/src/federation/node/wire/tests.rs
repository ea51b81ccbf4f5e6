//! The federation messages as written and read: shares, ends, presence, sync pages and answer
//! requests, and what is refused.

use super::*;
use crate::broker::Answer;

#[test]
fn an_approval_entry_is_checked_as_a_local_request_would_be() {
    let fields = |v: &str| RawValue::from_string(v.to_owned()).unwrap();
    let ok = fields(
        r#"{"toolCall":{"name":"run_shell_command","args":{}},"outcomes":["cancel","proceed_once","proceed_always"]}"#,
    );
    let context = fields(r#"{"project":"askbus"}"#);
    match valid_request("ap", &ok, true, Some(&context)) {
        Ok(a) => {
            let body = a.body().approval().expect("an approval");
            assert_eq!(body.tool(), "run_shell_command");
            assert_eq!(body.outcomes.len(), 3);
            assert_eq!(a.context().unwrap().project.as_deref(), Some("askbus"));
        }
        other => panic!("{other:?}"),
    }
    for bad in [
        r#"{"toolCall":{"name":""}}"#,
        r#"{}"#,
        r#"[1]"#,
        r#"{"toolCall":{"name":"x"},"outcomes":["maybe"]}"#,
    ] {
        assert!(
            valid_request("ap", &fields(bad), true, None).is_err(),
            "{bad}"
        );
    }
    // A share that holds both, or neither, is not read.
    assert!(parse_message(
        br#"{"v":2,"epoch":1,"seq":1,"correlationId":"x","questions":[],"approval":{},"deadlineMs":1}"#
    )
    .is_err());
}

#[test]
fn malformed_entries_and_answers_are_refused() {
    assert!(parse_message(b"not json").is_err());
    assert!(parse_message(br#"{"v":2,"epoch":1,"seq":1,"correlationId":"x"}"#).is_err());
    // The old layout's entries (v1) and messages with no envelope are another protocol.
    assert_eq!(
        parse_message(br#"{"v":1,"node":"a","correlationId":"x","questions":[],"deadlineMs":1}"#)
            .unwrap_err(),
        ParseError::Version(1)
    );
    assert!(parse_message(br#"{"correlationId":"x","questions":[],"deadlineMs":1}"#).is_err());
    assert!(matches!(
        parse_message(&presence(Presence::Hello, 7, 3, 2)).unwrap(),
        Message {
            epoch: 7,
            seq: 3,
            body: Msg::Beat {
                pending: 2,
                hello: true
            }
        }
    ));
    assert!(matches!(
        parse_message(&presence(Presence::Bye, 7, 3, 0))
            .unwrap()
            .body,
        Msg::Bye
    ));
    assert!(parse_sync_page(&sync_page(7, 3, &[b"{}".to_vec()], None), 1 << 20).is_err());
    let page = parse_sync_page(&sync_page(7, 3, &[], Some("a")), 1 << 20).unwrap();
    assert_eq!(
        (page.epoch, page.seq, page.next.as_deref()),
        (7, 3, Some("a"))
    );
    assert_eq!(
        parse_sync_request(&sync_request(Some("a"))),
        Ok(Some("a".into()))
    );
    assert!(parse_sync_request(br#"{"v":1}"#).is_err());
    assert!(parse_answer(
        br#"{"type":"ask-user-response","correlationId":"x","answers":{"a":"b"}}"#
    )
    .is_err());
    let (resp, by, peer) = parse_answer(
        br#"{"type":"ask-user-response","correlationId":"x","answers":{"0":"b"},"ui":{"node":"B","pid":3,"peer":9}}"#,
    )
    .unwrap();
    let Answer::Question(resp) = resp else {
        panic!("a question's answer")
    };
    assert_eq!(resp.answers[&0], "b");
    assert_eq!(by.node.as_deref(), Some("B"));
    assert_eq!(peer, Some(9));
}

/// What `answer_request` and `ended` wrote when they went through `serde_json::Value`:
/// the bytes on the wire must not change with the writer.
fn ui_value(by: &UiInfo, peer: Option<PeerId>) -> Value {
    let mut v = serde_json::to_value(by).unwrap();
    if let Some(peer) = peer {
        v["peer"] = serde_json::json!(peer);
    }
    v
}

#[test]
fn answers_and_ends_are_written_as_serde_wrote_them_and_read_back() {
    use crate::protocol::{AskUserResponse, Decision, End, ToolConfirmationResponse, ToolOutcome};
    use serde_json::json;
    use std::collections::BTreeMap;
    let by = UiInfo {
        client: Some("tui \"1\"".into()),
        pid: Some(-3),
        node: Some("B".into()),
    };
    let q = Answer::Question(AskUserResponse {
        correlation_id: "q\n1".into(),
        answers: BTreeMap::from([(0, "a\"b".into()), (2, "é".into())]),
        cancelled: false,
        user: None,
    });
    let old = json!({
        "type": "ask-user-response",
        "correlationId": "q\n1",
        "answers": {"0": "a\"b", "2": "é"},
        "cancelled": false,
        "ui": ui_value(&by, Some(9)),
    });
    let bytes = answer_request(&q, &by, 9);
    assert_eq!(bytes, serde_json::to_vec(&old).unwrap());
    let (Answer::Question(resp), read_by, peer) = parse_answer(&bytes).unwrap() else {
        panic!("a question's answer")
    };
    assert_eq!(
        (resp.correlation_id.as_str(), resp.answers.len()),
        ("q\n1", 2)
    );
    assert_eq!((read_by, peer), (by.clone(), Some(9)));

    let mut payload = serde_json::Map::new();
    payload.insert("k".into(), json!([1, "x"]));
    let decided = Answer::Approval(ToolConfirmationResponse {
        correlation_id: "ap".into(),
        decision: Decision::Decided {
            outcome: ToolOutcome::ProceedOnce,
            message: Some("ok".into()),
            payload: Some(payload.clone()),
        },
        user: None,
    });
    let nobody = UiInfo {
        client: None,
        pid: None,
        node: None,
    };
    let old = json!({
        "type": "tool-confirmation-response",
        "correlationId": "ap",
        "confirmed": true,
        "outcome": "proceed_once",
        "message": "ok",
        "payload": payload,
        "ui": ui_value(&nobody, Some(0)),
    });
    let bytes = answer_request(&decided, &nobody, 0);
    assert_eq!(bytes, serde_json::to_vec(&old).unwrap());
    let (Answer::Approval(resp), read_by, peer) = parse_answer(&bytes).unwrap() else {
        panic!("an approval's decision")
    };
    assert!(matches!(
        resp.decision,
        Decision::Decided {
            outcome: ToolOutcome::ProceedOnce,
            ..
        }
    ));
    assert_eq!((read_by, peer), (nobody.clone(), Some(0)));
    let dismissed = Answer::Approval(ToolConfirmationResponse {
        correlation_id: "ap".into(),
        decision: Decision::Dismissed,
        user: None,
    });
    let old = json!({
        "type": "tool-confirmation-response",
        "correlationId": "ap",
        "dismissed": true,
        "ui": ui_value(&by, Some(1)),
    });
    assert_eq!(
        answer_request(&dismissed, &by, 1),
        serde_json::to_vec(&old).unwrap()
    );

    for (reason, answered_by, peer) in [
        (End::Answered, Some(by.clone()), Some(7)),
        (End::Answered, Some(nobody.clone()), None),
        (End::ProducerGone, None, None),
        (End::NoUi, None, None),
    ] {
        let end = SharedEnd {
            id: "e\"1".into(),
            reason,
            answered_by: answered_by.clone(),
            winner_peer: peer,
        };
        let mut old =
            json!({"v": VERSION, "epoch": 5, "seq": 6, "correlationId": "e\"1", "ended": reason});
        if let Some(by) = &answered_by {
            old["answeredBy"] = ui_value(by, peer);
        }
        let bytes = ended(&end, 5, 6);
        assert_eq!(bytes, serde_json::to_vec(&old).unwrap(), "{reason:?}");
        let m = parse_message(&bytes).unwrap();
        let Msg::End(Entry::Ended {
            id,
            answered_by: read,
            winner_peer,
            ..
        }) = m.body
        else {
            panic!("an end")
        };
        assert_eq!(
            (id.as_str(), read, winner_peer),
            ("e\"1", answered_by, peer)
        );
    }
}

#[test]
fn an_answer_reads_the_same_wherever_its_ui_is() {
    let frame = r#""type":"ask-user-response","correlationId":"x","answers":{"0":"b"}"#;
    let ui = r#""ui" : {"node":"B","pid":3,"peer":9,"client":7}"#;
    for (text, named) in [
        (format!("{{{frame},{ui}}}"), true),
        (format!("{{ {ui} , {frame}}}"), true),
        (format!("{{{ui},{frame}}}"), true),
        (
            format!(
                r#"{{"type":"ask-user-response",{ui},"correlationId":"x","answers":{{"0":"b"}}}}"#
            ),
            true,
        ),
        (format!("{{{frame}}}"), false),
        // A key spelt with an escape: the answer is read by the reference, its UI unnamed.
        (format!(r#"{{{frame},"u\u0069":{{"node":"B"}}}}"#), false),
    ] {
        let (resp, by, peer) =
            parse_answer(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let Answer::Question(resp) = resp else {
            panic!("{text}")
        };
        assert_eq!(
            (resp.correlation_id.as_str(), resp.answers[&0].as_str()),
            ("x", "b"),
            "{text}"
        );
        // A field of the wrong type (`client`) is left out, not a refusal.
        let expect = named.then_some((Some("B"), Some(3), Some(9)));
        assert_eq!(
            expect.unwrap_or_default(),
            (by.node.as_deref(), by.pid, peer),
            "{text}"
        );
        assert_eq!(by.client, None, "{text}");
    }
    // Two `ui`s: the answer is read by the reference, its UI unnamed. Garbage, or a
    // request: refused.
    let (_, by, peer) = parse_answer(br#"{"type":"ask-user-response","correlationId":"x","answers":{"0":"b"},"ui":{"node":"B"},"ui":{}}"#).unwrap();
    assert_eq!((by.node, peer), (None, None));
    assert!(parse_answer(br#"{"type":"ask-user-response","ui":{}"#).is_err());
    assert!(parse_answer(
        br#"{"type":"ask-user-request","correlationId":"x","questions":[],"ui":{}}"#
    )
    .is_err());
}
