//! ACP's wire: JSON-RPC 2.0 messages, one per line (newline-delimited JSON over the agent's
//! stdio). This file owns reading just enough of a line to route it (its `id`, `method` and
//! `params`, the rest skipped unread), the cheap prefilter that lets the agent's stream of
//! `session/update` notifications through unparsed, and the few lines the proxy writes
//! itself: its answer to the agent, `$/cancel_request` to the editor, a `-32800` error.

use std::borrow::Cow;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// `session/request_permission`: the agent asks the client to allow a tool call.
pub const REQUEST_PERMISSION: &str = "session/request_permission";
/// `elicitation/create`: the agent asks the user for structured input (a form or a URL).
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// `session/cancel`: the client cancels a session's prompt turn.
pub const SESSION_CANCEL: &str = "session/cancel";
/// `$/cancel_request`: either side cancels one of its own requests.
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// JSON-RPC error code for a cancelled request (ACP's "Request Cancelled").
pub const REQUEST_CANCELLED: i64 = -32800;

/// The routing part of a JSON-RPC message. A request has `method` and `id`, a notification
/// `method` only, a response `id` only (with `result` or `error`, which are skipped here).
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
}

impl<'a> Envelope<'a> {
    /// The envelope of one line, or `None` for anything that is not a JSON object (forwarded
    /// as it is: the proxy is not the one to judge the peers' JSON).
    pub fn parse(line: &'a [u8]) -> Option<Envelope<'a>> {
        serde_json::from_slice(trim_newline(line)).ok()
    }

    /// The id as the key a response is matched by: `None` for no id (absent or `null`),
    /// `Err` for one that is not a string or an integer (a float, an object, an array, a
    /// boolean), which the proxy never takes a request by.
    pub fn id(&self) -> Result<Option<IdKey>, String> {
        let Some(raw) = self.id else {
            return Ok(None);
        };
        let v: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        match v {
            Value::Null => Ok(None),
            v => IdKey::of_value(&v)
                .map(Some)
                .ok_or_else(|| raw.get().trim().to_owned()),
        }
    }

    /// The id, when it is a usable one.
    pub fn id_key(&self) -> Option<IdKey> {
        self.id().ok().flatten()
    }

    /// `params` read as a JSON value (only for the few messages the proxy acts on).
    pub fn params_value(&self) -> Value {
        self.params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null)
    }
}

/// A JSON-RPC id (a string or an integer) as its JSON text written one way (`"a"` however
/// the peer escaped it), so `3` and `"3"` stay apart as JSON-RPC keeps them and the editor's
/// answer matches the agent's request whatever either's encoder did.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdKey(Box<str>);

impl From<&str> for IdKey {
    fn from(s: &str) -> IdKey {
        IdKey(s.into())
    }
}

