"""Approvals through the real daemon: a producer's ``confirm`` (allow, allow always, deny with
a reason, dismissal, timeout, refusal, daemon gone: only a person's approval is
``confirmed``) and a UI's ``allow``/``deny``/``dismiss``, checked against the golden frames
of proto/examples."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from typing import Any, Dict, List

from support import REPO, AsyncDaemonTestCase, DaemonTestCase

import askbus
from askbus import aio

EXAMPLES = REPO / "proto" / "examples"


def example(name: str) -> Dict[str, Any]:
    with open(EXAMPLES / name, encoding="utf-8") as f:
        data: Dict[str, Any] = json.load(f)
    return data


GOLDEN = example("client/tool-confirmation-request.json")
GOLDEN_ID = GOLDEN["correlationId"]


def golden_kwargs() -> Dict[str, Any]:
    return dict(
        details=GOLDEN["details"],
        outcomes=GOLDEN["outcomes"],
        timeout_ms=GOLDEN["timeoutMs"],
        correlation_id=GOLDEN_ID,
    )


def exec_call(command: str) -> Dict[str, Any]:
    root = command.split()[0]
    return {
        "tool_call": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": root, "rootCommands": [root]},
    }


class Ui:
    """A subscription and its approvals as they arrive."""

    def __init__(self, socket: str) -> None:
        self.sub = aio.AsyncSubscription(socket, client="test-ui/1")

    async def next_approval(self) -> aio.AsyncApproval:
        async for item in self.sub:
            if isinstance(item, aio.AsyncApproval):
                return item
        raise AssertionError("the subscription ended")


class AsyncApprovalTest(AsyncDaemonTestCase):
    async def asyncSetUp(self) -> None:
        await super().asyncSetUp()
        self.ui = Ui(self.socket)
        await self.ui.sub.open()
        self.producer = aio.AsyncProducer(self.socket, client="my-agent/1.2.0")
        await self.producer.connect()

    async def asyncTearDown(self) -> None:
        await self.producer.close()
        await self.ui.sub.close()

    async def test_allow_once_with_the_golden_request(self) -> None:
        asked = asyncio.ensure_future(self.producer.confirm(GOLDEN["toolCall"], **golden_kwargs()))
        a = await self.ui.next_approval()
        shown = example("server/tool-confirmation-request.json")
        self.assertEqual(a.correlation_id, GOLDEN_ID)
        self.assertEqual(a.tool_call, shown["toolCall"])
        self.assertEqual(a.details, shown["details"])
        self.assertEqual(a.outcomes, shown["outcomes"])
        self.assertEqual(a.tool, "run_shell_command")
        self.assertEqual(a.questions, [])
        self.assertEqual(a.producer.client, "my-agent/1.2.0")
        with self.assertRaises(TypeError):
            await a.answer({"0": "Yes"})
        self.assertEqual(await a.allow(), "answered")
        ack = example("server/tool-confirmation-ack.json")
        assert a.decision is not None
        self.assertEqual((a.decision.reason, a.decision.confirmed, a.decision.outcome),
                         (ack["reason"], ack["confirmed"], ack["outcome"]))
        c = await asked
        want = example("server/tool-confirmation-response.answered.json")
        self.assertEqual((c.correlation_id, c.confirmed, c.outcome, c.reason, c.message),
                         (want["correlationId"], True, want["outcome"], want["reason"], None))
        self.assertTrue(c.decided)

    async def test_allow_always_and_deny_with_a_reason(self) -> None:
        asked = asyncio.ensure_future(self.producer.confirm(GOLDEN["toolCall"], **golden_kwargs()))
        a = await self.ui.next_approval()
        self.assertEqual(await a.allow("proceed_always"), "answered")
        c = await asked
        self.assertEqual((c.confirmed, c.outcome), (True, "proceed_always"))

        asked = asyncio.ensure_future(self.producer.confirm(GOLDEN["toolCall"], **golden_kwargs()))
        a = await self.ui.next_approval()
        denied = example("server/tool-confirmation-response.denied.json")
        self.assertEqual(await a.deny(denied["message"]), "answered")
        c = await asked
        self.assertEqual((c.confirmed, c.outcome, c.reason, c.message),
                         (False, "cancel", "answered", denied["message"]))
        self.assertTrue(c.decided)

    async def test_an_outcome_not_offered_is_refused_then_dismissed(self) -> None:
        call = exec_call("cargo build")
        asked = asyncio.ensure_future(self.producer.confirm(call["tool_call"],
                                                            details=call["details"]))
        a = await self.ui.next_approval()
        self.assertEqual(a.outcomes, ["proceed_once", "cancel"])
        with self.assertRaises(askbus.InvalidResponse):
            await a.allow("proceed_always")
        with self.assertRaises(ValueError):
            await a.allow("cancel")
        self.assertFalse(asked.done())
        self.assertEqual(await a.dismiss(), "dismissed")
        c = await asked
        want = example("server/tool-confirmation-response.dismissed.json")
        self.assertEqual((c.confirmed, c.outcome, c.reason, c.message),
                         (False, "cancel", "dismissed", want["message"]))
        self.assertFalse(c.decided)

    async def test_timeout_cancel_and_refusal_are_never_approvals(self) -> None:
        call = exec_call("ls")
        c = await self.producer.confirm(call["tool_call"], details=call["details"],
                                        timeout_ms=1000)
        self.assertEqual((c.confirmed, c.outcome, c.reason), (False, "cancel", "timeout"))
        self.assertEqual(
            c.message, "Nobody approved the tool call within 1 second, so it was not approved.")

        asked = asyncio.ensure_future(self.producer.confirm(
            call["tool_call"], details=call["details"], correlation_id="to-cancel"))
        while (await self.ui.next_approval()).correlation_id != "to-cancel":
            pass
        self.assertTrue(await self.producer.cancel("to-cancel"))
        c = await asked
        self.assertEqual((c.confirmed, c.reason), (False, "withdrawn"))

        c = await self.producer.confirm(call["tool_call"],
                                        details={"type": "shell", "title": "T"})
        self.assertEqual((c.confirmed, c.reason), (False, "refused"))
        self.assertIsInstance(c.error, askbus.InvalidRequest)
        self.assertIn("details.type must be one of", str(c.message))

    async def test_a_killed_daemon_is_never_an_approval(self) -> None:
        call = exec_call("rm -rf build")
        asked = asyncio.ensure_future(self.producer.confirm(
            call["tool_call"], details=call["details"], timeout_ms=1500))
        await self.ui.next_approval()
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.daemon.stop(signal.SIGKILL))
        c = await asked
        self.assertEqual((c.confirmed, c.outcome, c.reason), (False, "cancel", "daemon-lost"))
        self.assertIsInstance(c.error, askbus.DaemonUnreachable)
        self.assertIn("not approved", str(c.message))

    async def test_a_producer_with_no_daemon_is_not_confirmed(self) -> None:
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.daemon.stop(signal.SIGKILL))
        lonely = aio.AsyncProducer(self.socket)
        call = exec_call("ls")
        c = await lonely.confirm(call["tool_call"], details=call["details"])
        await lonely.close()
        self.assertEqual((c.confirmed, c.reason), (False, "daemon-lost"))


class BlockingApprovalTest(DaemonTestCase):
    def test_confirm_and_decide_with_the_blocking_api(self) -> None:
        results: List[askbus.Confirmation] = []
        producer = askbus.Producer(self.socket, client="my-agent/1.2.0")
        self.addCleanup(producer.close)

        def ask() -> None:
            results.append(producer.confirm(GOLDEN["toolCall"], **golden_kwargs()))

        with askbus.subscribe(self.socket, client="test-ui/1") as sub:
            t = threading.Thread(target=ask, daemon=True)
            t.start()
            a = next(iter(sub))
            self.assertIsInstance(a, askbus.Approval)
            assert isinstance(a, askbus.Approval)
            self.assertEqual(a.tool, "run_shell_command")
            self.assertEqual(a.outcomes, ["proceed_once", "proceed_always", "cancel"])
            self.assertEqual(a.details, GOLDEN["details"])
            self.assertEqual(a.deny("no"), "answered")
            t.join(30)
        self.assertEqual(len(results), 1)
        self.assertEqual((results[0].confirmed, results[0].message), (False, "no"))


if __name__ == "__main__":
    import unittest

    unittest.main()
