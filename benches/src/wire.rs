//! The frames the bench and the baseline relay build and peek at: pre-encoded request and
//! response templates with the correlationId (and a timeout) spliced in, and the one-field
//! peek both use to route a frame, so the two targets see byte-identical traffic.

use std::borrow::Cow;
use std::io::Write;

use anyhow::{bail, Result};
use serde::Deserialize;
use serde_json::json;

use askbus::protocol::LENGTH_PREFIX_BYTES;

/// What the bench and the relay read from a frame: its type and correlationId, nothing else
/// (serde skips the rest without building it).
#[derive(Debug, Deserialize)]
pub struct Peek<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    #[serde(rename = "correlationId", borrow, default)]
    pub cid: Option<Cow<'a, str>>,
}

impl<'a> Peek<'a> {
    pub fn of(payload: &'a [u8]) -> Option<Peek<'a>> {
        serde_json::from_slice(payload).ok()
    }
}

/// A frame's JSON cut at its holes: writing one is copying the pieces with the values in
/// between, so no request is serialized during a run.
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Vec<u8>>,
}

/// Stand-ins for the values spliced in; they cannot occur in the frames' own text.
const CID_HOLE: &str = "\u{1}cid\u{1}";
const TIMEOUT_HOLE: &str = "\u{1}timeout\u{1}";

impl Template {
    /// Cuts `value`'s JSON at each hole, in the order given. A hole written as a JSON string
    /// (`"\u0001timeout\u0001"`) with its quotes is replaced by a bare number.
    fn cut(value: &serde_json::Value, holes: &[(&str, bool)]) -> Template {
        let mut text = value.to_string();
        let mut pieces = Vec::with_capacity(holes.len() + 1);
        for (hole, bare) in holes {
            let escaped = serde_json::to_string(hole).expect("a string serializes");
            let needle = if *bare {
                escaped
            } else {
                escaped[1..escaped.len() - 1].to_owned()
            };
            let at = text.find(&needle).expect("every hole is in the template");
            pieces.push(text.as_bytes()[..at].to_vec());
            text = text[at + needle.len()..].to_owned();
        }
        pieces.push(text.into_bytes());
        Template { pieces }
    }

    /// Appends one whole frame (length prefix and payload) with `values` in the holes.
    pub fn write(&self, values: &[&[u8]], out: &mut Vec<u8>) {
        debug_assert_eq!(values.len() + 1, self.pieces.len());
        let len: usize = self.pieces.iter().map(Vec::len).sum::<usize>()
            + values.iter().map(|v| v.len()).sum::<usize>();
        out.extend_from_slice(&(len as u32).to_be_bytes());
        for (i, piece) in self.pieces.iter().enumerate() {
            out.extend_from_slice(piece);
            if let Some(v) = values.get(i) {
                out.extend_from_slice(v);
            }
        }
    }

    /// The bytes on the wire of one frame whose holes hold `values_len` bytes in all.
    pub fn wire_len(&self, values_len: usize) -> usize {
        LENGTH_PREFIX_BYTES + self.pieces.iter().map(Vec::len).sum::<usize>() + values_len
    }
}

/// What the bench asks: an ask_user question, or an approval (a tool confirmation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestKind {
    /// `ask-user-request` with one choice question, answered with its first option
    Question,
    /// `tool-confirmation-request` for a shell command, allowed once
    Approval,
}

impl RequestKind {
    /// The frame type a producer waits for.
    pub fn response_type(self) -> &'static str {
        match self {
            RequestKind::Question => "ask-user-response",
            RequestKind::Approval => "tool-confirmation-response",
        }
    }

    /// The frame type a UI answers.
    pub fn request_type(self) -> &'static str {
        match self {
            RequestKind::Question => "ask-user-request",
            RequestKind::Approval => "tool-confirmation-request",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Question => "question",
            RequestKind::Approval => "approval",
        }
    }
}

/// The bench's request frame, sized and shaped once per run.
#[derive(Debug, Clone)]
pub struct Request {
    template: Template,
    /// Whether the template has a timeoutMs hole after the correlationId hole.
    timed: bool,
    /// The label a UI answers a question with (the first option's).
    pub first_label: String,
    pub kind: RequestKind,
}

/// Options of the default question; descriptions are padded to reach `--size`.
const OPTIONS: [(&str, &str); 3] = [
    ("SQLite", "A file"),
    ("PostgreSQL", "A server"),
    ("DuckDB", "In process"),
];

/// What a request says besides its question.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra {
    /// Splice a per-request timeoutMs in (`Request::write_timed`).
    pub timed: bool,
    /// Send `"noUi":"wait"`, so a request waits for a UI whatever the daemon's default.
    pub no_ui_wait: bool,
}

