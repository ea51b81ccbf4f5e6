//! `elicitation/create` as an ask_user question set: a form's properties as questions (an
//! enum as a choice, a boolean as yes/no, anything else as text), a URL as one question with
//! the URL and "Done" or "Cancel", and the answers back as the elicitation's `content`, typed
//! per the form's schema.
//!
//! What ask_user cannot say: at most 4 questions (a bigger form is the editor's), and a choice
//! has 2 to 4 options (an enum of 1 or of more than 4 values is asked as text and the answer
//! must be one of the values). Numbers are asked as text and parsed. `minLength`,
//! `maxLength`, `pattern`, `format`, `minimum`, `maximum`, `minItems` and `maxItems` are not
//! checked (the agent checks them, as ACP says it should). An answer that does not fit its
//! property's type is left out of `content`, as an unanswered question is.

use serde_json::{json, Map, Value};

use askbus::protocol::{Outcome, ProducerResponse};

/// The most questions one ask_user request holds.
const MAX_QUESTIONS: usize = 4;
/// A question's header is a short tag; long titles are cut to this many characters.
const MAX_HEADER: usize = 30;

/// An elicitation as askbus asks it, and how its answers go back.
#[derive(Debug, Clone)]
pub struct Elicitation {
    /// The ask_user `questions` array.
    pub questions: Value,
    /// The elicitation's message, for the request's `context.title`.
    pub title: String,
    fields: Fields,
}

#[derive(Debug, Clone)]
enum Fields {
    /// A form: one field per question, in order.
    Form(Vec<Field>),
    /// A URL to open: question 0 is "Done" or "Cancel".
    Url,
}

/// How one answer becomes one property of `content`.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    kind: FieldKind,
}

#[derive(Debug, Clone)]
enum FieldKind {
    Text,
    Number {
        integer: bool,
    },
    Boolean,
    /// One of these values (label shown → value sent).
    OneOf(Vec<(String, String)>),
    /// Any of these values, as a string array.
    AnyOf(Vec<(String, String)>),
}

const DONE: &str = "Done";
const CANCEL: &str = "Cancel";

/// The question set for an `elicitation/create`'s params, or why askbus cannot ask it.
pub fn map(params: &Value) -> Result<Elicitation, String> {
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match params.get("mode").and_then(Value::as_str) {
        Some("form") => form(params, message),
        Some("url") => url(params, message),
        Some(other) => Err(format!("elicitation mode {other:?} is not one askbus asks")),
        None => Err("the elicitation has no mode".into()),
    }
}

fn url(params: &Value, message: String) -> Result<Elicitation, String> {
    let url = params
        .get("url")
        .and_then(Value::as_str)
        .ok_or("a URL elicitation without a url")?;
    let text = if message.trim().is_empty() {
        format!("Open this URL and finish there:\n{url}")
    } else {
        format!("{message}\n\nOpen this URL and finish there:\n{url}")
    };
    let questions = json!([{
        "question": text,
        "header": "Open URL",
        "type": "choice",
        "options": [
            {"label": DONE, "description": "I opened the URL and finished there"},
            {"label": CANCEL, "description": "Do not open it"},
        ],
    }]);
    Ok(Elicitation {
        questions,
        title: title_of(&message, url),
        fields: Fields::Url,
    })
}

fn form(params: &Value, message: String) -> Result<Elicitation, String> {
    let schema = params
        .get("requestedSchema")
        .and_then(Value::as_object)
        .ok_or("a form elicitation without a requestedSchema object")?;
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if properties.is_empty() {
        return Err("the form has no properties".into());
    }
    if properties.len() > MAX_QUESTIONS {
        return Err(format!(
            "the form has {} properties; ask_user asks at most {MAX_QUESTIONS}",
            properties.len()
        ));
    }
    let mut questions = Vec::new();
    let mut fields = Vec::new();
    for (i, (name, prop)) in properties.iter().enumerate() {
        let label = prop
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(name);
        let mut text = prop
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .unwrap_or(label)
            .to_owned();
        if i == 0 && !message.trim().is_empty() {
            text = if text == label && properties.len() == 1 {
                message.clone()
            } else {
                format!("{message}\n\n{text}")
            };
        }
        let (question, kind) = property(name, prop, text, header(label))?;
        questions.push(question);
        fields.push(Field {
            name: name.clone(),
            kind,
        });
    }
    Ok(Elicitation {
        questions: Value::Array(questions),
        title: title_of(&message, "Form"),
        fields: Fields::Form(fields),
    })
}

