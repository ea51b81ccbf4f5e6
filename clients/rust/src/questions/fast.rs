//! The fast path of validation and normalization, an optimisation of `super::reference`:
//! one pass of serde over the `questions` text straight to the normalized JSON UIs receive,
//! for questions of the plain shape nearly every request has (only the schema's own keys, each
//! once, with the schema's types).
//!
//! Like the protocol's fast parser it only ever accepts: a questions array it cannot prove
//! valid (anything the schema or the value checks would reject, and anything unusual that they
//! would accept, such as extra keys, which normalization passes through) makes it give up, and
//! the reference decides and words the error. On what it accepts it writes the very bytes the
//! reference would (keys in their order, the same escaping); debug builds of the daemon assert
//! it (askbusd's `intake`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::{js_trim, unescape, Normalized, QuestionMeta, QuestionType};
use crate::protocol::parse::fast::Str;
use crate::protocol::{parse_fast, FastFrame, RequestHead};

/// The keys a plain question may have, in the order they came.
#[derive(Clone, Copy, PartialEq)]
enum Key {
    Question,
    Header,
    Type,
    Options,
    MultiSelect,
    Placeholder,
}

struct Opt<'a> {
    label: Cow<'a, str>,
    description: Cow<'a, str>,
    label_first: bool,
}

struct Question<'a> {
    order: Vec<Key>,
    question: Option<Cow<'a, str>>,
    header: Option<Cow<'a, str>>,
    qtype: Option<QuestionType>,
    type_text: Cow<'a, str>,
    options: Option<Vec<Opt<'a>>>,
    multi_select: Option<bool>,
    placeholder: Option<Cow<'a, str>>,
}

fn give_up<E: de::Error>() -> E {
    E::custom("not a plain question")
}

impl<'de> Deserialize<'de> for Opt<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Opt<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an option object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Opt<'de>, A::Error> {
                let (mut label, mut description, mut label_first) = (None, None, false);
                while let Some(Str(key)) = map.next_key::<Str>()? {
                    let slot = match &*key {
                        "label" => {
                            label_first = description.is_none();
                            &mut label
                        }
                        "description" => &mut description,
                        _ => return Err(give_up()),
                    };
                    if slot.is_some() {
                        return Err(give_up());
                    }
                    *slot = Some(map.next_value::<Str>()?.0);
                }
                match (label, description) {
                    (Some(label), Some(description)) => Ok(Opt {
                        label,
                        description,
                        label_first,
                    }),
                    _ => Err(give_up()),
                }
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for Question<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Question<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a question object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Question<'de>, A::Error> {
                let mut q = Question {
                    order: Vec::with_capacity(6),
                    question: None,
                    header: None,
                    qtype: None,
                    type_text: Cow::Borrowed(""),
                    options: None,
                    multi_select: None,
                    placeholder: None,
                };
                while let Some(Str(key)) = map.next_key::<Str>()? {
                    let key = match &*key {
                        "question" => Key::Question,
                        "header" => Key::Header,
                        "type" => Key::Type,
                        "options" => Key::Options,
                        "multiSelect" => Key::MultiSelect,
                        "placeholder" => Key::Placeholder,
                        _ => return Err(give_up()),
                    };
                    if q.order.contains(&key) {
                        return Err(give_up());
                    }
                    q.order.push(key);
                    match key {
                        Key::Question => q.question = Some(map.next_value::<Str>()?.0),
                        Key::Header => q.header = Some(map.next_value::<Str>()?.0),
                        Key::Placeholder => q.placeholder = Some(map.next_value::<Str>()?.0),
                        Key::MultiSelect => q.multi_select = Some(map.next_value()?),
                        Key::Options => q.options = Some(map.next_value()?),
                        Key::Type => {
                            let Str(text) = map.next_value::<Str>()?;
                            q.qtype = Some(QuestionType::parse(&text).ok_or_else(give_up)?);
                            q.type_text = text;
                        }
                    }
                }
                Ok(q)
            }
        }
        d.deserialize_map(V)
    }
}

/// At most four questions (the schema's `maxItems`), without a heap allocation for the list.
/// A `questions` array of plain questions, borrowing from the text it was read from.
pub struct Questions<'a>(Vec<Question<'a>>);

