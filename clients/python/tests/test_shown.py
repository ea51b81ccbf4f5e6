"""``shownSha256`` (proto/PROTOCOL.md, "What a request showed"), computed here with Python's
standard library alone, written from RFC 8785 and not from askbus's Rust code: the golden
files in proto/examples/shown must hold the canonical text and the digest this independent
implementation gives for their frame. The Rust crate's test checks its own function against
the same files, so the two implementations agree through them."""

from __future__ import annotations

import hashlib
import json
import math
import unittest
from typing import Any, Dict, List

from support import REPO

SHOWN = REPO / "proto" / "examples" / "shown"


def es_number(x: float) -> str:
    """ECMAScript's Number.prototype.toString for a finite double (ECMA-262 6.1.6.1.20)."""
    if x == 0:
        return "0"
    assert math.isfinite(x)
    sign = "-" if x < 0 else ""
    # repr() gives the shortest digits that round-trip, as ECMAScript asks for too, in its
    # own layout ("1e-07", "0.5", "1e+21", "100.0"): read the digits and the point back.
    mantissa, _, exp = repr(abs(x)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    every = int_part + frac
    leading = len(every) - len(every.lstrip("0"))
    # value = 0.digits x 10^n
    n = len(int_part) + (int(exp) if exp else 0) - leading
    digits = every.lstrip("0").rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        exp_s = f"+{n - 1}" if n - 1 >= 0 else str(n - 1)
        body = digits + "e" + exp_s if k == 1 else digits[0] + "." + digits[1:] + "e" + exp_s
    return sign + body


def jcs(value: Any) -> str:
    """RFC 8785 canonical JSON."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        # JSON numbers are IEEE doubles to JCS: exact up to 2^53, rounded beyond.
        return str(value) if abs(value) <= 2**53 else es_number(float(value))
    if isinstance(value, float):
        return es_number(value)
    if isinstance(value, str):
        # Python escapes exactly '"', '\\' and the controls below U+0020 (with the same short
        # forms and lower-case \u00xx) when ensure_ascii is off: RFC 8785 3.2.2.2.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(jcs(k) + ":" + jcs(value[k]) for k in keys) + "}"
    raise TypeError(type(value))


def shown_object(frame: Dict[str, Any]) -> Dict[str, Any]:
    """What the digest covers, read from the frame a UI received."""
    out: Dict[str, Any] = {"correlationId": frame["correlationId"]}
    if frame["type"] == "ask-user-request":
        out["kind"] = "question"
        out["questions"] = frame["questions"]
    else:
        assert frame["type"] == "tool-confirmation-request", frame["type"]
        out["kind"] = "approval"
        out["toolCall"] = frame["toolCall"]
        if "details" in frame:
            out["details"] = frame["details"]
    if frame.get("context"):
        out["context"] = frame["context"]
    return out


def goldens() -> List[Dict[str, Any]]:
    files = sorted(SHOWN.glob("*.json"))
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            out.append(json.load(fh))
    return out


class ShownSha256(unittest.TestCase):
    def test_rfc8785_examples(self) -> None:
        # RFC 8785 3.2.3: sorted by UTF-16 code units (U+1F600 before U+FB33).
        v = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001F600": 5, "\u0080": 6, "\u00f6": 7}
        self.assertEqual(
            jcs(v),
            '{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\U0001F600":5,"\ufb33":3}',
        )
        for x, want in [
            (1.0, "1"), (0.5, "0.5"), (1e-7, "1e-7"), (1e-6, "0.000001"), (1e21, "1e+21"),
            (1e20, "100000000000000000000"), (333333333.33333329, "333333333.3333333"),
            (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-1.5, "-1.5"), (123e-9, "1.23e-7"), (-0.0, "0"),
        ]:
            self.assertEqual(es_number(x), want, repr(x))
        self.assertEqual(jcs(2**64 - 1), "18446744073709552000")
        self.assertEqual(jcs(["\x01\x1f\"\\/\x7f\u2028"]), '["\\u0001\\u001f\\"\\\\/\x7f\u2028"]')

    def test_goldens_hold_the_independent_digest(self) -> None:
        found = goldens()
        self.assertGreaterEqual(len(found), 2)
        kinds = set()
        for g in found:
            text = jcs(shown_object(g["frame"]))
            self.assertEqual(g["shown"], text)
            self.assertEqual(g["shownSha256"], hashlib.sha256(text.encode("utf-8")).hexdigest())
            kinds.add(g["frame"]["type"])
        self.assertEqual(kinds, {"ask-user-request", "tool-confirmation-request"})

    def test_what_changes_while_waiting_is_not_covered(self) -> None:
        g = goldens()[0]
        frame = dict(g["frame"])
        frame["timeoutMs"] = 1
        frame["producer"] = {"pid": 1, "uid": 2}
        self.assertEqual(jcs(shown_object(frame)), g["shown"])
        frame["correlationId"] = frame["correlationId"] + "x"
        self.assertNotEqual(jcs(shown_object(frame)), g["shown"])


if __name__ == "__main__":
    unittest.main()