/// One property as a question, and how its answer is read.
fn property(
    name: &str,
    prop: &Value,
    text: String,
    header: String,
) -> Result<(Value, FieldKind), String> {
    let ty = prop.get("type").and_then(Value::as_str);
    let text_question = |placeholder: Option<String>| {
        let mut q = json!({"question": text, "header": header, "type": "text"});
        if let Some(p) = placeholder.filter(|p| !p.is_empty()) {
            q["placeholder"] = p.into();
        }
        q
    };
    let choice = |values: &[(String, String)], multi: bool| {
        if (2..=4).contains(&values.len()) {
            let options: Vec<Value> = values
                .iter()
                .map(|(label, _)| json!({"label": label, "description": ""}))
                .collect();
            let mut q =
                json!({"question": text, "header": header, "type": "choice", "options": options});
            if multi {
                q["multiSelect"] = true.into();
            }
            q
        } else {
            let listed: Vec<&str> = values.iter().map(|(l, _)| l.as_str()).collect();
            let how = if multi {
                "any of, comma-separated"
            } else {
                "one of"
            };
            text_question(Some(format!("{how}: {}", listed.join(", "))))
        }
    };
    match ty {
        Some("string") => {
            if let Some(values) = enum_values(prop) {
                return Ok((choice(&values, false), FieldKind::OneOf(values)));
            }
            let placeholder = prop
                .get("default")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    prop.get("format")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
            Ok((text_question(placeholder), FieldKind::Text))
        }
        Some(t @ ("number" | "integer")) => {
            let integer = t == "integer";
            let placeholder = prop
                .get("default")
                .map(|d| d.to_string())
                .filter(|d| d != "null")
                .unwrap_or_else(|| if integer { "an integer" } else { "a number" }.into());
            Ok((
                text_question(Some(placeholder)),
                FieldKind::Number { integer },
            ))
        }
        Some("boolean") => Ok((
            json!({"question": text, "header": header, "type": "yesno"}),
            FieldKind::Boolean,
        )),
        Some("array") => {
            let values = prop
                .get("items")
                .and_then(enum_values)
                .ok_or_else(|| format!("property {name:?}: an array without enum items"))?;
            Ok((choice(&values, true), FieldKind::AnyOf(values)))
        }
        other => Err(format!(
            "property {name:?} has type {}, which ask_user cannot ask",
            other
                .map(|t| format!("{t:?}"))
                .unwrap_or_else(|| "none".into())
        )),
    }
}

/// An enum's (label, value) pairs: `oneOf`/`anyOf` of `{const, title}`, or `enum` (with the
/// legacy `enumNames` as labels).
fn enum_values(schema: &Value) -> Option<Vec<(String, String)>> {
    let titled = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array);
    if let Some(opts) = titled {
        return Some(
            opts.iter()
                .filter_map(|o| {
                    let value = o.get("const").and_then(Value::as_str)?;
                    let label = o.get("title").and_then(Value::as_str).unwrap_or(value);
                    Some((label.to_owned(), value.to_owned()))
                })
                .collect(),
        );
    }
    let values = schema.get("enum").and_then(Value::as_array)?;
    let names = schema.get("enumNames").and_then(Value::as_array);
    Some(
        values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let value = v.as_str()?;
                let label = names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .unwrap_or(value);
                Some((label.to_owned(), value.to_owned()))
            })
            .collect(),
    )
}

fn header(label: &str) -> String {
    let one: String = label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    if one.chars().count() > MAX_HEADER {
        let cut: String = one.chars().take(MAX_HEADER - 1).collect();
        format!("{cut}…")
    } else {
        one.to_owned()
    }
}

fn title_of(message: &str, otherwise: &str) -> String {
    if message.trim().is_empty() {
        otherwise.to_owned()
    } else {
        message.to_owned()
    }
}

