"""The blocking producer API against the real daemon: every outcome, every refusal, and
one Producer shared by many threads."""

from __future__ import annotations

import os
import threading
import time
import unittest
from typing import Dict, List

from support import DaemonTestCase, choice_question, load_json, stats, wait_until

import askbus


def answer_in_thread(socket: str, answers: Dict[str, str], dismiss: bool = False,
                     count: int = 1) -> threading.Thread:
    """A UI that answers (or dismisses) the next ``count`` questions."""
    sub = askbus.subscribe(socket, client="test-ui")

    def run() -> None:
        try:
            for n, req in enumerate(sub, 1):
                if dismiss:
                    req.dismiss()
                else:
                    req.answer(answers)
                if n == count:
                    return
        finally:
            sub.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class OutcomeTest(DaemonTestCase):
    def test_answered(self) -> None:
        ui = answer_in_thread(self.socket, {"0": "SQLite"})
        r = askbus.ask([choice_question()], socket=self.socket, client="agent/1")
        ui.join(5)
        self.assertEqual(r.reason, "answered")
        self.assertTrue(r.answered)
        self.assertFalse(r.cancelled)
        self.assertEqual(r.answers, {"0": "SQLite"})
        self.assertEqual(r.result.llm_content, '{"answers":{"0":"SQLite"}}')
        self.assertEqual(r.result.return_display, "**User answered:**\n  Database → SQLite")
        self.assertEqual(
            r.result.data,
            {"ask_user": {"question_types": ["choice"], "dismissed": False,
                          "empty_submission": False, "answer_count": 1}},
        )
        self.assertIs(r.raise_for_outcome(), r)

    def test_dismissed(self) -> None:
        ui = answer_in_thread(self.socket, {}, dismiss=True)
        r = askbus.ask([choice_question()], socket=self.socket)
        ui.join(5)
        self.assertEqual((r.reason, r.cancelled, r.answers), ("dismissed", True, {}))
        self.assertEqual(r.result.llm_content, "User dismissed ask_user dialog without answering.")
        with self.assertRaises(askbus.Dismissed) as cm:
            r.raise_for_outcome()
        self.assertIs(cm.exception.response, r)
        self.assertEqual(cm.exception.code, "dismissed")
        self.assertIsInstance(cm.exception, askbus.NotAnswered)

    def test_timeout(self) -> None:
        started = time.monotonic()
        r = askbus.ask([choice_question()], socket=self.socket, timeout_ms=150)
        self.assertGreaterEqual(time.monotonic() - started, 0.14)
        self.assertEqual((r.reason, r.cancelled), ("timeout", True))
        self.assertEqual(
            r.result.llm_content, "User did not answer the ask_user dialog within 0.15 seconds."
        )
        with self.assertRaises(askbus.TimedOut):
            r.raise_for_outcome()

    def test_no_ui_reject(self) -> None:
        r = askbus.ask([choice_question()], socket=self.socket, no_ui="reject")
        self.assertEqual((r.reason, r.cancelled), ("no-ui", True))
        with self.assertRaises(askbus.NoUi) as cm:
            r.raise_for_outcome()
        self.assertEqual(cm.exception.message, r.result.llm_content)

    def test_no_ui_wait_is_answered_by_a_later_ui(self) -> None:
        result: List[askbus.Response] = []
        t = threading.Thread(
            target=lambda: result.append(
                askbus.ask([choice_question()], socket=self.socket, no_ui="wait")
            )
        )
        t.start()
        wait_until(lambda: stats(self.socket)["pending"] == 1, what="the question to be pending")
        answer_in_thread(self.socket, {"0": "PostgreSQL"}).join(5)
        t.join(5)
        self.assertEqual(result[0].answers, {"0": "PostgreSQL"})

    def test_cancel_from_another_thread(self) -> None:
        withdrawn: List[askbus.Request] = []
        sub = askbus.subscribe(self.socket, on_withdrawn=withdrawn.append)
        self.addCleanup(sub.close)
        with askbus.Producer(self.socket) as producer:
            result: List[askbus.Response] = []
            t = threading.Thread(
                target=lambda: result.append(
                    producer.ask([choice_question()], correlation_id="to-cancel")
                )
            )
            t.start()
            req = next(iter(sub))
            self.assertEqual(req.correlation_id, "to-cancel")
            self.assertTrue(producer.cancel("to-cancel"))
            t.join(5)
            self.assertFalse(producer.cancel("to-cancel"), "no longer pending")
        self.assertEqual((result[0].reason, result[0].cancelled), ("withdrawn", True))
        with self.assertRaises(askbus.Withdrawn):
            result[0].raise_for_outcome()
        self.assertTrue(req.wait_withdrawn(5))
        self.assertEqual(req.withdraw_reason, "withdrawn")
        self.assertEqual([w.correlation_id for w in withdrawn], ["to-cancel"])


