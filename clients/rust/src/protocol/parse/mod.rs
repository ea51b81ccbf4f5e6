//! Reading a frame a peer sent. [`reference`](mod@reference) decides every frame and words
//! every error, and [`parse_inbound`] is it. Behind the feature `fast`, `fast` is an
//! optimisation of it for the frames every question and approval costs, which may only accept
//! what the reference accepts and must then yield the same; the daemon's door (askbusd's
//! `intake`) tries it first and leaves the rest to the reference, and debug builds there
//! assert the two agree on every frame it takes.

#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod fast;
pub mod reference;

use super::error::FrameError;
use super::frames::Inbound;

/// Parses one frame's payload, as the reference does. Errors carry the code and message the
/// peer is sent.
pub fn parse_inbound(payload: &[u8]) -> Result<Inbound, FrameError> {
    reference::parse(payload).map_err(reference::Refusal::into_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::*;

    fn code_of(payload: &[u8]) -> ErrorCode {
        parse_inbound(payload).unwrap_err().code
    }

    #[test]
    fn a_lone_surrogate_anywhere_is_invalid_json_on_every_path() {
        // Found by fuzzing: the fast path kept the questions raw and took this frame.
        let lone = br#"{"type":"ask-user-request","correlationId":"f","questions":[{"question":"a \ude80","header":"h","type":"text"}]}"#;
        assert_eq!(code_of(lone), ErrorCode::InvalidJson);
        let paired = br#"{"type":"ask-user-request","correlationId":"f","questions":[{"question":"a \ud83d\ude80","header":"h","type":"text"}]}"#;
        let mut bad_utf8 = br#"{"type":"ask-user-request","correlationId":"f","questions":[{"question":"a","header":"h","type":"text"}],"extra":"x"}"#.to_vec();
        let at = bad_utf8.len() - 3;
        bad_utf8[at] = 0x8c;
        assert_eq!(code_of(&bad_utf8), ErrorCode::InvalidJson);
        assert!(matches!(
            parse_inbound(paired),
            Ok(Inbound::AskUserRequest(_))
        ));
        // The fast parser leaves the refused ones to the reference.
        #[cfg(feature = "fast")]
        {
            assert!(fast::parse(lone).is_none());
            assert!(fast::parse(&bad_utf8).is_none());
        }
    }

    #[test]
    fn rejects_non_json_and_non_objects() {
        assert_eq!(code_of(b""), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"{"), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"\xff\xfe"), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"[1]"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{\"type\":3}"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{}"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{\"type\":\"welcome\"}"), ErrorCode::UnknownType);
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = parse_inbound(br#"{"type":"ping","id":7}"#).unwrap();
        let b = parse_inbound(b" {\n \"id\" : 7 ,\t\"type\" : \"ping\" } ").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn hello_protocol_checked() {
        assert!(matches!(
            parse_inbound(br#"{"type":"hello","protocol":1,"client":"t/1"}"#).unwrap(),
            Inbound::Hello {
                protocol: 1,
                client: Some(_),
                via: None,
            }
        ));
        assert_eq!(
            code_of(br#"{"type":"hello","protocol":2}"#),
            ErrorCode::UnsupportedProtocol
        );
        // PROTOCOL.md: only the JSON integer 1. Neither path may take a float spelling of it
        // (the fast parser leaves hello to the reference, which refuses it).
        for spelling in ["1.0", "1e0", "1E0", "10e-1", "1.00", "2", "1.5", "-1", "0"] {
            let frame = format!(r#"{{"type":"hello","protocol":{spelling}}}"#);
            #[cfg(feature = "fast")]
            {
                assert!(fast::parse(frame.as_bytes()).is_none(), "{frame}");
                assert!(
                    fast::parse_fast::<&serde_json::value::RawValue>(frame.as_bytes()).is_none(),
                    "{frame}"
                );
            }
            let err = parse_inbound(frame.as_bytes()).unwrap_err();
            assert_eq!(err.code, ErrorCode::UnsupportedProtocol, "{frame}");
            assert!(err.code.closes_connection());
        }
        assert!(parse_inbound(br#"{"type":"hello","protocol":1.0}"#)
            .unwrap_err()
            .message
            .contains("send the JSON integer 1"));
        assert_eq!(
            code_of(br#"{"type":"hello","protocol":"1"}"#),
            ErrorCode::UnsupportedProtocol
        );
        assert_eq!(code_of(br#"{"type":"hello"}"#), ErrorCode::InvalidFrame);
    }

    #[test]
    fn request_fields_checked_before_questions() {
        let e = parse_inbound(br#"{"type":"ask-user-request","questions":[]}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        let long = "x".repeat(129);
        let frame = format!(r#"{{"type":"ask-user-request","correlationId":"{long}"}}"#);
        assert_eq!(code_of(frame.as_bytes()), ErrorCode::InvalidRequest);
        let ok128 = "é".repeat(128);
        let frame = format!(r#"{{"type":"ask-user-request","correlationId":"{ok128}"}}"#);
        assert!(parse_inbound(frame.as_bytes()).is_ok());
        for bad in ["0", "-5", "1.5", "\"10\"", "null"] {
            let f =
                format!(r#"{{"type":"ask-user-request","correlationId":"a","timeoutMs":{bad}}}"#);
            let e = parse_inbound(f.as_bytes()).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{bad}");
            assert_eq!(e.correlation_id.as_deref(), Some("a"));
        }
        let f = br#"{"type":"ask-user-request","correlationId":"a","timeoutMs":1e30}"#;
        let Inbound::AskUserRequest(r) = parse_inbound(f).unwrap() else {
            panic!()
        };
        assert_eq!(r.timeout_ms.unwrap().clamp(99), 99);
        for (text, ms) in [("5000.0", 5000), ("1.0", 1), ("2e3", 2000)] {
            let f =
                format!(r#"{{"type":"ask-user-request","correlationId":"a","timeoutMs":{text}}}"#);
            let Inbound::AskUserRequest(r) = parse_inbound(f.as_bytes()).unwrap() else {
                panic!()
            };
            assert_eq!(r.timeout_ms, Some(TimeoutMs::Ms(ms)), "{text}");
        }
        let f = br#"{"type":"ask-user-request","correlationId":"a","noUi":"maybe"}"#;
        assert_eq!(code_of(f), ErrorCode::InvalidRequest);
    }

    #[test]
    fn request_context_checked_and_named() {
        let frame = |ctx: &str| {
            format!(
                r#"{{"type":"ask-user-request","correlationId":"a","noUi":"wait","context":{ctx},"questions":[]}}"#
            )
        };
        let Inbound::AskUserRequest(r) = parse_inbound(
            frame(r#"{"agent":"gemini-cli/0.61.0","project":"askbus","session":"s1","cwd":"/src/askbus","title":"Fix CI","future":[1]}"#)
                .as_bytes(),
        )
        .unwrap() else {
            panic!()
        };
        let c = r.context.unwrap();
        assert_eq!((c.approval_mode, c.interactive), (None, None));
        assert_eq!(c.project.as_deref(), Some("askbus"));
        assert_eq!(c.agent.as_deref(), Some("gemini-cli/0.61.0"));
        assert_eq!(c.cwd.as_deref(), Some("/src/askbus"));
        for (mode, want) in [
            ("default", ApprovalMode::Default),
            ("autoEdit", ApprovalMode::AutoEdit),
            ("yolo", ApprovalMode::Yolo),
            ("plan", ApprovalMode::Plan),
        ] {
            let ctx = format!(r#"{{"approvalMode":"{mode}","interactive":false}}"#);
            let Inbound::AskUserRequest(r) = parse_inbound(frame(&ctx).as_bytes()).unwrap() else {
                panic!()
            };
            let c = r.context.unwrap();
            assert_eq!((c.approval_mode, c.interactive), (Some(want), Some(false)));
            assert_eq!(serde_json::to_string(&c).unwrap(), ctx);
        }
        for empty in [
            "null",
            "{}",
            r#"{"project":null}"#,
            r#"{"other":"x"}"#,
            r#"{"approvalMode":null,"interactive":null}"#,
        ] {
            let Inbound::AskUserRequest(r) = parse_inbound(frame(empty).as_bytes()).unwrap() else {
                panic!()
            };
            assert_eq!(r.context, None, "{empty}");
        }
        let long = "p".repeat(129);
        for (ctx, message) in [
            ("[]".to_owned(), "context must be an object, not an array"),
            (
                "\"p\"".to_owned(),
                "context must be an object, not a string",
            ),
            (
                r#"{"project":7}"#.to_owned(),
                "context.project must be a string, not a number",
            ),
            (
                format!(r#"{{"project":"{long}"}}"#),
                "context.project must be at most 128 characters",
            ),
            (
                r#"{"title":"a\nb"}"#.to_owned(),
                "context.title must be one line without control characters",
            ),
            (
                r#"{"session":""}"#.to_owned(),
                "context.session must not be empty",
            ),
            (
                r#"{"agent":{"name":"x"}}"#.to_owned(),
                "context.agent must be a string, not an object",
            ),
            (
                r#"{"approvalMode":"YOLO"}"#.to_owned(),
                r#"context.approvalMode must be one of "default", "autoEdit", "yolo", "plan", not "YOLO""#,
            ),
            (
                r#"{"approvalMode":true}"#.to_owned(),
                "context.approvalMode must be a string, not a boolean",
            ),
            (
                r#"{"interactive":"false"}"#.to_owned(),
                "context.interactive must be true or false, not a string",
            ),
        ] {
            let e = parse_inbound(frame(&ctx).as_bytes()).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{ctx}");
            assert_eq!(e.message, message, "{ctx}");
            assert_eq!(e.correlation_id.as_deref(), Some("a"));
        }
        // 4096 characters of cwd are fine, 4097 are not; characters, not bytes.
        let ok = format!(r#"{{"cwd":"{}"}}"#, "é".repeat(4096));
        assert!(parse_inbound(frame(&ok).as_bytes()).is_ok());
        let bad = format!(r#"{{"cwd":"{}"}}"#, "é".repeat(4097));
        assert!(parse_inbound(frame(&bad).as_bytes()).is_err());
    }

    #[test]
    fn subscribe_filter_checked_and_matched() {
        let Inbound::Subscribe { filter, .. } = parse_inbound(
            br#"{"type":"subscribe","filter":{"project":"askbus","agent":"gemini-cli","session":null}}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(filter.project.as_deref(), Some("askbus"));
        assert_eq!(filter.session, None);
        for (f, message) in [
            (r#"[]"#, "filter must be an object, not an array"),
            (
                r#"{"colour":"a"}"#,
                "filter has no key \"colour\" (known: project, agent, session, node)",
            ),
            (
                r#"{"project":1}"#,
                "filter.project must be a string, not a number",
            ),
            (r#"{"project":""}"#, "filter.project must not be empty"),
        ] {
            let frame = format!(r#"{{"type":"subscribe","filter":{f}}}"#);
            let e = parse_inbound(frame.as_bytes()).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidFrame, "{f}");
            assert_eq!(e.message, message, "{f}");
        }
    }

    #[test]
    fn response_shape_checked() {
        let ok = br#"{"type":"ask-user-response","correlationId":"a","answers":{"1":"x","0":"y"}}"#;
        let Inbound::AskUserResponse(r) = parse_inbound(ok).unwrap() else {
            panic!()
        };
        assert_eq!(r.answers.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        for bad in [
            r#"{"type":"ask-user-response","correlationId":"a"}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":[]}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"01":"x"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"a":"x"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"0":1}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{},"cancelled":"yes"}"#,
            r#"{"type":"ask-user-response","answers":{}}"#,
        ] {
            assert_eq!(code_of(bad.as_bytes()), ErrorCode::InvalidResponse, "{bad}");
        }
        let dismiss = br#"{"type":"ask-user-response","correlationId":"a","cancelled":true}"#;
        assert!(parse_inbound(dismiss).is_ok());
    }
}
