//! Frame parsing over arbitrary payloads: never a panic, every rejection carries a code and a
//! message for the peer, and the daemon's fast request paths agree with the reference
//! (`protocol::parse::reference`, then `questions::normalize` or `approvals::check`) on every
//! frame they take, down to the bytes UIs are sent of an approval.
#![no_main]

use askbus::protocol::{parse, Inbound};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reference entry (the daemon tries the fast paths below first, in its door).
    let inbound = askbus::protocol::parse_inbound(data);
    let reference = parse::reference::parse(data);
    assert_eq!(inbound, reference.clone().map_err(|r| r.into_error()));
    if let Err(r) = &reference {
        let e = r.error();
        assert!(!e.message.is_empty());
        assert!(askbus::protocol::ErrorCode::parse(e.code.as_str()) == Some(e.code));
    }
    if let Some(fast) = parse::fast::parse(data) {
        assert_eq!(Ok(&fast), reference.as_ref());
    }
    if let Some((head, fast)) = askbus::questions::fast::check_request(data) {
        let Ok(Inbound::AskUserRequest(req)) = reference else {
            panic!("the fast path took a frame the reference reads as {reference:?}");
        };
        assert_eq!(head.correlation_id, req.correlation_id);
        assert_eq!(head.timeout_ms, req.timeout_ms);
        assert_eq!(head.no_ui, req.no_ui);
        assert_eq!(head.context, req.context);
        let checked = askbus::questions::normalize(&req.questions.into_params())
            .expect("the fast path accepted it");
        assert_eq!(fast.questions, checked.questions);
        assert_eq!(fast.meta, checked.meta);
    }
    if let Some(fast) = askbus::approvals::fast::check_request(data) {
        let Ok(Inbound::ToolConfirmationRequest(req)) = parse::reference::parse(data) else {
            panic!("the fast path took an approval the reference refuses");
        };
        let checked = askbus::approvals::check(req).expect("the fast path accepted it");
        assert_eq!(fast, checked);
        let producer = askbus::protocol::ProducerInfo::default();
        let by_ref = fast
            .body
            .ui_frame_ref(&fast.correlation_id, 1, &producer, None, None)
            .encode();
        let reference = askbus::protocol::ServerFrame::ToolConfirmationRequest(
            checked.body.ui_frame(&checked.correlation_id, 1, &producer, None),
        );
        assert_eq!(by_ref, askbus::protocol::encode(&reference));
    }
});
