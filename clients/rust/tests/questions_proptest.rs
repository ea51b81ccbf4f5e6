//! Robustness of `validate` on whatever a model might send: it must never panic, and what it
//! accepts must be something the broker can re-validate and build results from.

use std::collections::BTreeMap;

use askbus::protocol::RequestQuestions;
#[cfg(feature = "fast")]
use askbus::questions::fast::normalize as normalize_plain;
use askbus::questions::{
    answered_result, check, dismissed_result, js_trim, meta, normalize, validate,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Strings biased towards what the reference treats specially: escape sequences it
/// unescapes, whitespace JS trims (and some it does not), astral characters.
fn arb_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\\n".to_owned()),
        Just("\\r\\n".to_owned()),
        Just("\\".to_owned()),
        Just("n".to_owned()),
        Just("r".to_owned()),
        Just("\n".to_owned()),
        Just(" ".to_owned()),
        Just("\u{a0}".to_owned()),
        Just("\u{feff}".to_owned()),
        Just("\u{85}".to_owned()),
        Just("\u{2028}".to_owned()),
        Just("😀".to_owned()),
        Just("choice".to_owned()),
        "[a-zA-Z0-9]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        arb_string().prop_map(Value::String),
        prop_oneof![Just("choice"), Just("text"), Just("yesno")]
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        let key = prop_oneof![
            Just("questions".to_owned()),
            Just("question".to_owned()),
            Just("header".to_owned()),
            Just("type".to_owned()),
            Just("options".to_owned()),
            Just("label".to_owned()),
            Just("description".to_owned()),
            Just("multiSelect".to_owned()),
            Just("placeholder".to_owned()),
            "[a-z]{1,4}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A field that is usually well-typed but sometimes missing or any JSON at all; rarely
/// enough that a fair share of whole parameter sets get through to the accepted path.
fn field(valid: BoxedStrategy<Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        40 => valid.prop_map(Some),
        1 => Just(None),
        1 => arb_json().prop_map(Some),
    ]
}

/// Labels mostly non-blank, but sometimes only escapes and whitespace, which is where the
/// reference's check-then-unescape order matters.
fn arb_label() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ("[a-z]{1,3}", arb_string()).prop_map(|(a, b)| a + &b),
        1 => arb_string(),
        1 => prop::collection::vec(
            prop_oneof![Just("\\n"), Just("\\r\\n"), Just(" "), Just("\u{a0}")],
            1..4,
        )
        .prop_map(|v| v.concat()),
    ]
}

fn object(fields: Vec<(&'static str, Option<Value>)>, extra: Map<String, Value>) -> Value {
    let mut m = extra;
    for (k, v) in fields {
        if let Some(v) = v {
            m.insert(k.to_owned(), v);
        }
    }
    Value::Object(m)
}

fn arb_extra() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(("x[a-z]{0,3}", arb_json()), 0..2).prop_map(|kv| kv.into_iter().collect())
}

fn arb_option() -> impl Strategy<Value = Value> {
    let s = || arb_string().prop_map(Value::String).boxed();
    (
        field(arb_label().prop_map(Value::String).boxed()),
        field(s()),
        arb_extra(),
    )
        .prop_map(|(l, d, x)| object(vec![("label", l), ("description", d)], x))
}

fn arb_question() -> impl Strategy<Value = Value> {
    let s = || arb_string().prop_map(Value::String).boxed();
    let qtype = prop_oneof![Just("choice"), Just("text"), Just("yesno")]
        .prop_map(|t| Value::String(t.into()))
        .boxed();
    let options = prop::collection::vec(prop_oneof![30 => arb_option(), 1 => arb_json()], 0..6)
        .prop_map(Value::Array)
        .boxed();
    (
        field(s()),
        field(s()),
        field(qtype),
        field(options),
        field(any::<bool>().prop_map(Value::Bool).boxed()),
        field(s()),
        arb_extra(),
    )
        .prop_map(|(q, h, t, o, m, p, x)| {
            object(
                vec![
                    ("question", q),
                    ("header", h),
                    ("type", t),
                    ("options", o),
                    ("multiSelect", m),
                    ("placeholder", p),
                ],
                x,
            )
        })
}

