"""The blocking UI API against the real daemon: replay, live questions, withdrawals (in
every form a UI can learn of them), acknowledgements, and losing to another UI."""

from __future__ import annotations

import os
import threading
import unittest
from typing import List

from support import DaemonTestCase, choice_question, stats, wait_until

import askbus
from askbus import answers


def ask_in_thread(socket: str, questions: list, results: list, **kw: object) -> threading.Thread:
    def run() -> None:
        try:
            results.append(askbus.ask(questions, socket=socket, **kw))  # type: ignore[arg-type]
        except Exception as e:  # the test inspects it
            results.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class ReplayTest(DaemonTestCase):
    def test_replay_in_order_with_normalized_questions_and_producer(self) -> None:
        producer = askbus.Producer(self.socket, client="replay-agent/2")
        self.addCleanup(producer.close)
        results: List[askbus.Response] = []
        threads = []
        for i in range(3):
            q = {"question": f"line one\\nline two {i}?", "header": f"H{i}", "type": "text"}
            t = threading.Thread(
                target=lambda q=q, i=i: results.append(
                    producer.ask([q], correlation_id=f"r{i}", timeout_ms=60_000)
                ),
                daemon=True,
            )
            t.start()
            threads.append(t)
            wait_until(lambda i=i: stats(self.socket)["pending"] == i + 1, what="pending")
        with askbus.subscribe(self.socket, client="replay-ui") as sub:
            it = iter(sub)
            got = [next(it) for _ in range(3)]
            self.assertEqual([r.correlation_id for r in got], ["r0", "r1", "r2"])
            for i, req in enumerate(got):
                # The daemon normalizes: the double-escaped newline became a real one.
                self.assertEqual(req.questions[0]["question"], f"line one\nline two {i}?")
                self.assertEqual(req.producer.client, "replay-agent/2")
                self.assertEqual(req.producer.pid, os.getpid())
                self.assertEqual(req.producer.uid, os.geteuid())
                self.assertTrue(0 < req.timeout_ms <= 60_000)
                self.assertTrue(req.pending)
            self.assertEqual([r.correlation_id for r in sub.pending()], ["r0", "r1", "r2"])
            for req in got:
                self.assertEqual(req.answer({"0": "ok " + req.correlation_id}), "answered")
                self.assertEqual(req.outcome, "answered")
                self.assertFalse(req.pending)
        for t in threads:
            t.join(5)
        self.assertEqual(sorted(r.answers["0"] for r in results), ["ok r0", "ok r1", "ok r2"])

    def test_live_questions_follow_the_replay(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            results: list = []
            t = ask_in_thread(self.socket, [choice_question()], results, correlation_id="live")
            req = next(iter(sub))
            self.assertEqual(req.correlation_id, "live")
            self.assertEqual(req.dismiss(), "dismissed")
            t.join(5)
        self.assertEqual(results[0].reason, "dismissed")


class WithdrawalTest(DaemonTestCase):
    def test_timeout_withdrawal_reaches_attribute_callback_wait_and_events(self) -> None:
        called: List[askbus.Request] = []
        with askbus.subscribe(self.socket, on_withdrawn=called.append) as sub:
            results: list = []
            ask_in_thread(self.socket, [choice_question()], results, timeout_ms=200,
                          correlation_id="t1")
            events = sub.events()
            req = next(events)
            self.assertIsInstance(req, askbus.Request)
            self.assertFalse(req.withdrawn)
            self.assertTrue(req.wait_withdrawn(5))
            self.assertEqual((req.withdrawn, req.withdraw_reason), (True, "timeout"))
            self.assertFalse(req.pending)
            w = next(events)
            self.assertIsInstance(w, askbus.Withdrawal)
            self.assertEqual((w.correlation_id, w.reason), ("t1", "timeout"))
            self.assertIs(w.request, req)
            self.assertEqual(called, [req])
            # Answering what is gone says so, with the reason.
            with self.assertRaises(askbus.NotPending) as cm:
                req.answer({"0": "SQLite"})
            self.assertEqual(cm.exception.withdraw_reason, "timeout")

    def test_producer_gone(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            producer = askbus.Producer(self.socket)
            outcome: list = []

            def run() -> None:
                try:
                    producer.ask([choice_question()])
                except askbus.ConnectionLost as e:
                    outcome.append(e)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            req = next(iter(sub))
            producer.close()
            self.assertTrue(req.wait_withdrawn(5))
            self.assertEqual(req.withdraw_reason, "producer-gone")
            t.join(5)
            self.assertEqual(len(outcome), 1, "the closed producer's ask ends with ConnectionLost")

    def test_iteration_skips_questions_withdrawn_before_they_were_taken(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            results: list = []
            ask_in_thread(self.socket, [choice_question()], results, timeout_ms=50,
                          correlation_id="gone")
            wait_until(lambda: len(results) == 1, what="the short question to time out")
            ask_in_thread(self.socket, [choice_question()], results, correlation_id="kept")
            req = next(iter(sub))
            self.assertEqual(req.correlation_id, "kept")
            req.dismiss()

    def test_breaking_out_of_the_loop_unsubscribes(self) -> None:
        import gc

        results: list = []
        t = ask_in_thread(self.socket, [choice_question()], results, correlation_id="b")
        for req in askbus.subscribe(self.socket, on_withdrawn=lambda r: None):
            req.dismiss()
            break
        del req
        gc.collect()
        wait_until(lambda: stats(self.socket)["uis"] == 0, what="the dropped UI to leave")
        t.join(5)
        producer = askbus.Producer(self.socket)
        producer.connect()
        wait_until(lambda: stats(self.socket)["connections"] == 2, what="producer + stats")
        del producer
        gc.collect()
        wait_until(lambda: stats(self.socket)["connections"] == 1, what="the dropped producer")

    def test_close_ends_iteration(self) -> None:
        sub = askbus.subscribe(self.socket)
        threading.Timer(0.1, sub.close).start()
        self.assertEqual(list(sub), [])


class AckTest(DaemonTestCase):
    def test_lost_to_another_ui(self) -> None:
        with askbus.subscribe(self.socket, client="a") as a, \
                askbus.subscribe(self.socket, client="b") as b:
            results: list = []
            t = ask_in_thread(self.socket, [choice_question()], results, correlation_id="race")
            req_a, req_b = next(iter(a)), next(iter(b))
            self.assertEqual(req_a.answer({"0": "SQLite"}), "answered")
            self.assertTrue(req_b.wait_withdrawn(5))
            self.assertEqual(req_b.withdraw_reason, "answered")
            with self.assertRaises(askbus.NotPending) as cm:
                req_b.answer({"0": "PostgreSQL"})
            self.assertEqual(cm.exception.withdraw_reason, "answered")
            self.assertEqual(cm.exception.correlation_id, "race")
            t.join(5)
        self.assertEqual(results[0].answers, {"0": "SQLite"})

    def test_simultaneous_answers_exactly_one_wins(self) -> None:
        uis = [askbus.subscribe(self.socket, client=f"ui{i}") for i in range(3)]
        for ui in uis:
            self.addCleanup(ui.close)
        results: list = []
        t = ask_in_thread(self.socket, [choice_question()], results)
        reqs = [next(iter(ui)) for ui in uis]
        outcomes: list = []
        barrier = threading.Barrier(3)

        def answer(i: int) -> None:
            barrier.wait()
            try:
                outcomes.append((i, reqs[i].answer({"0": f"from ui{i}"})))
            except askbus.NotPending:
                outcomes.append((i, "lost"))

        threads = [threading.Thread(target=answer, args=(i,)) for i in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(5)
        t.join(5)
        winners = [i for i, o in outcomes if o == "answered"]
        self.assertEqual(len(winners), 1, outcomes)
        self.assertEqual(results[0].answers, {"0": f"from ui{winners[0]}"})

    def test_out_of_range_answer_is_refused_and_the_question_stays(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            results: list = []
            t = ask_in_thread(self.socket, [choice_question()], results)
            req = next(iter(sub))
            with self.assertRaises(askbus.InvalidResponse) as cm:
                req.answer({"3": "x"})
            self.assertEqual(
                cm.exception.message,
                'answers key "3" is out of range: the request has 1 question(s)',
            )
            self.assertTrue(req.pending)
            self.assertEqual(req.answer({0: "SQLite"}), "answered")
            with self.assertRaises(askbus.NotPending):
                req.answer({0: "again"})
            t.join(5)
        self.assertEqual(results[0].answers, {"0": "SQLite"})

    def test_answer_from_a_callback_thread_is_refused(self) -> None:
        errors: list = []

        def on_withdrawn(req: askbus.Request) -> None:
            try:
                req.dismiss()
            except RuntimeError as e:
                errors.append(e)

        with askbus.subscribe(self.socket, on_withdrawn=on_withdrawn) as sub:
            results: list = []
            ask_in_thread(self.socket, [choice_question()], results, timeout_ms=50)
            req = next(iter(sub))
            self.assertTrue(req.wait_withdrawn(5))
            wait_until(lambda: errors, what="the callback to run")
        self.assertIn("callback", str(errors[0]))


class WatchTest(DaemonTestCase):
    def test_an_observer_sees_who_and_how_long_but_no_text(self) -> None:
        with askbus.watch(self.socket, client="ops/1") as watch:
            events = iter(watch)
            # No UI yet: answered no-ui at once, so it never was pending (no request event).
            r = askbus.ask([choice_question()], socket=self.socket, no_ui="reject",
                           correlation_id="w0")
            self.assertEqual(r.reason, "no-ui")
            with askbus.subscribe(self.socket, client="watched-ui") as sub:
                results: list = []
                t = ask_in_thread(self.socket, [choice_question()], results,
                                  correlation_id="w1", client="watched-agent")
                next(iter(sub)).answer({"0": "SQLite"})
                t.join(5)
            seen = [next(events) for _ in range(3)]
        self.assertEqual([(e.correlation_id, e.event) for e in seen],
                         [("w0", "no-ui"), ("w1", "request"), ("w1", "answered")])
        request, answered = seen[1:]
        self.assertEqual(request.producer.client, "watched-agent")
        self.assertEqual((request.headers, request.question_types), (["Database"], ["choice"]))
        self.assertIsNotNone(request.timeout_ms)
        self.assertIsNotNone(answered.ui)
        assert answered.ui is not None
        self.assertEqual(answered.ui.client, "watched-ui")
        self.assertIsNotNone(answered.latency_ms)

    def test_close_ends_the_iteration(self) -> None:
        watch = askbus.watch(self.socket)
        threading.Timer(0.1, watch.close).start()
        self.assertEqual(list(watch), [])


class DialogEncodingTest(DaemonTestCase):
    def test_a_ui_using_the_answer_helpers(self) -> None:
        questions = [
            choice_question("Database"),
            choice_question("Features", ("Auth", "Logs", "Metrics"), multi=True,
                            question="Which features?"),
            {"question": "Migrate?", "header": "Migrate", "type": "yesno"},
            {"question": "Name?", "header": "Name", "type": "text"},
        ]
        with askbus.subscribe(self.socket) as sub:
            results: list = []
            t = ask_in_thread(self.socket, questions, results)
            req = next(iter(sub))
            q = req.questions
            req.answer(answers.collect({
                0: answers.choice(q[0], other="  MySQL\n"),
                1: answers.multi(q[1], ["Metrics", 0], other=" tracing "),
                2: answers.yesno(False),
                3: answers.text(" \u3000 "),  # blank: left out, as the dialog does
            }))
            t.join(5)
        r = results[0]
        self.assertEqual(r.answers, {"0": "MySQL", "1": "Auth, Metrics, tracing", "2": "No"})
        self.assertEqual(
            r.result.return_display,
            "**User answered:**\n  Database → MySQL\n  Features → Auth, Metrics, tracing\n"
            "  Migrate → No",
        )
        self.assertEqual(r.result.data["ask_user"]["answer_count"], 3)


if __name__ == "__main__":
    unittest.main()