class RefusalTest(DaemonTestCase):
    daemon_args = ["--max-pending-per-connection", "2", "--max-frame-bytes", "4096"]

    def test_invalid_questions_carry_the_reference_message(self) -> None:
        cases = [
            c for c in load_json("ask_user_reference_cases.json")
            if not c["ok"] and set(c["params"]) == {"questions"}
        ]
        # A spread of the reference's distinct messages, not just the first few cases.
        by_message = {c["error"]: c for c in cases}
        chosen = list(by_message.values())[:25]
        self.assertGreaterEqual(len(chosen), 10)
        with askbus.Producer(self.socket) as producer:
            for case in chosen:
                with self.assertRaises(askbus.InvalidRequest) as cm:
                    producer.ask(case["params"]["questions"], correlation_id="bad-1")
                e = cm.exception
                self.assertEqual(e.message, case["error"])
                self.assertEqual(str(e), case["error"])
                self.assertEqual((e.code, e.correlation_id), ("invalid-request", "bad-1"))
                self.assertIsInstance(e, askbus.DaemonError)
            # The connection is still good after every refusal.
            r = producer.ask([choice_question()], no_ui="reject")
            self.assertEqual(r.reason, "no-ui")

    def test_invalid_request_fields(self) -> None:
        with self.assertRaises(askbus.InvalidRequest) as cm:
            askbus.ask([choice_question()], socket=self.socket, timeout_ms=0)
        self.assertEqual(cm.exception.message, "timeoutMs must be at least 1")
        with self.assertRaises(askbus.InvalidRequest) as cm:
            askbus.ask([choice_question()], socket=self.socket,
                       no_ui="maybe")  # type: ignore[arg-type]
        self.assertEqual(cm.exception.message, 'noUi must be "wait" or "reject", not "maybe"')

    def test_duplicate_correlation_id_across_producers(self) -> None:
        with askbus.Producer(self.socket) as first, askbus.Producer(self.socket) as second:
            t = threading.Thread(
                target=lambda: first.ask([choice_question()], correlation_id="same",
                                         timeout_ms=2000),
                daemon=True,
            )
            t.start()
            wait_until(lambda: stats(self.socket)["pending"] == 1, what="the first ask")
            with self.assertRaises(askbus.DuplicateCorrelationId) as cm:
                second.ask([choice_question()], correlation_id="same")
            self.assertEqual(cm.exception.correlation_id, "same")
            self.assertIn('"same" is already pending', cm.exception.message)
            # On the same producer the clash is caught before anything is sent.
            with self.assertRaises(askbus.DuplicateCorrelationId):
                first.ask([choice_question()], correlation_id="same")
            first.cancel("same")
            t.join(5)

    def test_too_many_pending(self) -> None:
        with askbus.Producer(self.socket) as producer:
            threads = [
                threading.Thread(
                    target=producer.ask, args=([choice_question()],),
                    kwargs={"timeout_ms": 3000, "correlation_id": f"p{i}"}, daemon=True,
                )
                for i in range(2)
            ]
            for t in threads:
                t.start()
            wait_until(lambda: stats(self.socket)["pending"] == 2, what="two pending asks")
            with self.assertRaises(askbus.TooManyPending) as cm:
                producer.ask([choice_question()])
            self.assertEqual(cm.exception.message,
                             "this connection already has 2 pending requests")
            for i in range(2):
                producer.cancel(f"p{i}")
            for t in threads:
                t.join(5)

    def test_frame_too_large_is_refused_before_sending(self) -> None:
        big = choice_question(question="x" * 5000)
        with askbus.Producer(self.socket) as producer:
            with self.assertRaises(askbus.FrameTooLarge):
                producer.ask([big])
            # Nothing reached the daemon, so the connection (shared by other asks) survives.
            self.assertEqual(producer.ask([choice_question()], no_ui="reject").reason, "no-ui")
        self.assertEqual(stats(self.socket)["errors"].get("frame-too-large", 0), 0)

    def test_bad_correlation_ids_are_refused_locally(self) -> None:
        with self.assertRaises(ValueError):
            askbus.ask([choice_question()], socket=self.socket, correlation_id="x" * 129)
        with self.assertRaises(ValueError):
            askbus.ask([choice_question()], socket=self.socket, correlation_id="")
        r = askbus.ask([choice_question()], socket=self.socket, correlation_id="é" * 128,
                       no_ui="reject")
        self.assertEqual(r.correlation_id, "é" * 128)

    def test_values_json_cannot_carry_are_refused_locally(self) -> None:
        with self.assertRaises(ValueError):
            askbus.ask([{"question": float("nan")}], socket=self.socket)
        with self.assertRaises(TypeError):
            askbus.ask([{"question": object()}], socket=self.socket)
        with self.assertRaises(TypeError):
            askbus.ask([choice_question()], socket=self.socket,
                       timeout_ms="10")  # type: ignore[arg-type]


