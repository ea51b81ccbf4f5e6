//! Frame parsing over arbitrary payloads: never a panic, every rejection carries a code and a
//! message for the peer, and the daemon's one-pass request path agrees with the general path
//! (`parse_inbound`, then `questions::check`) on every frame it takes.
#![no_main]

use askbus::protocol::Inbound;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let general = askbus::protocol::parse_inbound(data);
    if let Err(e) = &general {
        assert!(!e.message.is_empty());
        assert!(askbus::protocol::ErrorCode::parse(e.code.as_str()) == Some(e.code));
    }
    if let Some((head, one)) = askbus::questions::check_request(data) {
        let Ok(Inbound::AskUserRequest(req)) = general else {
            panic!("the one pass took a frame the general path reads as {general:?}");
        };
        assert_eq!(head.correlation_id, req.correlation_id);
        assert_eq!(head.timeout_ms, req.timeout_ms);
        assert_eq!(head.no_ui, req.no_ui);
        assert_eq!(head.context, req.context);
        let checked = askbus::questions::check(req.questions).expect("the one pass accepted it");
        assert_eq!(one.questions, checked.questions);
        assert_eq!(one.meta, checked.meta);
    }
});
