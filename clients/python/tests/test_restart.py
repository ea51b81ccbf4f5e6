"""Issue 8's restart guarantee, end to end: the daemon is killed (SIGKILL) or stopped
(SIGTERM) mid-ask and started again on the same socket; producers resend, UIs resubscribe,
and every question still wanted is answered exactly once, with no UI seeing it twice. Also
connections that drop while the daemon lives on, and questions that never come back."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import unittest
from typing import List

from support import (
    AsyncDaemonTestCase,
    CuttableProxy,
    DaemonTestCase,
    choice_question,
    stats,
    wait_until,
)

import askbus
from askbus import aio


def ask_in_thread(socket: str, results: list, **kw: object) -> threading.Thread:
    def run() -> None:
        try:
            results.append(askbus.ask([choice_question()], socket=socket, **kw))  # type: ignore
        except Exception as e:  # inspected by the test
            results.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def records_for(daemon: object, cid: str) -> List[str]:
    return [r["reason"] for r in daemon.records() if r["correlationId"] == cid]  # type: ignore


class RestartTest(DaemonTestCase):
    def restart_mid_ask(self, sig: int) -> None:
        yielded: List[askbus.Request] = []
        withdrawn: List[askbus.Request] = []
        sub = askbus.subscribe(self.socket, on_withdrawn=withdrawn.append, resume_grace=5)
        self.addCleanup(sub.close)
        it = iter(sub)
        results: list = []
        t = ask_in_thread(self.socket, results, correlation_id="survivor", timeout_ms=30_000,
                          client="restart-agent")
        req = next(it)
        yielded.append(req)
        self.daemon.restart(sig)
        # The producer asks the new daemon again; the UI is subscribed to it again.
        wait_until(lambda: stats(self.socket)["pending"] == 1 and stats(self.socket)["uis"] == 1,
                   what="the question to reach the restarted daemon")
        self.assertTrue(req.pending, "the UI keeps the question across the restart")
        self.assertEqual(req.producer.client, "restart-agent")
        self.assertEqual(req.answer({"0": "SQLite"}), "answered")
        t.join(5)
        self.assertEqual(len(results), 1)
        self.assertIsInstance(results[0], askbus.Response)
        self.assertEqual(results[0].answers, {"0": "SQLite"})
        self.assertEqual(results[0].correlation_id, "survivor")
        # Nothing was yielded twice: the next question the UI gets is a new one.
        t2 = ask_in_thread(self.socket, results, correlation_id="after")
        after = next(it)
        self.assertEqual(after.correlation_id, "after")
        after.dismiss()
        t2.join(5)
        self.assertEqual(withdrawn, [])
        sub.close()
        self.daemon.stop()

    def test_sigkill_mid_ask_is_answered_once(self) -> None:
        self.restart_mid_ask(signal.SIGKILL)
        # The killed daemon wrote nothing for it; the new one, one answer.
        self.assertEqual(records_for(self.daemon, "survivor"), ["answered"])

    def test_sigterm_mid_ask_is_answered_once(self) -> None:
        self.restart_mid_ask(signal.SIGTERM)
        # The stopping daemon ended it `shutdown`; the producer asked the next one, which
        # recorded the single answer.
        self.assertEqual(records_for(self.daemon, "survivor"), ["shutdown", "answered"])

    def test_answer_given_while_the_daemon_is_down(self) -> None:
        with askbus.subscribe(self.socket, resume_grace=5) as sub:
            results: list = []
            t = ask_in_thread(self.socket, results, correlation_id="offline", timeout_ms=30_000)
            req = next(iter(sub))
            self.daemon.stop(signal.SIGKILL)
            acks: list = []
            answering = threading.Thread(target=lambda: acks.append(req.answer({"0": "PG"})))
            answering.start()
            time.sleep(0.3)
            self.assertEqual(acks, [], "no daemon, so no acknowledgement yet")
            self.daemon.start()
            answering.join(10)
            t.join(5)
        self.assertEqual(acks, ["answered"])
        self.assertEqual(results[0].answers, {"0": "PG"})
        self.daemon.stop()
        self.assertEqual(records_for(self.daemon, "offline"), ["answered"])

    def test_a_question_that_does_not_come_back_is_withdrawn_as_lost(self) -> None:
        withdrawn: List[askbus.Request] = []
        with askbus.subscribe(self.socket, on_withdrawn=withdrawn.append,
                              resume_grace=0.3) as sub:
            producer = askbus.Producer(self.socket, reconnect=False)
            self.addCleanup(producer.close)
            results: list = []

            def run() -> None:
                try:
                    producer.ask([choice_question()], correlation_id="orphan")
                except askbus.ConnectionLost as e:
                    results.append(e)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            req = next(iter(sub))
            self.daemon.restart(signal.SIGKILL)
            t.join(5)
            self.assertEqual(len(results), 1, "without reconnect the ask ends ConnectionLost")
            self.assertTrue(req.wait_withdrawn(5))
            self.assertEqual(req.withdraw_reason, "lost")
            self.assertEqual(withdrawn, [req])
            with self.assertRaises(askbus.NotPending) as cm:
                req.answer({"0": "x"})
            self.assertEqual(cm.exception.withdraw_reason, "lost")

    def test_deadline_passing_while_the_daemon_is_dead(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            results: list = []
            t = ask_in_thread(self.socket, results, correlation_id="late", timeout_ms=600)
            req = next(iter(sub))
            self.daemon.stop(signal.SIGKILL)
            # The UI times the question out itself: no daemon will tell it.
            self.assertTrue(req.wait_withdrawn(5))
            self.assertEqual(req.withdraw_reason, "timeout")
            t.join(5)
        self.assertIsInstance(results[0], askbus.DaemonUnreachable)
        self.assertEqual(results[0].socket_path, self.socket)
        self.assertEqual(results[0].correlation_id, "late")
        self.assertIn("deadline", str(results[0]))

    def test_deadline_passing_after_sigterm_returns_the_shutdown_response(self) -> None:
        results: list = []
        t = ask_in_thread(self.socket, results, correlation_id="stopped", timeout_ms=500)
        wait_until(lambda: stats(self.socket)["pending"] == 1, what="the question")
        started = time.monotonic()
        self.daemon.stop(signal.SIGTERM)
        t.join(5)
        # Not at once: the producer waited for a daemon to come back until the deadline.
        self.assertGreater(time.monotonic() - started, 0.2)
        r = results[0]
        self.assertIsInstance(r, askbus.Response)
        self.assertEqual((r.reason, r.cancelled), ("shutdown", True))
        with self.assertRaises(askbus.Shutdown):
            r.raise_for_outcome()


class ManyQuestionsRestartTest(AsyncDaemonTestCase):
    async def test_every_pending_question_survives_a_sigkill(self) -> None:
        n = 25
        yielded: List[str] = []
        async with aio.subscribe(self.socket, resume_grace=5) as sub:
            async with aio.AsyncProducer(self.socket, client="many") as producer:
                asks = [
                    asyncio.ensure_future(
                        producer.ask([choice_question()], correlation_id=f"m{i}",
                                     timeout_ms=30_000)
                    )
                    for i in range(n)
                ]
                held = []
                async for req in sub:
                    yielded.append(req.correlation_id)
                    held.append(req)
                    if len(held) == n:
                        break
                await asyncio.get_running_loop().run_in_executor(
                    None, self.daemon.restart, signal.SIGKILL
                )
                # Answer each once the new daemon has it; every answer needs it back.
                acks = await asyncio.wait_for(
                    asyncio.gather(*(r.answer({"0": r.correlation_id}) for r in held)), 15
                )
                self.assertEqual(acks, ["answered"] * n)
                responses = await asyncio.gather(*asks)
        self.assertEqual([r.answers["0"] for r in responses], [f"m{i}" for i in range(n)])
        self.assertEqual(sorted(yielded), sorted(f"m{i}" for i in range(n)))
        self.daemon.stop()
        answered = [r for r in self.daemon.records() if r["reason"] == "answered"]
        self.assertEqual(sorted(r["correlationId"] for r in answered),
                         sorted(f"m{i}" for i in range(n)))


class DroppedConnectionTest(DaemonTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.proxy = CuttableProxy(os.path.join(self.tmp, "proxy.sock"), self.socket)
        self.addCleanup(self.proxy.close)

    def test_a_resend_that_finds_the_id_still_pending_is_retried(self) -> None:
        with askbus.subscribe(self.socket) as sub:
            it = iter(sub)
            results: list = []
            t = ask_in_thread(self.proxy.listen, results, correlation_id="held",
                              timeout_ms=30_000)
            first = next(it)
            # The producer's side drops; the daemon keeps its side (and the question) 0.5 s.
            self.proxy.cut_clients(hold_upstream=0.5)
            self.assertTrue(first.wait_withdrawn(5))
            self.assertEqual(first.withdraw_reason, "producer-gone")
            again = next(it)
            self.assertEqual(again.correlation_id, "held")
            self.assertEqual(again.answer({"0": "SQLite"}), "answered")
            t.join(5)
        self.assertIn(b"duplicate-correlation-id", bytes(self.proxy.from_daemon))
        self.assertEqual(results[0].answers, {"0": "SQLite"})
        self.daemon.stop()
        reasons = records_for(self.daemon, "held")
        # Each refused resend is logged as a rejection; the question itself ended twice: the
        # first connection's copy gone with it, and the resent one answered.
        self.assertIn("rejected", reasons)
        self.assertEqual([r for r in reasons if r != "rejected"], ["producer-gone", "answered"])

    def test_a_ui_that_reconnects_takes_the_replay_without_duplicates(self) -> None:
        with askbus.subscribe(self.proxy.listen, resume_grace=5) as sub:
            it = iter(sub)
            results: list = []
            ask_in_thread(self.socket, results, correlation_id="one")
            first = next(it)
            self.proxy.cut_clients(hold_upstream=0)
            # Asked while the UI is away: it arrives in the replay.
            ask_in_thread(self.socket, results, correlation_id="two")
            second = next(it)
            self.assertEqual(second.correlation_id, "two")
            self.assertTrue(first.pending)
            self.assertEqual([r.correlation_id for r in sub.pending()], ["one", "two"])
            self.assertEqual(first.answer({"0": "a"}), "answered")
            self.assertEqual(second.answer({"0": "b"}), "answered")
        wait_until(lambda: len(results) == 2, what="both answers")
        self.assertEqual(sorted(r.answers["0"] for r in results), ["a", "b"])


if __name__ == "__main__":
    unittest.main()
