"""The shared reference cases (recorded from @google/gemini-cli-core 0.61.0's AskUserTool,
in clients/rust/tests/data/) end to end through this client and the real daemon: what the reference
rejects raises InvalidRequest with its exact message; what it accepts reaches the UI
normalized exactly as the reference normalizes it; and the result a producer gets for the
reference's recorded answers is the reference's result."""

from __future__ import annotations

import asyncio
import unittest

from support import AsyncDaemonTestCase, load_json

import askbus
from askbus import aio


async def stop(task: "asyncio.Task[None]") -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


class ReferenceCasesTest(AsyncDaemonTestCase):
    async def test_validation_and_normalization_agree_with_the_reference(self) -> None:
        cases = [
            c for c in load_json("ask_user_reference_cases.json")
            if set(c["params"]) == {"questions"}
        ]
        self.assertGreater(len(cases), 900)
        disagreements = []
        # Many in flight at once, within the daemon's 128 pending per connection.
        limit = asyncio.Semaphore(64)
        async with aio.subscribe(self.socket) as sub, aio.AsyncProducer(self.socket) as producer:
            async def one(n: int, case: dict) -> None:
                cid = f"case-{n}"
                try:
                    async with limit:
                        r = await producer.ask(case["params"]["questions"], correlation_id=cid)
                except askbus.InvalidRequest as e:
                    if case["ok"] or e.message != case["error"]:
                        disagreements.append((n, "rejected", e.message))
                    return
                if not case["ok"] or r.reason != "dismissed":
                    disagreements.append((n, "accepted", r.reason))

            async def ui() -> None:
                async for req in sub:
                    n = int(req.correlation_id.split("-")[1])
                    if req.questions != cases[n]["normalized"]:
                        disagreements.append((n, "normalized", req.questions))
                    await req.dismiss()

            ui_task = asyncio.ensure_future(ui())
            await asyncio.gather(*(one(n, c) for n, c in enumerate(cases)))
            await stop(ui_task)
        self.assertEqual(disagreements, [])

    async def test_results_agree_with_the_reference(self) -> None:
        cases = load_json("ask_user_result_cases.json")
        self.assertEqual(len(cases), 120)
        async with aio.subscribe(self.socket) as sub, aio.AsyncProducer(self.socket) as producer:
            async def ui() -> None:
                async for req in sub:
                    case = cases[int(req.correlation_id.split("-")[1])]
                    if case["cancelled"]:
                        await req.dismiss()
                    else:
                        # In the order the reference's user gave them.
                        await req.answer({k: case["answers"][k] for k in case["answerOrder"]})

            ui_task = asyncio.ensure_future(ui())
            responses = await asyncio.gather(*(
                producer.ask(c["params"]["questions"], correlation_id=f"result-{n}")
                for n, c in enumerate(cases)
            ))
            await stop(ui_task)
        for case, r in zip(cases, responses):
            expected = case["result"]
            got = {
                "llmContent": r.result.llm_content,
                "returnDisplay": r.result.return_display,
                "data": r.result.data,
            }
            self.assertEqual(got, expected)
            self.assertEqual(r.cancelled, case["cancelled"])
            self.assertEqual(r.answers, {} if case["cancelled"] else case["answers"])


if __name__ == "__main__":
    unittest.main()