fn arb_params() -> impl Strategy<Value = Value> {
    let question = || prop_oneof![30 => arb_question(), 1 => arb_json()];
    // Mostly within the schema's 1..=4, so the later checks get exercised too.
    let questions = prop_oneof![
        6 => prop::collection::vec(question(), 1..=4),
        1 => prop::collection::vec(question(), 0..7),
    ]
    .prop_map(Value::Array)
    .boxed();
    (field(questions), arb_extra()).prop_map(|(q, x)| object(vec![("questions", q)], x))
}

/// The one way the reference rejects its own output: a label that was non-blank only
/// because of a literal `\n` escape is blank once unescaped.
fn first_blank_label(normalized: &[Value]) -> Option<(usize, usize)> {
    normalized.iter().enumerate().find_map(|(i, q)| {
        q["options"].as_array().and_then(|opts| {
            opts.iter()
                .position(|o| js_trim(o["label"].as_str().unwrap_or("")).is_empty())
                .map(|j| (i, j))
        })
    })
}

fn check_accepted(params: &Value) -> Result<(), TestCaseError> {
    let Ok(out) = validate(params) else {
        return Ok(());
    };
    prop_assert_eq!(
        Some(out.len()),
        params["questions"].as_array().map(Vec::len)
    );
    match (
        validate(&json!({ "questions": out })),
        first_blank_label(&out),
    ) {
        (Ok(_), None) => {}
        (Err(e), Some((i, j))) => prop_assert_eq!(
            e,
            format!(
                "Question {}, option {}: 'label' is required and must be a non-empty string.",
                i + 1,
                j + 1
            )
        ),
        (again, blank) => {
            return Err(TestCaseError::fail(format!(
                "re-validating {out:?}: {again:?}, blank label at {blank:?}"
            )))
        }
    }
    let m = meta(&out);
    let answers: BTreeMap<usize, String> = (0..out.len() + 1)
        .map(|i| (i, format!("a{i}\nb😀")))
        .collect();
    answered_result(&m, &answers);
    dismissed_result(&m);
    Ok(())
}

/// Wherever the daemon's one-pass path (the `fast` feature) accepts, it gives the tree's
/// questions and facts.
#[cfg(feature = "fast")]
fn plain_agrees(
    text: &str,
    tree: &Result<askbus::questions::Normalized, String>,
) -> Result<(), TestCaseError> {
    if let Some(plain) = normalize_plain(text) {
        let Ok(tree) = tree else {
            return Err(TestCaseError::fail(format!(
                "fast path accepted {text}: {tree:?}"
            )));
        };
        prop_assert_eq!(&plain.questions, &tree.questions);
        prop_assert_eq!(&plain.meta, &tree.meta);
    }
    Ok(())
}

/// Without the `fast` feature (the crate as a dependency builds it) there is no second path.
#[cfg(not(feature = "fast"))]
fn plain_agrees(
    _text: &str,
    _tree: &Result<askbus::questions::Normalized, String>,
) -> Result<(), TestCaseError> {
    Ok(())
}

/// Wherever the fast path accepts, it gives the reference's bytes and facts; and
/// `check` (fast, else the reference) always agrees with the reference.
fn fast_agrees(params: &Value) -> Result<(), TestCaseError> {
    let Some(questions) = params.get("questions") else {
        return Ok(());
    };
    let text = questions.to_string();
    // The daemon's two paths read the same text (a float read back from `text` may differ in
    // its last bit from the generated one), so the tree path here reads it too.
    let reread: Value = serde_json::from_str(&text).unwrap();
    let tree = normalize(&json!({ "questions": reread }));
    plain_agrees(&text, &tree)?;
    let raw = serde_json::value::RawValue::from_string(text).unwrap();
    match (check(RequestQuestions::Raw(raw)), tree) {
        (Ok(a), Ok(b)) => prop_assert_eq!(&a.questions, &b.questions),
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => return Err(TestCaseError::fail(format!("check {a:?}, tree {b:?}"))),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn one_pass_fast_agrees_with_tree(params in arb_params()) {
        fast_agrees(&params)?;
    }

    #[test]
    fn structured_params_never_panic(params in arb_params()) {
        check_accepted(&params)?;
    }

    #[test]
    fn arbitrary_params_never_panic(params in arb_json()) {
        check_accepted(&params)?;
    }

    #[test]
    fn arbitrary_questions_never_panic(questions in prop::collection::vec(arb_json(), 0..6)) {
        check_accepted(&json!({ "questions": questions }))?;
    }
}
