//! ask_user validation over arbitrary JSON: never a panic; accepted questions normalize to
//! something the result builders accept.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(params) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    match askbus::questions::validate(&params) {
        Ok(normalized) => {
            let meta = askbus::questions::meta(&normalized);
            assert_eq!(meta.len(), normalized.len());
            let answers: BTreeMap<usize, String> =
                (0..meta.len()).map(|i| (i, format!("a{i}\nb"))).collect();
            let result = askbus::questions::answered_result(&meta, &answers);
            assert!(result.llm_content.starts_with("{\"answers\":"));
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