impl IdKey {
    /// The id from a value (`$/cancel_request`'s `requestId`): a string or an integer.
    pub fn of_value(v: &Value) -> Option<IdKey> {
        match v {
            Value::String(_) => Some(IdKey(v.to_string().into())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(IdKey(n.to_string().into())),
            _ => None,
        }
    }

    /// The JSON text, as the peer wrote it.
    pub fn json(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether a line from the agent may need more than forwarding: a request the proxy turns
/// into an askbus request, or the agent cancelling one (`cancels` when any is in flight).
/// A plain substring test, so the stream of `session/update`s is never parsed: every line
/// that is such a message holds these bytes (method names are written unescaped by every
/// JSON encoder; the `/` is left out of the needles because `\/` is a legal escape), unless
/// a name is spelled with `\u` escapes, and a line with any `\u` is looked at too.
pub fn agent_line_may_matter(line: &[u8], cancels: bool) -> bool {
    let f = finders();
    if cancels { &f.agent_cancels } else { &f.agent }.is_match(line)
}

/// Whether a line from the editor may need more than forwarding (when no request of the
/// agent is in flight): `initialize`, `session/new`, `…/load`, `…/resume`, `…/fork` (whose
/// answers or params the relay reads) and `session/cancel`, each caught by the end of its
/// name and its closing quote, or a `\u` escape that could spell one.
pub fn editor_line_may_matter(line: &[u8]) -> bool {
    finders().editor.is_match(line)
}

/// One searcher per set of needles: all of a set in one pass over the bytes (leftmost-first
/// is the match kind whose searcher is the vectorised Teddy, several times faster than a
/// `memmem` pass per needle; any match is as good as another here).
struct Finders {
    agent: AhoCorasick,
    agent_cancels: AhoCorasick,
    editor: AhoCorasick,
}

/// The needles, built once (a searcher is worth building once for a stream of lines).
fn finders() -> &'static Finders {
    static F: OnceLock<Finders> = OnceLock::new();
    F.get_or_init(|| {
        let build = |needles: &[&str]| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(needles)
                .expect("a few short needles always build")
        };
        Finders {
            agent: build(&["request_permission", "elicitation", "\\u"]),
            agent_cancels: build(&["request_permission", "elicitation", "\\u", "cancel_request"]),
            editor: build(&[
                "initialize\"",
                "new\"",
                "load\"",
                "resume\"",
                "fork\"",
                "cancel\"",
                "\\u",
            ]),
        }
    })
}

/// What is wrong with the editor's answer to a permission request, if anything: it must be
/// one JSON object with a `result` (and no `error`) whose `outcome` is `cancelled` without an
/// option, or `selected` with one of the `offered` optionIds; no key twice (a reader that took
/// the first of two could read another answer than the one checked). An `error` answer is
/// fine: it is never an approval.
pub fn permission_answer_fault(line: &[u8], offered: &[String]) -> Option<String> {
    #[derive(Deserialize)]
    struct Reply<'a> {
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
        #[serde(borrow, default)]
        error: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct PermissionResult {
        outcome: Selected,
    }
    #[derive(Deserialize)]
    struct Selected {
        outcome: String,
        #[serde(rename = "optionId", default)]
        option_id: Option<String>,
    }
    let reply: Reply = match serde_json::from_slice(trim_newline(line)) {
        Ok(r) => r,
        Err(e) => return Some(format!("not a JSON-RPC answer: {e}")),
    };
    let result = match (reply.result, reply.error) {
        (Some(_), Some(_)) => return Some("both a result and an error".into()),
        (None, Some(_)) => return None,
        (None, None) => return Some("neither a result nor an error".into()),
        (Some(r), None) => r,
    };
    let outcome = match serde_json::from_str::<PermissionResult>(result.get()) {
        Ok(r) => r.outcome,
        Err(e) => return Some(format!("not a permission outcome: {e}")),
    };
    match (outcome.outcome.as_str(), outcome.option_id) {
        ("cancelled", None) => None,
        ("cancelled", Some(id)) => Some(format!("cancelled, yet selecting option {id:?}")),
        ("selected", Some(id)) if offered.contains(&id) => None,
        ("selected", Some(id)) => Some(format!("option {id:?}, which the agent did not offer")),
        ("selected", None) => Some("selected, without an option".into()),
        (other, _) => Some(format!("the outcome {other:?}")),
    }
}

/// Whether a JSON parse failed on a key written twice.
pub fn is_duplicate_key(line: &[u8]) -> bool {
    match serde_json::from_slice::<Envelope>(trim_newline(line)) {
        Err(e) => e.to_string().starts_with("duplicate field"),
        Ok(_) => false,
    }
}

/// `line` without its line ending.
pub fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A response line: `{"jsonrpc":"2.0","id":ID,"result":RESULT}`.
pub fn result_line(id: &IdKey, result: &Value) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
        id.json(),
        result
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// An error response line: `{"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":…}}`,
/// with `id` as the peer wrote it (`null` when it has none).
pub fn error_line(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let error = json!({"code": code, "message": message});
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
        id.unwrap_or("null"),
        error
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// JSON-RPC's "Invalid Request".
pub const INVALID_REQUEST: i64 = -32600;

/// An error response line with ACP's "Request Cancelled" code.
pub fn cancelled_error_line(id: &IdKey) -> Vec<u8> {
    let error = json!({"code": REQUEST_CANCELLED, "message": "Request cancelled"});
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
        id.json(),
        error
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// `$/cancel_request` for `id`, to the side that was sent the request.
pub fn cancel_request_line(id: &IdKey) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","method":"{CANCEL_REQUEST}","params":{{"requestId":{}}}}}"#,
        id.json()
    )
    .into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_of_requests_notifications_and_responses() {
        let req = br#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s"}}
"#;
        let e = Envelope::parse(req).unwrap();
        assert_eq!(e.method.as_deref(), Some(REQUEST_PERMISSION));
        assert_eq!(e.id_key(), Some(IdKey::from("7")));
        assert_eq!(e.params_value()["sessionId"], "s");
        let resp = br#"{"jsonrpc":"2.0","id":"a\"b","result":{"big":[1,2,{"x":"y"}]}}"#;
        let e = Envelope::parse(resp).unwrap();
        assert!(e.method.is_none());
        assert_eq!(e.id_key().unwrap().json(), r#""a\"b""#);
        let note = br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#;
        assert!(Envelope::parse(note).unwrap().id_key().is_none());
        assert!(Envelope::parse(b"not json\n").is_none());
        assert!(Envelope::parse(b"[1,2]").is_none());
    }

    #[test]
    fn ids_match_whatever_the_escapes_and_odd_ids_are_refused() {
        let a = Envelope::parse(br#"{"id":"\u0061","method":"m"}"#).unwrap();
        let b = Envelope::parse(br#"{"id":"a","result":{}}"#).unwrap();
        assert_eq!(a.id_key(), b.id_key());
        assert_eq!(a.id_key().unwrap().json(), r#""a""#);
        for odd in [r#"1.5"#, r#"{"x":1}"#, r#"[1]"#, "true", "1e3"] {
            let line = format!(r#"{{"id":{odd},"method":"m"}}"#);
            let e = Envelope::parse(line.as_bytes()).unwrap();
            assert!(e.id().is_err(), "{odd}");
        }
        let e = Envelope::parse(br#"{"id":null,"method":"m"}"#).unwrap();
        assert_eq!(e.id(), Ok(None));
    }

    #[test]
    fn editor_answers_are_checked_against_the_offered_options() {
        let offered = vec!["proceed_once".to_owned(), "cancel".to_owned()];
        let ok = |r: &str| permission_answer_fault(r.as_bytes(), &offered);
        assert_eq!(
            ok(r#"{"id":1,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}"#),
            None
        );
        assert_eq!(
            ok(r#"{"id":1,"result":{"outcome":{"outcome":"cancelled"}}}"#),
            None
        );
        assert_eq!(ok(r#"{"id":1,"error":{"code":-1,"message":"no"}}"#), None);
        for bad in [
            r#"{"id":1,"result":{"outcome":{"outcome":"selected","optionId":"proceed_always"}}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"cancelled","optionId":"proceed_once"}}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"selected","optionId":"cancel","optionId":"proceed_once"}}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"selected"}}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"approved","optionId":"proceed_once"}}}"#,
            r#"{"id":1,"result":{"outcome":"selected"}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"cancelled"}},"error":{"code":1,"message":""}}"#,
            r#"{"id":1,"result":{"outcome":{"outcome":"cancelled"}},"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}"#,
            r#"{"id":1}"#,
        ] {
            assert!(ok(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn ids_keep_their_json_type() {
        assert_ne!(
            IdKey::of_value(&json!(3)),
            IdKey::of_value(&json!("3")),
            "3 and \"3\" are different JSON-RPC ids"
        );
        assert_eq!(IdKey::of_value(&json!(3)), Some(IdKey::from("3")));
        assert_eq!(IdKey::of_value(&Value::Null), None);
    }

    #[test]
    fn the_prefilter_lets_updates_through_and_catches_what_matters() {
        let update =
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"text":"hi"}}}"#;
        assert!(!agent_line_may_matter(update, true));
        assert!(agent_line_may_matter(
            br#"{"id":1,"method":"session\/request_permission"}"#,
            false
        ));
        assert!(agent_line_may_matter(
            br#"{"id":1,"method":"elicitation/create"}"#,
            false
        ));
        assert!(!agent_line_may_matter(
            br#"{"method":"$/cancel_request"}"#,
            false
        ));
        assert!(agent_line_may_matter(
            br#"{"method":"$/cancel_request"}"#,
            true
        ));
    }

    #[test]
    fn a_method_spelled_with_escapes_is_caught_too() {
        let hidden = br#"{"id":1,"method":"session/request_permissio\u006e","params":{}}"#;
        assert!(agent_line_may_matter(hidden, false));
        let e = Envelope::parse(hidden).unwrap();
        assert_eq!(e.method.as_deref(), Some(REQUEST_PERMISSION));
    }

    #[test]
    fn the_editor_prefilter_catches_the_methods_the_relay_reads() {
        for m in [
            "initialize",
            "session/new",
            "session\\/new",
            "session/load",
            "session/resume",
            "session/fork",
            "session/cancel",
            "session/ne\\u0077",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{}}}}"#);
            assert!(editor_line_may_matter(line.as_bytes()), "{m}");
        }
        let prompt = br#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}"#;
        assert!(!editor_line_may_matter(prompt));
        let answer = br#"{"jsonrpc":"2.0","id":4,"result":{"content":"x"}}"#;
        assert!(!editor_line_may_matter(answer));
    }

    #[test]
    fn lines_the_proxy_writes() {
        let id = IdKey::from(r#""x""#);
        let line = result_line(&id, &json!({"action": "cancel"}));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": "x", "result": {"action": "cancel"}})
        );
        assert!(line.ends_with(b"}\n"));
        let v: Value = serde_json::from_slice(&cancel_request_line(&IdKey::from("4"))).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 4}})
        );
        let v: Value = serde_json::from_slice(&cancelled_error_line(&IdKey::from("4"))).unwrap();
        assert_eq!(v["error"]["code"], -32800);
    }
}
