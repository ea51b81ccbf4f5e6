//! askbus's stricter compound-command check, on top of the reference's decision.

use super::*;

impl Engine {
    /// askbus's stricter check, for the daemon: the reference's decision, then, if it allows a
    /// shell command of several parts, each part on its own (with the heuristics) must allow
    /// too, or the decision becomes `ask_user`. Never turns anything into an allow.
    pub fn check_strict(&self, call: &Call<'_>) -> Outcome {
        let mut out = self.check(call);
        if out.decision != Decision::Allow || !SHELL_TOOL_NAMES.contains(&call.name) {
            return out;
        }
        let Some(JsValue::String(command)) = call.args.and_then(|a| a.prop("command")) else {
            return out;
        };
        let Some(parsed) = shell::parse_command_details(command) else {
            return out;
        };
        let parts: Vec<&shell::Detail> = parsed
            .details
            .iter()
            .filter(|d| !REDIRECTION_NAMES.contains(&d.name.as_str()))
            .collect();
        let wrapped = parts
            .iter()
            .any(|d| shell::strip_shell_wrapper(&d.text) != js_trim_utf16(&d.text));
        if parts.len() <= 1 && !wrapped {
            return out;
        }
        let dir_path = call.args.and_then(|a| a.prop("dir_path"));
        for d in parts {
            let trimmed = js_trim_utf16(&d.text).to_vec();
            let stripped = shell::strip_shell_wrapper(&d.text);
            // Unwrapped, both are the same text: it is checked once.
            let texts = if stripped == trimmed {
                vec![trimmed]
            } else {
                vec![trimmed, stripped]
            };
            for text in texts {
                if text.as_slice() == command.as_slice() {
                    continue;
                }
                let mut entries = vec![(
                    "command".encode_utf16().collect::<Vec<u16>>(),
                    JsValue::String(text.clone()),
                )];
                if let Some(dp) = dir_path {
                    entries.push(("dir_path".encode_utf16().collect(), dp.clone()));
                }
                let args = JsValue::Object(entries);
                let sub = Call {
                    args: Some(&args),
                    ..call.clone()
                };
                let r = self.check(&sub);
                if r.decision != Decision::Allow {
                    out.trace.notes.push(format!(
                        "askbus's compound check: part `{}` alone is {}: ask",
                        String::from_utf16_lossy(&text),
                        r.decision.as_str()
                    ));
                    out.decision = Decision::AskUser;
                    if r.rule.is_some() {
                        out.rule = r.rule;
                    }
                    return out;
                }
            }
        }
        out
    }
}
