//! Plain-language help for the reference's validation messages. askbusd sends the messages
//! byte-identical to Gemini CLI (a mix of 0-based JSON paths and 1-based "Question N"); the
//! CLI prints them as they are, then one line from here that says what is allowed, numbering
//! questions from 0 as the answers' keys and `askbus answer --answer 0=…` do.

const TYPES: &str = r#""type" must be one of "choice", "text", "yesno""#;
const OPTIONS: &str = r#"a "choice" needs "options": 2 to 4 of {"label": "…", "description": "…"} (the UI adds "Other"; a "yesno" takes none)"#;
const OPTION: &str =
    r#"each option is {"label": "non-empty text", "description": "text, may be empty"}"#;
const FIELDS: &str = r#"every question needs "question" (its text), "header" (a short label) and "type" ("choice", "text" or "yesno")"#;
const QUESTIONS: &str = r#""questions" is an array of 1 to 4 questions; the file holds {"questions": [...]} or the array itself"#;

/// The explaining line for a validation `message`, if it is one this knows.
pub fn rejection(message: &str) -> Option<String> {
    let (place, rest) = locate(message);
    let what = if rest.contains("must be equal to one of the allowed values") {
        TYPES.to_owned()
    } else if rest.contains("'options' array") || rest.starts_with("/options must") {
        OPTIONS.to_owned()
    } else if rest.contains("'label'")
        || rest.contains("'description'")
        || rest.starts_with("/label")
        || rest.starts_with("/description")
        || (place.as_deref().is_some_and(|p| p.contains("option")) && rest.contains("object"))
    {
        OPTION.to_owned()
    } else if rest.contains("required property 'questions'") || place.is_none() {
        if !message.starts_with("params") {
            return None;
        }
        QUESTIONS.to_owned()
    } else if rest.contains("required property") {
        FIELDS.to_owned()
    } else if rest.starts_with("/multiSelect") {
        r#""multiSelect" is true or false (for a "choice")"#.to_owned()
    } else if let Some(field) = rest
        .strip_prefix('/')
        .and_then(|r| r.strip_suffix(" must be string"))
    {
        format!(r#""{field}" must be a string"#)
    } else if rest.contains("must be object") {
        r#"each question is an object: {"question": …, "header": …, "type": …}"#.to_owned()
    } else {
        return None;
    };
    Some(match place {
        Some(p) => format!("askbus: {p}: {what}."),
        None => format!("askbus: {what}."),
    })
}

/// "question 0 (the first)[, option 1 (the second)]" and the rest of the message, from
/// either numbering the reference uses.
fn locate(message: &str) -> (Option<String>, &str) {
    if let Some(rest) = message.strip_prefix("params/questions/") {
        let (q, rest) = number(rest);
        let Some(q) = q else {
            return (None, rest);
        };
        if let Some(r) = rest.strip_prefix("/options/") {
            let (o, r) = number(r);
            if let Some(o) = o {
                return (
                    Some(format!("{}, {}", name("question", q), name("option", o))),
                    r,
                );
            }
        }
        return (Some(name("question", q)), rest);
    }
    if let Some(rest) = message.strip_prefix("Question ") {
        let (q, rest) = number(rest);
        if let Some(q) = q.and_then(|q| q.checked_sub(1)) {
            if let Some(r) = rest.strip_prefix(", option ") {
                let (o, r) = number(r);
                if let Some(o) = o.and_then(|o| o.checked_sub(1)) {
                    return (
                        Some(format!("{}, {}", name("question", q), name("option", o))),
                        r,
                    );
                }
            }
            return (Some(name("question", q)), rest);
        }
    }
    (None, message)
}

fn number(s: &str) -> (Option<usize>, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (s[..end].parse().ok(), &s[end..])
}

/// "question 0 (the first)": the 0-based index of the wire, and its ordinal for people.
pub fn name(what: &str, i: usize) -> String {
    const ORD: [&str; 8] = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
    ];
    match ORD.get(i) {
        Some(o) => format!("{what} {i} (the {o})"),
        None => format!("{what} {i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_reference_message_is_explained() {
        let cases: Vec<serde_json::Value> = serde_json::from_str(include_str!(
            "../../clients/rust/tests/data/ask_user_reference_cases.json"
        ))
        .unwrap();
        for case in cases.iter().filter(|c| c["ok"] == false) {
            let msg = case["error"].as_str().unwrap();
            assert!(rejection(msg).is_some(), "no explanation for {msg:?}");
        }
    }

    #[test]
    fn both_numberings_become_the_wire_index() {
        assert_eq!(
            rejection("params/questions/0/type must be equal to one of the allowed values")
                .unwrap(),
            r#"askbus: question 0 (the first): "type" must be one of "choice", "text", "yesno"."#
        );
        let a = rejection("Question 2: type='choice' requires 'options' array with 2-4 items.")
            .unwrap();
        assert!(
            a.starts_with("askbus: question 1 (the second): a \"choice\" needs"),
            "{a}"
        );
        let b =
            rejection("Question 1, option 2: 'label' is required and must be a non-empty string.")
                .unwrap();
        assert!(
            b.starts_with("askbus: question 0 (the first), option 1 (the second): each option"),
            "{b}"
        );
        let c = rejection("params/questions/1/options/0/description must be string").unwrap();
        assert!(
            c.starts_with("askbus: question 1 (the second), option 0 (the first): each option"),
            "{c}"
        );
        assert!(
            rejection("params/questions must NOT have more than 4 items")
                .unwrap()
                .contains("1 to 4")
        );
        assert!(rejection("params/questions/3/header must be string")
            .unwrap()
            .contains(r#""header" must be a string"#));
        assert_eq!(rejection("correlationId must not be empty"), None);
    }
}
