"""The asyncio API against the real daemon: many concurrent asks on one connection,
cancellation, async subscriptions and their events."""

from __future__ import annotations

import asyncio
import unittest

from support import AsyncDaemonTestCase, choice_question, stats

import askbus
from askbus import aio


def text_question(text: str) -> dict:
    return {"question": text, "header": "H", "type": "text"}


class ConcurrentAsksTest(AsyncDaemonTestCase):
    async def test_concurrent_asks_on_one_connection_are_matched(self) -> None:
        n = 40
        async with aio.subscribe(self.socket, client="aio-ui") as sub:
            async def ui() -> None:
                held = []
                async for req in sub:
                    held.append(req)
                    if len(held) == n:
                        break
                # Answer in an order unrelated to the asking order, concurrently.
                held.sort(key=lambda r: r.correlation_id)
                acks = await asyncio.gather(
                    *(r.answer({"0": r.questions[0]["question"][::-1]}) for r in held)
                )
                self.assertEqual(acks, ["answered"] * n)

            ui_task = asyncio.ensure_future(ui())
            async with aio.AsyncProducer(self.socket, client="aio-agent") as producer:
                responses = await asyncio.gather(
                    *(producer.ask([text_question(f"q{i:02}?")]) for i in range(n))
                )
                self.assertEqual(producer.pending, [])
            await ui_task
        for i, r in enumerate(responses):
            self.assertEqual(r.answers, {"0": f"q{i:02}?"[::-1]})
        self.assertEqual(stats(self.socket)["connectionsTotal"], 3)  # ui, producer, stats

    async def test_outcomes_mixed_on_one_connection(self) -> None:
        async with aio.AsyncProducer(self.socket) as producer:
            async with aio.subscribe(self.socket) as sub:
                answered = asyncio.ensure_future(producer.ask([choice_question()],
                                                              correlation_id="a"))
                timed_out = asyncio.ensure_future(producer.ask([choice_question()],
                                                               timeout_ms=100))
                invalid = asyncio.ensure_future(producer.ask([{"question": "?"}]))
                dismissed = asyncio.ensure_future(producer.ask([choice_question()],
                                                               correlation_id="d"))
                seen = {}
                async for req in sub:
                    seen[req.correlation_id] = req
                    if {"a", "d"} <= set(seen):
                        break
                await seen["d"].dismiss()
                await seen["a"].answer({"0": "SQLite"})
                self.assertEqual((await answered).answers, {"0": "SQLite"})
                self.assertEqual((await dismissed).reason, "dismissed")
                self.assertEqual((await timed_out).reason, "timeout")
                with self.assertRaises(askbus.InvalidRequest):
                    await invalid

    async def test_cancelling_the_task_withdraws_the_question(self) -> None:
        async with aio.subscribe(self.socket) as sub:
            async with aio.AsyncProducer(self.socket) as producer:
                task = asyncio.ensure_future(producer.ask([choice_question()]))
                req = await sub.__anext__()
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                self.assertEqual(await asyncio.wait_for(req.wait_withdrawn(), 5), "withdrawn")

    async def test_wait_for_timeout_on_the_client_side_withdraws_too(self) -> None:
        async with aio.subscribe(self.socket) as sub:
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(aio.ask([choice_question()], socket=self.socket), 0.2)
            req = await sub.__anext__()
            # Withdrawn by the producer before its connection closed, not left to go stale.
            self.assertEqual(await asyncio.wait_for(req.wait_withdrawn(), 5), "withdrawn")

    async def test_cancel_method(self) -> None:
        async with aio.AsyncProducer(self.socket) as producer:
            async with aio.subscribe(self.socket) as sub:
                task = asyncio.ensure_future(producer.ask([choice_question()],
                                                          correlation_id="c"))
                await sub.__anext__()
                self.assertTrue(await producer.cancel("c"))
                r = await task
                self.assertEqual((r.reason, r.cancelled), ("withdrawn", True))
                self.assertFalse(await producer.cancel("c"))

    async def test_one_shot_ask_and_stats(self) -> None:
        r = await aio.ask([choice_question()], socket=self.socket, no_ui="reject")
        self.assertEqual(r.reason, "no-ui")
        counters = await aio.stats(self.socket)
        self.assertEqual(counters["outcomes"]["no-ui"], 1)
        self.assertTrue(counters["server"].startswith("askbusd/"))


class AsyncSubscriptionTest(AsyncDaemonTestCase):
    async def test_events_in_order_with_withdrawals(self) -> None:
        seen: list = []
        sub = aio.subscribe(self.socket, on_withdrawn=seen.append)
        try:
            await sub.open()
            async with aio.AsyncProducer(self.socket) as producer:
                short = asyncio.ensure_future(
                    producer.ask([choice_question()], timeout_ms=100, correlation_id="short")
                )
                events = sub.events()
                first = await events.__anext__()
                self.assertIsInstance(first, aio.AsyncRequest)
                w = await events.__anext__()
                self.assertIsInstance(w, askbus.Withdrawal)
                self.assertEqual((w.correlation_id, w.reason), ("short", "timeout"))
                self.assertIs(w.request, first)
                self.assertEqual(seen, [first])
                self.assertEqual((await short).reason, "timeout")
        finally:
            await sub.close()

    async def test_async_for_without_open_and_close_ends_it(self) -> None:
        sub = aio.subscribe(self.socket)
        got = []

        acked = asyncio.Event()

        async def consume() -> None:
            async for req in sub:
                got.append(req.correlation_id)
                await req.answer({"0": "x"})
                acked.set()

        consumer = asyncio.ensure_future(consume())
        r = await aio.ask([choice_question()], socket=self.socket, correlation_id="first")
        self.assertEqual(r.answers, {"0": "x"})
        # The producer may hear before the UI's acknowledgement is read; closing before it
        # would (rightly) end that answer with ConnectionLost.
        await asyncio.wait_for(acked.wait(), 5)
        await sub.close()
        await asyncio.wait_for(consumer, 5)
        self.assertEqual(got, ["first"])

    async def test_subscribe_unreachable(self) -> None:
        with self.assertRaises(askbus.DaemonUnreachable):
            async with aio.subscribe(self.socket + ".missing"):
                pass


if __name__ == "__main__":
    unittest.main()