impl Request {
    /// A one-question choice request (three options) of about `size` bytes on the wire, for a
    /// correlationId of `cid_len` bytes (a timeout of `TIMEOUT_DIGITS` digits if timed).
    pub fn new(size: usize, cid_len: usize, extra: Extra) -> Result<Request> {
        let build = |pad: usize| {
            let options: Vec<_> = OPTIONS
                .iter()
                .enumerate()
                .map(|(i, (label, desc))| {
                    // Spread the padding over the descriptions, the earlier ones taking the rest.
                    let share = pad / OPTIONS.len() + usize::from(i < pad % OPTIONS.len());
                    let mut d = (*desc).to_owned();
                    if share > 0 {
                        d.push(' ');
                        d.extend(std::iter::repeat_n('x', share - 1));
                    }
                    json!({"label": label, "description": d})
                })
                .collect();
            let mut v = json!({
                "type": "ask-user-request",
                "correlationId": CID_HOLE,
                "questions": [{
                    "question": "Which database?",
                    "header": "Database",
                    "type": "choice",
                    "options": options,
                }],
            });
            let mut holes = vec![(CID_HOLE, false)];
            if extra.timed {
                v["timeoutMs"] = json!(TIMEOUT_HOLE);
                holes.push((TIMEOUT_HOLE, true));
            }
            if extra.no_ui_wait {
                v["noUi"] = json!("wait");
            }
            Template::cut(&v, &holes)
        };
        let values_len = cid_len + if extra.timed { TIMEOUT_DIGITS } else { 0 };
        let bare = build(0);
        let smallest = bare.wire_len(values_len);
        if size < smallest {
            bail!("--size {size} is below the smallest request frame, {smallest} bytes");
        }
        let template = build(size - smallest);
        Ok(Request {
            template,
            timed: extra.timed,
            first_label: OPTIONS[0].0.to_owned(),
            kind: RequestKind::Question,
        })
    }

    /// An approval of about `size` bytes on the wire: a shell command as Gemini CLI asks to
    /// confirm it (exec details, allow once/always or cancel), its description padded.
    pub fn approval(size: usize, cid_len: usize) -> Result<Request> {
        let build = |pad: usize| {
            let mut description = "Clean rebuild of the release binaries".to_owned();
            if pad > 0 {
                description.push(' ');
                description.extend(std::iter::repeat_n('x', pad - 1));
            }
            let v = json!({
                "type": "tool-confirmation-request",
                "correlationId": CID_HOLE,
                "toolCall": {
                    "name": "run_shell_command",
                    "args": {
                        "command": "rm -rf build && cargo build --release",
                        "description": description,
                    },
                },
                "details": {
                    "type": "exec",
                    "title": "Confirm Shell Command",
                    "command": "rm -rf build && cargo build --release",
                    "rootCommand": "rm, cargo",
                    "rootCommands": ["rm", "cargo"],
                },
                "outcomes": ["proceed_once", "proceed_always", "cancel"],
            });
            Template::cut(&v, &[(CID_HOLE, false)])
        };
        let smallest = build(0).wire_len(cid_len);
        if size < smallest {
            bail!("--size {size} is below the smallest approval frame, {smallest} bytes");
        }
        Ok(Request {
            template: build(size - smallest),
            timed: false,
            first_label: String::new(),
            kind: RequestKind::Approval,
        })
    }

    /// What a UI sends back: the first option, or allow once.
    pub fn response(&self) -> Response {
        match self.kind {
            RequestKind::Question => Response::new(&self.first_label),
            RequestKind::Approval => Response::allow_once(),
        }
    }

    /// Appends the request frame for `cid`.
    pub fn write(&self, cid: &[u8], out: &mut Vec<u8>) {
        assert!(!self.timed, "a timed request needs its timeout");
        self.template.write(&[cid], out);
    }

    /// Appends the request frame for `cid` with timeoutMs `timeout_ms`.
    pub fn write_timed(&self, cid: &[u8], timeout_ms: u64, out: &mut Vec<u8>) {
        assert!(self.timed, "this request has no timeout hole");
        let mut digits = Vec::with_capacity(20);
        write!(digits, "{timeout_ms}").expect("writing to a Vec");
        self.template.write(&[cid, &digits], out);
    }

    /// The frame's size on the wire for a correlationId of `cid_len` bytes.
    pub fn wire_len(&self, cid_len: usize) -> usize {
        self.template
            .wire_len(cid_len + if self.timed { TIMEOUT_DIGITS } else { 0 })
    }
}