impl<'de> Deserialize<'de> for Questions<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Questions<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of 1 to 4 questions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Questions<'de>, A::Error> {
                let mut out = Vec::with_capacity(4);
                while let Some(q) = seq.next_element::<Question>()? {
                    if out.len() == 4 {
                        return Err(give_up());
                    }
                    out.push(q);
                }
                Ok(Questions(out))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Whether the reference's checks all pass: the schema's `required` and `minItems` (the
/// types were checked while reading) and `validateToolParamValues`.
fn is_valid(questions: &[Question]) -> bool {
    !questions.is_empty()
        && questions.iter().all(|q| {
            let complete = q.question.is_some() && q.header.is_some() && q.qtype.is_some();
            let choice_ok = q.qtype != Some(QuestionType::Choice)
                || q.options
                    .as_ref()
                    .is_some_and(|o| (2..=4).contains(&o.len()));
            let labels_ok = q
                .options
                .iter()
                .flatten()
                .all(|o| !js_trim(&o.label).is_empty());
            complete && choice_ok && labels_ok
        })
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    crate::protocol::json::write_str(out, s);
}

fn push_key(out: &mut Vec<u8>, first: &mut bool, key: &str) {
    if !std::mem::take(first) {
        out.push(b',');
    }
    push_str(out, key);
    out.push(b':');
}

/// `unescape` where it changes something; JS truthiness leaves `""` alone either way.
fn normalized(s: &str) -> Cow<'_, str> {
    if s.contains('\\') {
        Cow::Owned(unescape(s))
    } else {
        Cow::Borrowed(s)
    }
}

fn write_option(out: &mut Vec<u8>, o: &Opt) {
    let description = js_trim(&o.description);
    let label = ("label", normalized(&o.label));
    let description = ("description", normalized(description));
    let (a, b) = if o.label_first {
        (label, description)
    } else {
        (description, label)
    };
    out.push(b'{');
    let mut first = true;
    for (key, value) in [a, b] {
        push_key(out, &mut first, key);
        push_str(out, &value);
    }
    out.push(b'}');
}

fn write_question(out: &mut Vec<u8>, q: &Question) {
    out.push(b'{');
    let mut first = true;
    for &key in &q.order {
        match key {
            Key::Question => {
                push_key(out, &mut first, "question");
                push_str(out, &normalized(q.question.as_deref().unwrap_or_default()));
            }
            Key::Header => {
                push_key(out, &mut first, "header");
                push_str(out, &normalized(q.header.as_deref().unwrap_or_default()));
            }
            Key::Placeholder => {
                push_key(out, &mut first, "placeholder");
                push_str(
                    out,
                    &normalized(q.placeholder.as_deref().unwrap_or_default()),
                );
            }
            Key::Type => {
                push_key(out, &mut first, "type");
                push_str(out, &q.type_text);
            }
            Key::MultiSelect => {
                push_key(out, &mut first, "multiSelect");
                let b = q.multi_select.unwrap_or_default();
                out.extend_from_slice(if b { b"true" } else { b"false" });
            }
            Key::Options => {
                push_key(out, &mut first, "options");
                out.push(b'[');
                for (i, o) in q.options.iter().flatten().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_option(out, o);
                }
                out.push(b']');
            }
        }
    }
    out.push(b'}');
}

/// The normalized questions and their facts, if `text` (a `questions` value) is a plain,
/// valid questions array (then exactly what [`super::normalize`] gives); `None` leaves it to
/// the reference.
pub fn normalize(text: &str) -> Option<Normalized> {
    check(serde_json::from_str(text).ok()?, text.len())
}

/// The whole fast path for one frame: `Some` for an `ask-user-request` with plain, valid
/// questions (what `parse_inbound` and [`super::check`] make of it), `None` for anything else.
pub fn check_request(payload: &[u8]) -> Option<(RequestHead, Normalized)> {
    match parse_fast::<Questions>(payload)? {
        FastFrame::Request(head, questions) => Some((head, check(questions, payload.len())?)),
        FastFrame::Approval(..) | FastFrame::Other(_) => None,
    }
}

/// The normalized questions and their facts, if `questions` (read by [`parse_fast`] from a
/// payload of about `text_len` bytes) are valid; `None` leaves them to the reference.
pub fn check(Questions(questions): Questions, text_len: usize) -> Option<Normalized> {
    if !is_valid(&questions) {
        return None;
    }
    let mut out = Vec::with_capacity(text_len + 16);
    out.push(b'[');
    for (i, q) in questions.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_question(&mut out, q);
    }
    out.push(b']');
    let json = String::from_utf8(out).expect("serde_json writes UTF-8");
    let meta = questions
        .iter()
        .map(|q| QuestionMeta {
            header: q.header.as_deref().map(|h| normalized(h).into_owned()),
            qtype: q.qtype.unwrap_or(QuestionType::Choice),
        })
        .collect();
    Some(Normalized {
        questions: json.into_boxed_str(),
        meta,
    })
}
