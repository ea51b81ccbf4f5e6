//! The answer strings a dialog produces, exactly as Gemini CLI's AskUserDialog encodes them
//! (and as `proto/PROTOCOL.md` requires of every UI): pure functions of the widget state, kept
//! apart from rendering and key handling so the encoding can be checked on its own.

use std::collections::BTreeMap;

/// The `question.trim()` the reference applies, which is JavaScript's (a wider whitespace set
/// than Rust's `str::trim`).
fn trim(s: &str) -> &str {
    askbus::questions::js_trim(s)
}

/// A single choice (or yesno): the picked option's label, or the trimmed Other text.
/// `None` when nothing is picked or the Other text is blank: the question is unanswered.
pub fn single(labels: &[&str], picked: Option<Pick>, other_text: &str) -> Option<String> {
    match picked? {
        Pick::Option(i) => labels.get(i).and_then(|l| non_empty(l)),
        Pick::Other => non_empty(trim(other_text)),
    }
}

/// What a single-choice question has picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Option(usize),
    Other,
}

/// A multiSelect choice: the checked labels in option order, then the trimmed Other text,
/// joined by ", ". "All of the above" is not an answer of its own: it checks every option,
/// so it appears here only as those options' labels.
pub fn multi(labels: &[&str], checked: &[bool], other_text: &str) -> Option<String> {
    let mut parts: Vec<&str> = labels
        .iter()
        .zip(checked)
        .filter(|(_, &c)| c)
        .map(|(l, _)| *l)
        .collect();
    let other = trim(other_text);
    if !other.is_empty() {
        parts.push(other);
    }
    non_empty(&parts.join(", "))
}

/// A text question: the trimmed text, unanswered when blank.
pub fn text(input: &str) -> Option<String> {
    non_empty(trim(input))
}

/// The `answers` object: question index → answer, unanswered questions left out.
pub fn answers(per_question: impl IntoIterator<Item = Option<String>>) -> BTreeMap<usize, String> {
    per_question
        .into_iter()
        .enumerate()
        .filter_map(|(i, a)| a.map(|a| (i, a)))
        .collect()
}

/// The reference drops an answer whose trimmed text is empty.
fn non_empty(s: &str) -> Option<String> {
    (!trim(s).is_empty()).then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: [&str; 3] = ["PostgreSQL", "SQLite", "DuckDB"];

    #[test]
    fn single_choice_is_the_label() {
        assert_eq!(single(&L, Some(Pick::Option(1)), ""), Some("SQLite".into()));
        // Other text typed earlier does not leak into an option answer.
        assert_eq!(
            single(&L, Some(Pick::Option(0)), "typed"),
            Some("PostgreSQL".into())
        );
        assert_eq!(single(&L, None, "typed"), None);
    }

    #[test]
    fn single_other_is_trimmed_text_or_nothing() {
        assert_eq!(
            single(&L, Some(Pick::Other), "  MariaDB \t"),
            Some("MariaDB".into())
        );
        assert_eq!(single(&L, Some(Pick::Other), "   "), None);
        // JavaScript's trim also strips U+FEFF and U+00A0.
        assert_eq!(
            single(&L, Some(Pick::Other), "\u{feff}\u{a0}x\u{a0}"),
            Some("x".into())
        );
    }

    #[test]
    fn yesno_is_yes_or_no_or_feedback() {
        let yn = ["Yes", "No"];
        assert_eq!(single(&yn, Some(Pick::Option(0)), ""), Some("Yes".into()));
        assert_eq!(single(&yn, Some(Pick::Option(1)), ""), Some("No".into()));
        assert_eq!(
            single(&yn, Some(Pick::Other), " only on staging "),
            Some("only on staging".into())
        );
    }

    #[test]
    fn multi_lists_labels_in_option_order_then_other() {
        assert_eq!(
            multi(&L, &[true, false, true], ""),
            Some("PostgreSQL, DuckDB".into())
        );
        assert_eq!(
            multi(&L, &[false, true, false], " Redis "),
            Some("SQLite, Redis".into())
        );
        assert_eq!(multi(&L, &[false; 3], "Redis"), Some("Redis".into()));
        assert_eq!(multi(&L, &[false; 3], "  "), None);
        // All of the above is every label, never the phrase itself.
        let all = multi(&L, &[true; 3], "").unwrap();
        assert_eq!(all, "PostgreSQL, SQLite, DuckDB");
        assert!(!all.contains("All of the above"));
    }

    #[test]
    fn text_is_trimmed() {
        assert_eq!(text("  ship it\n"), Some("ship it".into()));
        assert_eq!(text(" \n "), None);
        assert_eq!(text("a  b"), Some("a  b".into()));
    }

    #[test]
    fn unanswered_questions_are_left_out() {
        let a = answers([Some("x".to_owned()), None, Some("z".to_owned())]);
        assert_eq!(a.len(), 2);
        assert_eq!(a[&0], "x");
        assert_eq!(a[&2], "z");
        assert!(!a.contains_key(&1));
    }
}
