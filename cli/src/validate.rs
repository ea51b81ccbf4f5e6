//! `askbus validate`: checks questions offline with the daemon's own rules (the same
//! `askbus::protocol` and `askbus::questions` code askbusd runs) and prints the reference's
//! error message, or the questions as UIs would receive them after normalization.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use askbus::protocol::{parse_inbound, ErrorCode, Inbound, DEFAULT_MAX_FRAME_BYTES};

/// Why a file does not pass: the error frame the daemon would send.
#[derive(Debug, PartialEq, Eq)]
pub struct Rejection {
    pub code: &'static str,
    pub message: String,
    pub correlation_id: Option<String>,
}

pub fn run(file: Option<PathBuf>, json_out: bool) -> Result<ExitCode> {
    let text = crate::read_file_or_stdin(file.as_deref())?;
    let value: Value = serde_json::from_str(&text).context("the file is not valid JSON")?;
    match check(&text, value) {
        Ok(normalized) => {
            let text = serde_json::to_string_pretty(&normalized)?;
            println!("{}", crate::term::json(&text));
            Ok(ExitCode::SUCCESS)
        }
        Err(r) => {
            if json_out {
                let mut frame = json!({"type": "error", "code": r.code, "message": r.message});
                if let Some(id) = r.correlation_id {
                    frame["correlationId"] = json!(id);
                }
                println!("{}", crate::term::json(&frame.to_string()));
            } else {
                eprintln!("{}", crate::term::sanitize_lines(&r.message));
                if let Some(hint) = crate::explain::rejection(&r.message) {
                    eprintln!("{hint}");
                }
            }
            Ok(ExitCode::from(crate::fail::exit::FAILURE))
        }
    }
}

/// Checks a file's content. It may be a whole `ask-user-request` frame (then its own fields
/// are checked first, as the daemon does), a `{"questions": …}` object (the tool's params),
/// or a bare `questions` array.
pub fn check(text: &str, value: Value) -> Result<Vec<Value>, Rejection> {
    let params = match value {
        Value::Object(ref obj) if obj.contains_key("type") => {
            if text.len() > DEFAULT_MAX_FRAME_BYTES {
                return Err(Rejection {
                    code: ErrorCode::FrameTooLarge.as_str(),
                    message: format!(
                        "frame length exceeds the limit of {DEFAULT_MAX_FRAME_BYTES} bytes \
                         (askbusd's default --max-frame-bytes)"
                    ),
                    correlation_id: None,
                });
            }
            match parse_inbound(text.as_bytes()) {
                Ok(Inbound::AskUserRequest(req)) => {
                    // The daemon's own path (its one-pass shortcut included), so this
                    // checker says what askbusd would say of the same frame.
                    return match askbus::questions::check(req.questions) {
                        Ok(valid) => Ok(serde_json::from_str(&valid.questions)
                            .expect("normalized questions are a JSON array")),
                        Err(message) => Err(Rejection {
                            code: ErrorCode::InvalidRequest.as_str(),
                            message,
                            correlation_id: Some(req.correlation_id),
                        }),
                    };
                }
                Ok(_) => {
                    return Err(Rejection {
                        code: ErrorCode::InvalidFrame.as_str(),
                        message: format!(
                            "a {} frame holds no questions; expected an ask-user-request",
                            obj["type"]
                        ),
                        correlation_id: None,
                    })
                }
                Err(e) => {
                    return Err(Rejection {
                        code: e.code.as_str(),
                        message: e.message,
                        correlation_id: e.correlation_id,
                    })
                }
            }
        }
        Value::Object(_) => value,
        other => json!({ "questions": other }),
    };
    askbus::questions::validate(&params).map_err(|message| Rejection {
        code: ErrorCode::InvalidRequest.as_str(),
        message,
        correlation_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_value(v: Value) -> Result<Vec<Value>, Rejection> {
        check(&v.to_string(), v)
    }

    /// The reference's verdict on every parameter set of the conformance corpus.
    #[test]
    fn agrees_with_the_reference_on_every_case() {
        let cases: Vec<Value> = serde_json::from_str(include_str!(
            "../../clients/rust/tests/data/ask_user_reference_cases.json"
        ))
        .unwrap();
        assert_eq!(cases.len(), 1035);
        for case in cases {
            let got = check_value(case["params"].clone());
            if case["ok"] == true {
                assert_eq!(got.unwrap(), case["normalized"].as_array().unwrap().clone());
            } else {
                let r = got.unwrap_err();
                assert_eq!(r.message, case["error"].as_str().unwrap(), "{case}");
                assert_eq!(r.code, "invalid-request");
            }
        }
    }

    #[test]
    fn a_bare_array_is_the_questions() {
        let q = json!([{"question": "Ship?\\nNow", "header": "Go", "type": "yesno"}]);
        let got = check_value(q).unwrap();
        assert_eq!(got[0]["question"], "Ship?\nNow");
        let r = check_value(json!("nope")).unwrap_err();
        assert_eq!(r.message, "params/questions must be array");
    }

    #[test]
    fn a_frame_is_checked_as_the_daemon_checks_it() {
        let r = check_value(json!({"type": "ask-user-request", "correlationId": "",
            "questions": []}))
        .unwrap_err();
        assert_eq!(r.code, "invalid-request");
        assert_eq!(r.message, "correlationId must not be empty");
        let r = check_value(json!({"type": "ask-user-request", "correlationId": "c",
            "timeoutMs": 0, "questions": []}))
        .unwrap_err();
        assert_eq!(r.message, "timeoutMs must be at least 1");
        let r = check_value(json!({"type": "ask-user-request", "correlationId": "c",
            "questions": []}))
        .unwrap_err();
        assert_eq!(
            r.message,
            "params/questions must NOT have fewer than 1 items"
        );
        assert_eq!(r.correlation_id.as_deref(), Some("c"));
        let r = check_value(json!({"type": "ping"})).unwrap_err();
        assert_eq!(r.code, "invalid-frame");
        let big = format!(
            r#"{{"type":"ask-user-request","correlationId":"c","pad":"{}"}}"#,
            "x".repeat(DEFAULT_MAX_FRAME_BYTES)
        );
        let v: Value = serde_json::from_str(&big).unwrap();
        assert_eq!(check(&big, v).unwrap_err().code, "frame-too-large");
    }
}
