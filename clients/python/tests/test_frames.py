"""The wire layer without a daemon: framing, the client frames' shapes, and strict parsing
of daemon frames (unknown types tolerated, malformed known ones refused)."""

from __future__ import annotations

import json
import unittest

import support  # noqa: F401  (puts the source tree on the import path)

import askbus
from askbus import _frames, _parse
from askbus.errors import ERROR_CODES, error_for_code


class FramingTest(unittest.TestCase):
    def test_prefix_is_big_endian_length_of_utf8_json(self) -> None:
        payload = _frames.encode({"type": "ping", "id": "é"})
        self.assertEqual(payload, '{"type":"ping","id":"é"}'.encode())
        framed = _frames.with_prefix(payload)
        self.assertEqual(framed[:4], len(payload).to_bytes(4, "big"))
        self.assertEqual(framed[4:], payload)

    def test_non_json_values_are_refused(self) -> None:
        with self.assertRaises(ValueError):
            _frames.encode({"type": "x", "n": float("inf")})
        with self.assertRaises(UnicodeEncodeError):
            _frames.encode({"type": "x", "s": "\ud800"})

    def test_decode_refuses_what_is_not_a_typed_object(self) -> None:
        for bad in [b"\xff", b"{", b"[1]", b'{"type":3}', b"{}"]:
            with self.assertRaises(askbus.ProtocolError, msg=bad):
                _frames.decode(bad)
        self.assertEqual(_frames.decode(b'{"type":"x"}'), {"type": "x"})


class ClientFramesTest(unittest.TestCase):
    def test_optional_fields_are_left_out(self) -> None:
        self.assertEqual(_frames.hello(), {"type": "hello", "protocol": 1})
        self.assertEqual(_frames.subscribe(), {"type": "subscribe"})
        self.assertEqual(_frames.ping(), {"type": "ping"})
        self.assertEqual(_frames.ping(None), {"type": "ping", "id": None})
        self.assertEqual(
            _frames.ask_user_request("c", []),
            {"type": "ask-user-request", "correlationId": "c", "questions": []},
        )
        self.assertEqual(
            _frames.ask_user_response("c", {"0": "x"}),
            {"type": "ask-user-response", "correlationId": "c", "answers": {"0": "x"}},
        )
        self.assertEqual(
            _frames.ask_user_response("c", {}, cancelled=True),
            {"type": "ask-user-response", "correlationId": "c", "answers": {}, "cancelled": True},
        )

    def test_answer_keys(self) -> None:
        self.assertEqual(_frames.normalize_answers({0: "a", "1": "b"}), {"0": "a", "1": "b"})
        with self.assertRaises(TypeError):
            _frames.normalize_answers({True: "a"})
        with self.assertRaises(TypeError):
            _frames.normalize_answers({0: 1})  # type: ignore[dict-item]


class ServerFramesTest(unittest.TestCase):
    def test_unknown_types_are_tolerated(self) -> None:
        parsed = _parse.parse_server_frame({"type": "from-the-future", "x": 1})
        self.assertIsInstance(parsed, _parse.Unknown)

    def test_known_types_with_bad_fields_are_refused(self) -> None:
        bad = [
            {"type": "welcome", "protocol": "1", "server": "s", "maxFrameBytes": 1,
             "defaultTimeoutMs": 1, "maxTimeoutMs": 1},
            {"type": "subscribed", "pending": True},
            {"type": "subscribed"},
            {"type": "ask-user-withdrawn", "correlationId": "c", "reason": "bored"},
            {"type": "ask-user-ack", "correlationId": "c", "outcome": "timeout"},
            {"type": "ask-user-request", "correlationId": "c", "questions": [1],
             "timeoutMs": 1, "producer": {"uid": 0}},
            {"type": "ask-user-request", "correlationId": "c", "questions": [],
             "timeoutMs": 1, "producer": {"pid": 1}},
            {"type": "ask-user-response", "correlationId": "c", "answers": {"0": 1},
             "cancelled": False, "reason": "answered",
             "result": {"llmContent": "", "returnDisplay": "", "data": {}}},
            {"type": "ask-user-response", "correlationId": "c", "answers": {},
             "cancelled": False, "reason": "answered", "result": {"llmContent": ""}},
            {"type": "error", "code": "x"},
            {"type": "bus-event", "event": "request", "ts": "t", "correlationId": "c",
             "producer": {"uid": 0}, "questionTypes": [1], "headers": []},
        ]
        for frame in bad:
            with self.assertRaises(askbus.ProtocolError, msg=json.dumps(frame)):
                _parse.parse_server_frame(frame)

    def test_error_codes_map_to_their_classes(self) -> None:
        with open(support.REPO / "proto" / "schema" / "common.schema.json", encoding="utf-8") as f:
            spec = json.load(f)["$defs"]["errorCode"]["enum"]
        self.assertEqual(sorted(ERROR_CODES), sorted(spec))
        for code in ERROR_CODES:
            err = error_for_code(code, "m", "c")
            self.assertEqual((err.code, err.message, err.correlation_id), (code, "m", "c"))
            self.assertIsNot(type(err), askbus.DaemonError)
        future = error_for_code("some-new-code", "m")
        self.assertIs(type(future), askbus.DaemonError)
        self.assertEqual(future.code, "some-new-code")
        self.assertIsInstance(error_for_code("not-pending", "m"), askbus.NotPending)
        self.assertIsInstance(error_for_code("invalid-request", "m"), askbus.InvalidRequest)
        self.assertIsInstance(error_for_code("frame-timeout", "m"), askbus.FrameTimeout)


class ErrorCodesLiveTest(support.DaemonTestCase):
    def test_the_client_knows_every_code_the_daemon_counts(self) -> None:
        # The stats frame lists every error code the daemon can send.
        self.assertEqual(set(support.stats(self.socket)["errors"]), set(ERROR_CODES))


if __name__ == "__main__":
    unittest.main()