/// How askbus ended an elicitation, for the relay.
pub fn decision(r: &ProducerResponse, e: &Elicitation) -> super::Decision {
    use super::Decision;
    match r.reason {
        Outcome::Answered => Decision::Decided(e.accepted(&r.answers)),
        Outcome::Dismissed => Decision::Decided(json!({"action": "decline"})),
        Outcome::Timeout => Decision::Ended,
        Outcome::Withdrawn => Decision::Withdrawn,
        Outcome::NoUi => Decision::Unavailable("no askbus UI is connected".into()),
        Outcome::Shutdown => Decision::Unavailable("askbusd shut down".into()),
    }
}

impl Elicitation {
    /// The result for a person's answers: `accept` with the content typed per the schema (a
    /// URL: "Done" accepts, anything else cancels).
    fn accepted(&self, answers: &std::collections::BTreeMap<usize, String>) -> Value {
        let fields = match &self.fields {
            Fields::Url => {
                return match answers.get(&0).map(String::as_str) {
                    Some(DONE) => json!({"action": "accept"}),
                    _ => json!({"action": "cancel"}),
                }
            }
            Fields::Form(fields) => fields,
        };
        let mut content = Map::new();
        for (i, field) in fields.iter().enumerate() {
            let Some(answer) = answers.get(&i) else {
                continue;
            };
            if let Some(v) = field.kind.value(answer) {
                content.insert(field.name.clone(), v);
            }
        }
        json!({"action": "accept", "content": content})
    }

    /// The result when nobody decided (a timeout, no daemon with `--fallback deny`, a
    /// cancelled turn): `cancel`.
    pub fn denied(&self) -> Value {
        json!({"action": "cancel"})
    }
}

impl FieldKind {
    /// The answer as the property's type, or `None` when it does not fit.
    fn value(&self, answer: &str) -> Option<Value> {
        let answer = answer.trim();
        match self {
            FieldKind::Text => Some(answer.into()),
            FieldKind::Number { integer: true } => answer.parse::<i64>().ok().map(Value::from),
            FieldKind::Number { integer: false } => answer
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Value::from),
            FieldKind::Boolean => match answer {
                "Yes" => Some(true.into()),
                "No" => Some(false.into()),
                _ => None,
            },
            FieldKind::OneOf(values) => find(values, answer).map(Value::from),
            FieldKind::AnyOf(values) => {
                // ask_user joins a multiSelect's labels with ", "; a free-text list uses ",".
                let picked: Option<Vec<Value>> = split_labels(values, answer)
                    .into_iter()
                    .map(|l| find(values, &l).map(Value::from))
                    .collect();
                picked.map(Value::Array)
            }
        }
    }
}

/// The value of the option whose label (or value) is `answer`.
fn find(values: &[(String, String)], answer: &str) -> Option<String> {
    values
        .iter()
        .find(|(label, value)| label == answer || value == answer)
        .map(|(_, value)| value.clone())
}

