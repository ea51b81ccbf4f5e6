//! The reference's JSON Schema stage: Ajv 8 (draft-07, `strictSchema: false`, otherwise
//! default options) over `ASK_USER_DEFINITION`'s parameter schema, reporting only the first
//! error (`allErrors` is off) with `params` as the root of the data path.
//!
//! Rather than a general validator, this interprets just the keywords that schema uses, in
//! the order Ajv's generated code checks them: for a schema whose type has type-specific
//! keywords (`required`/`properties` for objects, `minItems`/`maxItems`/`items` for arrays)
//! the type check wraps that group, which runs `maxItems`, `minItems`, `required` (the
//! validation vocabulary) before `items`, `properties` (the applicator vocabulary); for a
//! plain string the type check runs first and `enum` after it.

use serde_json::Value;

enum Schema {
    Object {
        required: &'static [&'static str],
        properties: &'static [(&'static str, Schema)],
    },
    Array {
        min_items: Option<usize>,
        max_items: Option<usize>,
        items: &'static Schema,
    },
    String {
        allowed: Option<&'static [&'static str]>,
    },
    Boolean,
}

const STRING: Schema = Schema::String { allowed: None };

const OPTION: Schema = Schema::Object {
    required: &["label", "description"],
    properties: &[("label", STRING), ("description", STRING)],
};

const QUESTION: Schema = Schema::Object {
    required: &["question", "header", "type"],
    properties: &[
        ("question", STRING),
        ("header", STRING),
        // The schema also declares `default: "choice"`, but Ajv runs without `useDefaults`,
        // so it never fills anything in: a missing `type` is a `required` error.
        (
            "type",
            Schema::String {
                allowed: Some(&["choice", "text", "yesno"]),
            },
        ),
        (
            "options",
            Schema::Array {
                min_items: None,
                max_items: None,
                items: &OPTION,
            },
        ),
        ("multiSelect", Schema::Boolean),
        ("placeholder", STRING),
    ],
};

const PARAMS: Schema = Schema::Object {
    required: &["questions"],
    properties: &[(
        "questions",
        Schema::Array {
            min_items: Some(1),
            max_items: Some(4),
            items: &QUESTION,
        },
    )],
};

/// Runs the schema stage and hands back the `questions` array it guarantees.
pub(super) fn check(params: &Value) -> Result<&[Value], String> {
    // SchemaValidator.validate rejects non-objects itself before Ajv sees them; an array is
    // `typeof "object"` in JS, so it gets through to Ajv and fails there instead.
    match params {
        Value::Object(_) | Value::Array(_) => {}
        _ => return Err("Value of params must be an object".to_owned()),
    }
    let mut path = String::from("params");
    check_value(&PARAMS, params, &mut path)?;
    Ok(params["questions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default())
}

fn fail(path: &str, message: &str) -> Result<(), String> {
    Err(format!("{path} {message}"))
}

fn check_value(schema: &Schema, data: &Value, path: &mut String) -> Result<(), String> {
    match schema {
        Schema::Object {
            required,
            properties,
        } => {
            let Some(obj) = data.as_object() else {
                return fail(path, "must be object");
            };
            // A JSON null is a present value to Ajv (`data.x !== undefined`), so only a
            // missing key counts as missing.
            if let Some(missing) = required.iter().find(|k| !obj.contains_key(**k)) {
                return fail(path, &format!("must have required property '{missing}'"));
            }
            for (key, sub) in properties.iter() {
                if let Some(v) = obj.get(*key) {
                    with_segment(path, key, |p| check_value(sub, v, p))?;
                }
            }
            Ok(())
        }
        Schema::Array {
            min_items,
            max_items,
            items,
        } => {
            let Some(arr) = data.as_array() else {
                return fail(path, "must be array");
            };
            if let Some(max) = max_items.filter(|&m| arr.len() > m) {
                return fail(path, &format!("must NOT have more than {max} items"));
            }
            if let Some(min) = min_items.filter(|&m| arr.len() < m) {
                return fail(path, &format!("must NOT have fewer than {min} items"));
            }
            for (i, v) in arr.iter().enumerate() {
                with_segment(path, &i.to_string(), |p| check_value(items, v, p))?;
            }
            Ok(())
        }
        Schema::String { allowed } => {
            let Some(s) = data.as_str() else {
                return fail(path, "must be string");
            };
            match allowed {
                Some(list) if !list.contains(&s) => {
                    fail(path, "must be equal to one of the allowed values")
                }
                _ => Ok(()),
            }
        }
        Schema::Boolean => {
            if data.is_boolean() {
                Ok(())
            } else {
                fail(path, "must be boolean")
            }
        }
    }
}

/// Ajv's instancePath is a JSON Pointer; the segments here are fixed property names and
/// array indices, none of which need `~` escaping.
fn with_segment<T>(path: &mut String, seg: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = path.len();
    path.push('/');
    path.push_str(seg);
    let r = f(path);
    path.truncate(len);
    r
}
