"""The answer helpers against the encoding of Gemini CLI's AskUserDialog (see the module
docstring of askbus.answers): labels, option order, the ", " join, Yes/No, and JavaScript's
trim rather than Python's strip."""

from __future__ import annotations

import unittest

import support  # noqa: F401  (puts the source tree on the import path)

from askbus import answers

SINGLE = {
    "question": "Which?", "header": "DB", "type": "choice",
    "options": [{"label": "SQLite", "description": ""},
                {"label": "PostgreSQL", "description": ""},
                {"label": "SQLite", "description": "the same label twice"}],
}
MULTI = dict(SINGLE, multiSelect=True,
             options=[{"label": "Auth", "description": ""}, {"label": "Logs", "description": ""},
                      {"label": "Metrics", "description": ""}])


class JsTrimTest(unittest.TestCase):
    def test_differs_from_str_strip_where_javascript_does(self) -> None:
        # JavaScript strips BOM but not NEL or the information separators; Python the reverse.
        self.assertEqual(answers.js_trim("\ufeff x \ufeff"), "x")
        self.assertEqual(answers.js_trim("\u0085x\u0085"), "\u0085x\u0085")
        self.assertEqual(answers.js_trim("\x1cx\x1f"), "\x1cx\x1f")
        self.assertEqual(answers.js_trim("\u3000\u2028\t x\n\r\u00a0\u202f"), "x")
        self.assertEqual(answers.js_trim("a b"), "a b")


class EncodingTest(unittest.TestCase):
    def test_choice(self) -> None:
        self.assertEqual(answers.choice(SINGLE, "PostgreSQL"), "PostgreSQL")
        self.assertEqual(answers.choice(SINGLE, 2), "SQLite")
        self.assertEqual(answers.choice(SINGLE, other="  MySQL \n"), "MySQL")
        for bad in ({"option": "MySQL"}, {"option": 3}, {}, {"option": 0, "other": "x"}):
            with self.assertRaises(ValueError, msg=bad):
                answers.choice(SINGLE, **bad)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            answers.choice(SINGLE, True)
        with self.assertRaises(ValueError):
            answers.choice(MULTI, "Auth")
        with self.assertRaises(ValueError):
            answers.choice({"question": "?", "header": "H", "type": "text"}, 0)

    def test_multi_in_option_order_then_other(self) -> None:
        self.assertEqual(answers.multi(MULTI, ["Metrics", "Auth"]), "Auth, Metrics")
        self.assertEqual(answers.multi(MULTI, [2, "Auth", 0]), "Auth, Metrics")
        self.assertEqual(answers.multi(MULTI, ["Logs"], other=" custom "), "Logs, custom")
        self.assertEqual(answers.multi(MULTI, [], other="only"), "only")
        self.assertEqual(answers.multi(MULTI, ["Logs"], other="  "), "Logs")
        self.assertEqual(answers.multi(MULTI, [0, 1, 2]), "Auth, Logs, Metrics")
        self.assertEqual(answers.multi(MULTI), "")

    def test_yesno_and_text(self) -> None:
        self.assertEqual((answers.yesno(True), answers.yesno(False)), ("Yes", "No"))
        # Gemini CLI 0.61's dialog offers "Other" on yes/no questions too.
        self.assertEqual(answers.yesno(other=" only on Fridays "), "only on Fridays")
        with self.assertRaises(ValueError):
            answers.yesno()
        yes_no = {"question": "Deploy?", "header": "Deploy", "type": "yesno"}
        self.assertEqual(answers.choice(yes_no, "No"), "No")
        self.assertEqual(answers.choice(yes_no, 0), "Yes")
        self.assertEqual(answers.text("  two\nlines \t"), "two\nlines")
        self.assertEqual(answers.other("\u2003x"), "x")

    def test_collect_leaves_out_blank_answers(self) -> None:
        self.assertEqual(
            answers.collect({0: "SQLite", 1: "", 2: " \u3000", "3": "No"}),
            {"0": "SQLite", "3": "No"},
        )


if __name__ == "__main__":
    unittest.main()