class ClampedTimeoutTest(DaemonTestCase):
    daemon_args = ["--max-timeout-ms", "300", "--default-timeout-ms", "200"]

    def test_the_daemon_clamps_and_defaults_timeouts(self) -> None:
        with askbus.Producer(self.socket) as producer:
            assert producer.welcome is not None
            self.assertEqual((producer.welcome.max_timeout_ms,
                              producer.welcome.default_timeout_ms), (300, 200))
            r = producer.ask([choice_question()], timeout_ms=60_000)
            self.assertEqual(r.result.llm_content,
                             "User did not answer the ask_user dialog within 0.3 seconds.")
            r = producer.ask([choice_question()])
            self.assertEqual(r.result.llm_content,
                             "User did not answer the ask_user dialog within 0.2 seconds.")
            counters = producer.stats()
        self.assertEqual(counters["outcomes"]["timeout"], 2)


class UnreachableTest(unittest.TestCase):
    def test_daemon_unreachable_names_the_socket(self) -> None:
        path = f"/tmp/askbus-py-nothing-{os.getpid()}/askbus.sock"
        with self.assertRaises(askbus.DaemonUnreachable) as cm:
            askbus.ask([choice_question()], socket=path)
        self.assertEqual(cm.exception.socket_path, path)
        self.assertIn(path, str(cm.exception))
        self.assertEqual(cm.exception.code, "daemon-unreachable")
        with self.assertRaises(askbus.DaemonUnreachable):
            askbus.subscribe(path)


class ForkTest(DaemonTestCase):
    def test_a_forked_child_asks_on_its_own_io_thread(self) -> None:
        # The parent has started the shared I/O thread; the child must not wait on it.
        self.assertEqual(askbus.ask([choice_question()], socket=self.socket,
                                    no_ui="reject").reason, "no-ui")
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                r = askbus.ask([choice_question()], socket=self.socket, no_ui="reject")
                code = 0 if r.reason == "no-ui" else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode")
                         else status >> 8, 0)


class SharedProducerTest(DaemonTestCase):
    def test_threads_share_one_producer_and_each_gets_its_own_answer(self) -> None:
        n = 12
        sub = askbus.subscribe(self.socket)

        def ui() -> None:
            held = []
            for req in sub:
                held.append(req)
                if len(held) == n:
                    break
            # Answer in reverse order, each with text naming its own question.
            for req in reversed(held):
                req.answer({"0": req.questions[0]["question"].upper()})

        ui_thread = threading.Thread(target=ui, daemon=True)
        ui_thread.start()
        results: Dict[int, askbus.Response] = {}
        with askbus.Producer(self.socket, client="shared") as producer:
            def one(i: int) -> None:
                results[i] = producer.ask(
                    [{"question": f"question {i}?", "header": "H", "type": "text"}]
                )

            threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
        ui_thread.join(5)
        sub.close()
        self.assertEqual(sorted(results), list(range(n)))
        for i, r in results.items():
            self.assertEqual(r.answers, {"0": f"QUESTION {i}?"})
        self.assertEqual(len({r.correlation_id for r in results.values()}), n)


if __name__ == "__main__":
    unittest.main()
