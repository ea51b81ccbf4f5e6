//! The fast encoders (`protocol::encode_fast`, `UiRequestRef::encode`) against the reference
//! (`encode` of the same `ServerFrame`, the serde derive) on arbitrary values: every string
//! any Unicode, answers at any index, every outcome and reason.

// The daemon's fast paths exist only with the `fast` feature (`cargo test -p askbus` turns it
// on through the crate's own dev-dependency; the packaged crate's tests, with `--features fast`).
#![cfg(feature = "fast")]

use std::borrow::Cow;
use std::collections::BTreeMap;

use askbus::protocol::{
    encode, encode_fast, AskUserData, Outcome, ProducerInfo, ProducerResponse, ResultData,
    ResultPayload, ServerFrame, WithdrawReason,
};
use proptest::prelude::*;

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Answered),
        Just(Outcome::Dismissed),
        Just(Outcome::Timeout),
        Just(Outcome::NoUi),
        Just(Outcome::Withdrawn),
        Just(Outcome::Shutdown),
    ]
}

fn reason() -> impl Strategy<Value = WithdrawReason> {
    prop_oneof![
        Just(WithdrawReason::Answered),
        Just(WithdrawReason::Timeout),
        Just(WithdrawReason::Withdrawn),
        Just(WithdrawReason::ProducerGone),
        Just(WithdrawReason::Shutdown),
    ]
}

fn response() -> impl Strategy<Value = ProducerResponse> {
    (
        any::<String>(),
        prop::collection::btree_map(0usize..2000, any::<String>(), 0..6),
        any::<bool>(),
        outcome(),
        (any::<String>(), any::<String>()),
        (
            prop::collection::vec(any::<String>(), 0..4),
            any::<bool>(),
            any::<Option<bool>>(),
            any::<Option<u64>>(),
            any::<Option<String>>(),
        ),
    )
        .prop_map(
            |(
                id,
                answers,
                cancelled,
                reason,
                (llm, display),
                (types, dismissed, empty, count, why),
            )| {
                ProducerResponse {
                    correlation_id: id,
                    answers: answers.into_iter().collect::<BTreeMap<_, _>>(),
                    cancelled,
                    reason,
                    result: ResultPayload {
                        llm_content: llm,
                        return_display: display,
                        data: ResultData {
                            ask_user: AskUserData {
                                question_types: types.into_iter().map(Cow::Owned).collect(),
                                dismissed,
                                empty_submission: empty,
                                answer_count: count,
                                reason: why.map(Cow::Owned),
                            },
                        },
                    },
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn responses_are_the_bytes_serde_writes(r in response()) {
        let fast = encode_fast::response(&r);
        prop_assert_eq!(fast, encode(&ServerFrame::AskUserResponse(r)));
    }

    #[test]
    fn acks_and_withdrawals_are_the_bytes_serde_writes(
        id in any::<String>(), o in outcome(), w in reason()
    ) {
        let ack = ServerFrame::AskUserAck { correlation_id: id.clone(), outcome: o };
        prop_assert_eq!(encode_fast::ack(&id, o), encode(&ack));
        let gone = ServerFrame::AskUserWithdrawn { correlation_id: id.clone(), reason: w, node: None, answered_by: None };
        prop_assert_eq!(encode_fast::withdrawn(&id, w), encode(&gone));
    }

    #[test]
    fn producer_info_strings_round_trip(client in any::<Option<String>>(), pid in any::<Option<i32>>(), uid in any::<u32>()) {
        // The UI request's producer is written by serde inside the fast frame: it must read back.
        let p = ProducerInfo { client, pid, uid };
        let text = serde_json::to_string(&p).unwrap();
        prop_assert_eq!(serde_json::from_str::<ProducerInfo>(&text).unwrap(), p);
    }
}