/// The timeout digits sizing assumes (a timeout in the tens of seconds, in ms).
const TIMEOUT_DIGITS: usize = 5;

/// A UI's answer: the first option of the only question, or allow once.
#[derive(Debug, Clone)]
pub struct Response {
    template: Template,
    /// The request type it answers.
    pub answers: &'static str,
}

impl Response {
    pub fn new(label: &str) -> Response {
        let v = json!({
            "type": "ask-user-response",
            "correlationId": CID_HOLE,
            "answers": {"0": label},
        });
        Response {
            template: Template::cut(&v, &[(CID_HOLE, false)]),
            answers: RequestKind::Question.request_type(),
        }
    }

    pub fn allow_once() -> Response {
        let v = json!({
            "type": "tool-confirmation-response",
            "correlationId": CID_HOLE,
            "confirmed": true,
            "outcome": "proceed_once",
        });
        Response {
            template: Template::cut(&v, &[(CID_HOLE, false)]),
            answers: RequestKind::Approval.request_type(),
        }
    }

    pub fn write(&self, cid: &[u8], out: &mut Vec<u8>) {
        self.template.write(&[cid], out);
    }
}

/// Appends the bench's correlationId for request `seq` of producer `producer`.
pub fn write_cid(producer: usize, seq: u64, out: &mut Vec<u8>) {
    write!(out, "b-{producer}-{seq}").expect("writing to a Vec");
}

/// The sequence number at the end of a bench correlationId (`b-<producer>-<seq>`).
pub fn cid_seq(cid: &str) -> Option<u64> {
    cid.rsplit('-').next()?.parse().ok()
}

/// Appends a frame holding `payload` (small control frames: subscribe, ping, stats).
pub fn write_frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame: &[u8]) -> serde_json::Value {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        serde_json::from_slice(&frame[4..]).expect("valid JSON")
    }

    #[test]
    fn request_has_the_id_and_the_size_asked() {
        for size in [300, 1024, 4096] {
            let req = Request::new(size, 8, Extra::default()).unwrap();
            let mut out = Vec::new();
            req.write(b"b-3-1234", &mut out);
            assert_eq!(out.len(), size);
            let v = payload(&out);
            assert_eq!(v["correlationId"], "b-3-1234");
            assert_eq!(v["questions"][0]["options"].as_array().unwrap().len(), 3);
            assert!(askbus::questions::validate(&v).is_ok(), "{v}");
        }
    }

    #[test]
    fn timed_request_carries_a_bare_number() {
        let req = Request::new(
            1024,
            9,
            Extra {
                timed: true,
                no_ui_wait: true,
            },
        )
        .unwrap();
        let mut out = Vec::new();
        req.write_timed(b"b-0-77777", 12345, &mut out);
        assert_eq!(out.len(), 1024);
        let v = payload(&out);
        assert_eq!(v["timeoutMs"], 12345);
        assert_eq!(v["noUi"], "wait");
    }

    #[test]
    fn approval_has_the_id_and_the_size_asked_and_is_valid() {
        for size in [512, 1024] {
            let req = Request::approval(size, 8).unwrap();
            let mut out = Vec::new();
            req.write(b"b-3-1234", &mut out);
            assert_eq!(out.len(), size);
            let parsed = askbus::protocol::parse_inbound(&out[4..]);
            assert!(
                matches!(
                    parsed,
                    Ok(askbus::protocol::Inbound::ToolConfirmationRequest(_))
                ),
                "{parsed:?}"
            );
        }
        assert!(Request::approval(100, 8).is_err());
        let mut out = Vec::new();
        req_response(&Request::approval(512, 6).unwrap(), &mut out);
        let v = payload(&out);
        assert_eq!(v["type"], "tool-confirmation-response");
        assert_eq!(v["outcome"], "proceed_once");
        assert_eq!(v["confirmed"], true);
    }

    fn req_response(req: &Request, out: &mut Vec<u8>) {
        req.response().write(b"b-0-1", out);
    }

    #[test]
    fn too_small_a_size_is_refused() {
        assert!(Request::new(50, 8, Extra::default()).is_err());
    }

    #[test]
    fn response_and_peek_agree() {
        let mut out = Vec::new();
        Response::new("SQLite").write(b"b-1-42", &mut out);
        let v = payload(&out);
        assert_eq!(v["answers"]["0"], "SQLite");
        let peek = Peek::of(&out[4..]).unwrap();
        assert_eq!(peek.ty, "ask-user-response");
        assert_eq!(cid_seq(peek.cid.as_deref().unwrap()), Some(42));
    }
}