/// A multiSelect answer's labels: labels themselves may hold ", ", so known labels are taken
/// greedily from the front before falling back to splitting on commas.
fn split_labels(values: &[(String, String)], answer: &str) -> Vec<String> {
    let mut rest = answer.trim();
    let mut out = Vec::new();
    while !rest.is_empty() {
        let known = values
            .iter()
            .flat_map(|(l, v)| [l.as_str(), v.as_str()])
            .filter(|l| {
                rest.starts_with(*l) && {
                    let after = rest[l.len()..].trim_start();
                    after.is_empty() || after.starts_with(',')
                }
            })
            .max_by_key(|l| l.len());
        let (word, after) = match known {
            Some(l) => (l.to_owned(), &rest[l.len()..]),
            None => match rest.split_once(',') {
                Some((w, a)) => (w.trim().to_owned(), a),
                None => (rest.to_owned(), ""),
            },
        };
        if !word.is_empty() {
            out.push(word);
        }
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn answers(pairs: &[(usize, &str)]) -> BTreeMap<usize, String> {
        pairs.iter().map(|(i, s)| (*i, s.to_string())).collect()
    }

    fn form_params() -> Value {
        json!({"sessionId": "s", "mode": "form", "message": "How should I refactor?",
            "requestedSchema": {"type": "object", "properties": {
                "strategy": {"type": "string", "title": "Strategy",
                    "oneOf": [{"const": "c", "title": "Conservative"}, {"const": "b", "title": "Balanced"},
                              {"const": "a", "title": "Aggressive"}]},
                "tests": {"type": "boolean", "title": "Run tests", "description": "Run the tests after?"},
                "note": {"type": "string", "description": "Anything else?", "default": "none"},
                "passes": {"type": "integer", "title": "Passes"}},
                "required": ["strategy"]}})
    }

    #[test]
    fn a_form_is_a_question_set() {
        let e = map(&form_params()).unwrap();
        let q = e.questions.as_array().unwrap();
        assert_eq!(q.len(), 4);
        assert_eq!(q[0]["type"], "choice");
        assert_eq!(q[0]["header"], "Strategy");
        assert_eq!(q[0]["question"], "How should I refactor?\n\nStrategy");
        assert_eq!(
            q[0]["options"][1],
            json!({"label": "Balanced", "description": ""})
        );
        assert_eq!(
            q[1],
            json!({"question": "Run the tests after?", "header": "Run tests", "type": "yesno"})
        );
        assert_eq!(q[2]["type"], "text");
        assert_eq!(q[2]["placeholder"], "none");
        assert_eq!(q[3]["placeholder"], "an integer");
        // The questions pass the daemon's own validation.
        askbus::questions::validate(&json!({"questions": e.questions})).unwrap();
        assert_eq!(e.title, "How should I refactor?");
    }

    #[test]
    fn answers_come_back_typed_per_the_schema() {
        let e = map(&form_params()).unwrap();
        let r = e.accepted(&answers(&[
            (0, "Balanced"),
            (1, "No"),
            (2, "keep it short"),
            (3, "3"),
        ]));
        assert_eq!(
            r,
            json!({"action": "accept", "content": {"strategy": "b", "tests": false, "note": "keep it short", "passes": 3}})
        );
        // What does not fit its type is left out, as an unanswered question is.
        let r = e.accepted(&answers(&[(0, "Something else"), (3, "three")]));
        assert_eq!(r, json!({"action": "accept", "content": {}}));
    }

    #[test]
    fn multi_select_and_long_enums() {
        let params = json!({"sessionId": "s", "mode": "form", "message": "",
            "requestedSchema": {"type": "object", "properties": {
                "langs": {"type": "array", "items": {"type": "string", "enum": ["Rust", "Go, the language", "C"]}},
                "color": {"type": "string", "enum": ["r", "g", "b", "c", "m"]}}}});
        let e = map(&params).unwrap();
        assert_eq!(e.questions[0]["multiSelect"], true);
        assert_eq!(e.questions[1]["type"], "text");
        assert_eq!(e.questions[1]["placeholder"], "one of: r, g, b, c, m");
        askbus::questions::validate(&json!({"questions": e.questions})).unwrap();
        let r = e.accepted(&answers(&[(0, "Rust, Go, the language"), (1, "m")]));
        assert_eq!(
            r["content"],
            json!({"langs": ["Rust", "Go, the language"], "color": "m"})
        );
        let r = e.accepted(&answers(&[(0, "Rust, Python")]));
        assert_eq!(
            r["content"],
            json!({}),
            "a value not in the enum is not sent"
        );
    }

    #[test]
    fn a_url_is_done_or_cancel() {
        let params = json!({"sessionId": "s", "mode": "url", "elicitationId": "e1",
            "url": "https://example.com/auth", "message": "Authorize the repo."});
        let e = map(&params).unwrap();
        assert!(e.questions[0]["question"]
            .as_str()
            .unwrap()
            .contains("https://example.com/auth"));
        askbus::questions::validate(&json!({"questions": e.questions})).unwrap();
        assert_eq!(
            e.accepted(&answers(&[(0, "Done")])),
            json!({"action": "accept"})
        );
        assert_eq!(
            e.accepted(&answers(&[(0, "Cancel")])),
            json!({"action": "cancel"})
        );
        assert_eq!(e.accepted(&answers(&[])), json!({"action": "cancel"}));
    }

    #[test]
    fn what_ask_user_cannot_ask_is_refused() {
        let five: Map<String, Value> = (0..5)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        let big = json!({"mode": "form", "message": "m", "requestedSchema": {"properties": five}});
        assert!(map(&big).unwrap_err().contains("at most 4"));
        assert!(map(&json!({"mode": "_custom"})).is_err());
        let obj =
            json!({"mode": "form", "requestedSchema": {"properties": {"x": {"type": "object"}}}});
        assert!(map(&obj).is_err());
    }
}
