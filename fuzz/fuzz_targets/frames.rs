//! Frame parsing over arbitrary payloads: never a panic, and every rejection carries a code
//! and a message for the peer.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = askbus::protocol::parse_inbound(data) {
        assert!(!e.message.is_empty());
        assert!(askbus::protocol::ErrorCode::parse(e.code.as_str()) == Some(e.code));
    }
});
