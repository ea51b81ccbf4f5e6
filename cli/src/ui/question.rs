//! A question as the dialog shows it: the daemon's normalized JSON read into header, text,
//! placeholder and kind, and the rows a choice offers (options, All of the above, Other,
//! Done), as Gemini CLI's AskUserDialog builds them.

use serde_json::Value;

/// A normalized question as the dialog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub header: String,
    pub text: String,
    pub placeholder: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A choice, or a yesno (whose options are always Yes and No).
    Choice {
        options: Vec<Opt>,
        multi: bool,
        yesno: bool,
    },
    Text,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    pub label: String,
    pub description: String,
}

/// The reference's hints when a question gives no (or an empty) placeholder.
pub const OTHER_HINT: &str = "Enter a custom value";
pub const TEXT_HINT: &str = "Enter your response";

impl Question {
    /// Reads a question the daemon normalized (so already valid). Unknown keys are ignored;
    /// a yesno's options, if the model sent any, are replaced as the reference replaces them.
    pub fn from_json(q: &Value) -> Question {
        let s = |k: &str| q.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let ty = s("type");
        let kind = match ty.as_str() {
            "text" => Kind::Text,
            "yesno" => Kind::Choice {
                options: ["Yes", "No"]
                    .map(|l| Opt {
                        label: l.into(),
                        description: String::new(),
                    })
                    .into(),
                multi: false,
                yesno: true,
            },
            _ => Kind::Choice {
                options: q
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|opts| {
                        opts.iter()
                            .map(|o| Opt {
                                label: o.get("label").and_then(Value::as_str).unwrap_or("").into(),
                                description: o
                                    .get("description")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                multi: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
                yesno: false,
            },
        };
        let placeholder = match (s("placeholder"), &kind) {
            (p, _) if !p.is_empty() => p,
            (_, Kind::Text) => TEXT_HINT.into(),
            _ => OTHER_HINT.into(),
        };
        Question {
            header: s("header"),
            text: s("question"),
            placeholder,
            kind,
        }
    }

    /// The rows of a choice, in screen order; empty for a text question.
    pub fn rows(&self) -> Vec<Row> {
        let Kind::Choice { options, multi, .. } = &self.kind else {
            return Vec::new();
        };
        let mut rows: Vec<Row> = (0..options.len()).map(Row::Option).collect();
        if *multi && options.len() > 1 {
            rows.push(Row::All);
        }
        rows.push(Row::Other);
        if *multi {
            rows.push(Row::Done);
        }
        rows
    }

    pub fn is_multi(&self) -> bool {
        matches!(self.kind, Kind::Choice { multi: true, .. })
    }

    pub fn labels(&self) -> Vec<&str> {
        match &self.kind {
            Kind::Choice { options, .. } => options.iter().map(|o| o.label.as_str()).collect(),
            Kind::Text => Vec::new(),
        }
    }
}

/// A row of a choice question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Option(usize),
    /// "All of the above" (multiSelect with more than one option).
    All,
    /// Free text.
    Other,
    /// Finish a multiSelect (the reference's "Done"); it has no number.
    Done,
}
