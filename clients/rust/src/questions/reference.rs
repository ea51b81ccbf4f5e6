//! The reference validation and normalization of a request's questions: the reference tool's
//! `build(params)` (schema, then value checks) and `createInvocation` mapping, over
//! serde_json values. It decides every request and words every error; [`super::fast`] is an
//! optimisation of it for the plain shape.

use serde_json::{Map, Value};

use super::{js_trim, meta, schema, Normalized};

/// [`validate`], with the normalized questions serialized and their facts taken.
pub fn normalize(params: &Value) -> Result<Normalized, String> {
    let normalized = validate(params)?;
    Ok(Normalized {
        meta: meta(&normalized),
        questions: serde_json::to_string(&normalized)
            .expect("normalized questions serialize")
            .into_boxed_str(),
    })
}

/// Validates `params` (an object holding `questions`) as the reference's `build(params)` does
/// and returns the normalized `questions` array, or the reference's exact error message.
pub fn validate(params: &Value) -> Result<Vec<Value>, String> {
    let questions = schema::check(params)?;
    check_values(questions)?;
    Ok(questions.iter().map(normalize_question).collect())
}

/// The reference's `validateToolParamValues`, run only once the schema has passed, so the
/// shapes it relies on (objects, arrays, strings) are already guaranteed.
fn check_values(questions: &[Value]) -> Result<(), String> {
    for (i, q) in questions.iter().enumerate() {
        let n = i + 1;
        let options = q.get("options").and_then(Value::as_array);
        if q.get("type").and_then(Value::as_str) == Some("choice") {
            match options {
                Some(opts) if opts.len() >= 2 => {
                    if opts.len() > 4 {
                        return Err(format!(
                            "Question {n}: 'options' array must have at most 4 items."
                        ));
                    }
                }
                _ => {
                    return Err(format!(
                        "Question {n}: type='choice' requires 'options' array with 2-4 items."
                    ))
                }
            }
        }
        for (j, opt) in options.into_iter().flatten().enumerate() {
            let m = j + 1;
            let label_ok = opt
                .get("label")
                .and_then(Value::as_str)
                .is_some_and(|l| !js_trim(l).is_empty());
            if !label_ok {
                return Err(format!(
                    "Question {n}, option {m}: 'label' is required and must be a non-empty string."
                ));
            }
            // Unreachable behind the schema (which requires a string description), but kept
            // so this check stays the reference's even if the schema stage ever loosens.
            if !opt.get("description").is_some_and(Value::is_string) {
                return Err(format!(
                    "Question {n}, option {m}: 'description' is required and must be a string."
                ));
            }
        }
    }
    Ok(())
}

/// Models often double-escape newlines; the reference turns the literal two-character
/// escapes back into real newlines. Two passes, like its two chained `replace` calls.
pub(super) fn unescape(s: &str) -> String {
    s.replace("\\r\\n", "\n").replace("\\n", "\n")
}

/// The reference's `createInvocation` mapping of one question. Overwritten keys keep their
/// place and unknown keys pass through untouched.
fn normalize_question(q: &Value) -> Value {
    let Some(src) = q.as_object() else {
        return q.clone();
    };
    let mut out = src.clone();
    if let Some(Value::String(s)) = src.get("question") {
        out.insert("question".into(), Value::String(unescape(s)));
    }
    // JS truthiness: an empty string is left as it is.
    for key in ["header", "placeholder"] {
        if let Some(Value::String(s)) = src.get(key) {
            if !s.is_empty() {
                out.insert(key.into(), Value::String(unescape(s)));
            }
        }
    }
    if let Some(Value::Array(opts)) = src.get("options") {
        let normalized = opts.iter().map(normalize_option).collect();
        out.insert("options".into(), Value::Array(normalized));
    }
    Value::Object(out)
}

fn normalize_option(opt: &Value) -> Value {
    let mut out: Map<String, Value> = opt.as_object().cloned().unwrap_or_default();
    if let Some(Value::String(l)) = opt.get("label") {
        out.insert("label".into(), Value::String(unescape(l)));
    }
    let description = match opt.get("description") {
        Some(Value::String(d)) => {
            let t = js_trim(d);
            if t.is_empty() {
                String::new()
            } else {
                unescape(t)
            }
        }
        _ => String::new(),
    };
    out.insert("description".into(), Value::String(description));
    Value::Object(out)
}
