//! Frame parsing over arbitrary payloads: never a panic, every rejection carries a code and a
//! message for the peer, and the daemon's fast request path agrees with the reference
//! (`protocol::parse::reference`, then `questions::normalize`) on every frame it takes.
#![no_main]

use askbus::protocol::{parse, Inbound};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The daemon's entry (fast, then the reference; debug builds assert they agree).
    let inbound = askbus::protocol::parse_inbound(data);
    let reference = parse::reference::parse(data);
    assert_eq!(inbound, reference);
    if let Err(e) = &reference {
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
});
