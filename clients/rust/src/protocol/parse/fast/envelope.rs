//! The envelope the fast parser reads a frame into: every field of the frames it takes,
//! borrowed from the payload where it can be, each read by serde with the reference's shape
//! (a field present must hold its type, never `null`), and readers of their own for
//! `answers`, `context` and their strings. An unknown key or anything unusual is a serde
//! error, which makes the fast parser give up.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::protocol::frames::{check_context_value, question_index, ApprovalMode, RequestContext};

/// The fields of the frames this parser takes. An unknown key, which the reference skips, makes
/// it give up: serde skips a value without checking it as the reference's `Value` does (a
/// number past an f64, nesting past the depth limit; found by fuzzing), and frames from the
/// clients carry none.
/// `Q` is what `questions` is read as: its text, or (for [`super::parse_fast`]) the caller's
/// own fast reading of it.
#[derive(Deserialize)]
#[serde(bound(deserialize = "Q: Deserialize<'de>"), deny_unknown_fields)]
pub(super) struct Envelope<'a, Q> {
    #[serde(rename = "type", borrow)]
    pub(super) ty: &'a str,
    #[serde(rename = "correlationId", borrow)]
    pub(super) correlation_id: Cow<'a, str>,
    #[serde(default, rename = "timeoutMs", deserialize_with = "present")]
    pub(super) timeout_ms: Option<u64>,
    #[serde(default, rename = "noUi", borrow, deserialize_with = "present")]
    pub(super) no_ui: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) context: Option<Context<'a>>,
    #[serde(default = "absent", deserialize_with = "present")]
    pub(super) questions: Option<Q>,
    #[serde(default, deserialize_with = "present")]
    pub(super) answers: Option<Answers>,
    #[serde(default, deserialize_with = "present")]
    pub(super) cancelled: Option<bool>,
    #[serde(default, rename = "toolCall", borrow, deserialize_with = "present")]
    pub(super) tool_call: Option<&'a RawValue>,
    #[serde(default, rename = "serverName", borrow, deserialize_with = "present")]
    pub(super) server_name: Option<&'a RawValue>,
    #[serde(
        default,
        rename = "toolAnnotations",
        borrow,
        deserialize_with = "present"
    )]
    pub(super) tool_annotations: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) subagent: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) details: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) outcomes: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    pub(super) confirmed: Option<bool>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) outcome: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) message: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) payload: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    pub(super) dismissed: Option<bool>,
}

/// A field that, when present, must hold a `T` (not `null`): serde's own `Option` would read
/// `null` as absent, where the reference reports it.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

fn absent<Q>() -> Option<Q> {
    None
}

/// `answers`: canonical question indices to strings. The last of duplicate keys wins, as in
/// the reference's map.
pub(super) struct Answers(pub(super) BTreeMap<usize, String>);

impl<'de> Deserialize<'de> for Answers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Answers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings keyed by question index")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answers, A::Error> {
                let mut answers = BTreeMap::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let index = question_index(&key)
                        .ok_or_else(|| de::Error::custom("not a question index"))?;
                    answers.insert(index, map.next_value::<String>()?);
                }
                Ok(Answers(answers))
            }
        }
        d.deserialize_map(V)
    }
}

/// A request's `context`: an object (never an array, which a derived struct would take) of
/// the known fields, each a string when present (a `null`, another type, a duplicate key, or
/// an unknown key, whose value serde would skip unchecked, makes the shortcut give up).
#[derive(Default)]
pub(super) struct Context<'a> {
    pub(super) agent: Option<Cow<'a, str>>,
    pub(super) session: Option<Cow<'a, str>>,
    pub(super) project: Option<Cow<'a, str>>,
    pub(super) cwd: Option<Cow<'a, str>>,
    pub(super) title: Option<Cow<'a, str>>,
    /// `approvalMode`, as sent (checked against the modes in [`Context::checked`]).
    pub(super) approval_mode: Option<Cow<'a, str>>,
    pub(super) interactive: Option<bool>,
}

impl<'de> Deserialize<'de> for Context<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Context<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a context object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Context<'de>, A::Error> {
                let mut c = Context::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "interactive" {
                        if c.interactive.is_some() {
                            return Err(de::Error::custom("duplicate context key"));
                        }
                        c.interactive = Some(map.next_value::<bool>()?);
                        continue;
                    }
                    let slot = match &*key {
                        "agent" => &mut c.agent,
                        "session" => &mut c.session,
                        "project" => &mut c.project,
                        "cwd" => &mut c.cwd,
                        "title" => &mut c.title,
                        "approvalMode" => &mut c.approval_mode,
                        _ => return Err(de::Error::custom("not a context key")),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom("duplicate context key"));
                    }
                    let Str(value) = map.next_value::<Str<'de>>()?;
                    *slot = Some(value);
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

/// A string, borrowed from the payload where it holds no escapes (also what `questions::fast`
/// reads its questions' strings as).
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl Context<'_> {
    /// The context the reference makes of it, if it accepts every value (with the same check).
    pub(super) fn checked(&self) -> Option<Option<RequestContext>> {
        let field = |name: &str, v: &Option<Cow<'_, str>>| match v {
            None => Some(None),
            Some(v) => check_context_value(name, v)
                .ok()
                .map(|()| Some(v.clone().into_owned())),
        };
        Some(
            RequestContext {
                agent: field("agent", &self.agent)?,
                session: field("session", &self.session)?,
                project: field("project", &self.project)?,
                cwd: field("cwd", &self.cwd)?,
                title: field("title", &self.title)?,
                approval_mode: match &self.approval_mode {
                    None => None,
                    Some(m) => Some(ApprovalMode::parse(m)?),
                },
                interactive: self.interactive,
            }
            .into_option(),
        )
    }
}
