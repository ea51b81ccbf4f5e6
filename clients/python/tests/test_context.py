"""Request context through the real daemon: what a Python producer says about itself (its
options, ``ASKBUS_*`` variables, an ask's own override) reaches a filtered UI, a UI filtered
to another project never sees the question (live or replayed), telemetry carries agent and
project, and every bad value is refused with an error naming its field."""

from __future__ import annotations

import os
import threading
import unittest
from typing import Any, Dict, Iterator, List
from unittest import mock

from support import DaemonTestCase, raw_exchange, stats, wait_until

import askbus
from askbus.types import CONTEXT_FIELDS

QUESTION = [{"question": "Ship it?", "header": "Ship", "type": "yesno"}]


class Asker:
    """Asks on a background thread; the test waits on events, never on time."""

    def __init__(self, producer: askbus.Producer, cid: str, **kw: Any) -> None:
        self.result: List[Any] = []
        self.done = threading.Event()

        def run() -> None:
            try:
                self.result.append(producer.ask(QUESTION, correlation_id=cid, **kw))
            except Exception as e:  # the test inspects it
                self.result.append(e)
            self.done.set()

        threading.Thread(target=run, daemon=True).start()

    def wait(self) -> Any:
        self.done.wait(30)
        return self.result[0]


class ContextRoundTripTest(DaemonTestCase):
    def test_context_reaches_the_matching_ui_only_live_and_replayed(self) -> None:
        env = {"ASKBUS_SESSION": "s-py", "ASKBUS_CWD": "/src/web", "ASKBUS_PROJECT": "from-env"}
        with mock.patch.dict(os.environ, env):
            web = askbus.Producer(
                self.socket,
                client="py-lib/1",
                context={"agent": "py-agent/2.1", "project": "web", "title": "Deploying"},
            )
        self.addCleanup(web.close)
        api = askbus.Producer(self.socket, context=askbus.RequestContext(project="api"))
        self.addCleanup(api.close)
        # Pending before any UI subscribes: these are replayed.
        asks = {"web-1": Asker(web, "web-1"), "api-1": Asker(api, "api-1")}
        wait_until(lambda: stats(self.socket)["pending"] == 2, what="two pending")

        with askbus.subscribe(self.socket, client="web-ui", filter={"project": "web"}) as web_ui, \
                askbus.subscribe(self.socket, client="api-ui", filter={"project": "api"}) as api_ui:
            web_seen: Iterator[askbus.Request] = iter(web_ui)
            api_seen: Iterator[askbus.Request] = iter(api_ui)
            first = next(web_seen)
            self.assertEqual(first.correlation_id, "web-1")
            # The producer's options over the variables, field by field.
            self.assertEqual(first.context, askbus.RequestContext(
                agent="py-agent/2.1", session="s-py", project="web", cwd="/src/web",
                title="Deploying"))
            self.assertEqual(first.producer.client, "py-lib/1")
            self.assertEqual(next(api_seen).correlation_id, "api-1")

            # Live: the api question first, and only once its UI has it the web one; the web
            # UI's next question being the web one shows it was never sent the api one.
            asks["api-2"] = Asker(api, "api-2")
            got = next(api_seen)
            self.assertEqual(got.correlation_id, "api-2")
            self.assertEqual(got.context, askbus.RequestContext(project="api"))
            asks["web-2"] = Asker(web, "web-2", context={"title": "Rolling back"})
            second = next(web_seen)
            self.assertEqual(second.correlation_id, "web-2")
            self.assertEqual(second.context.title, "Rolling back")
            self.assertEqual(second.context.agent, "py-agent/2.1")
            self.assertEqual([r.correlation_id for r in web_ui.pending()], ["web-1", "web-2"])
            self.assertEqual([r.correlation_id for r in api_ui.pending()], ["api-1", "api-2"])

            for req in (first, second):
                self.assertEqual(req.answer({"0": "Yes"}), "answered")
            # A UI filtered to web may not answer what it was not shown (a peer that uses
            # none of this library, so the refusal is the daemon's). The web questions are
            # answered, so it is replayed nothing: `subscribed`, then the refusal.
            refused = raw_exchange(self.socket, [
                {"type": "subscribe", "client": "raw-web-ui", "filter": {"project": "web"}},
                {"type": "ask-user-response", "correlationId": "api-1", "answers": {"0": "Yes"}},
            ], 2)
            self.assertEqual(refused[0], {"type": "subscribed", "pending": 0})
            self.assertEqual((refused[1]["code"], refused[1]["correlationId"]),
                             ("forbidden", "api-1"), refused)
            for req in api_ui.pending():
                self.assertEqual(req.answer({"0": "No"}), "answered")

        for cid, a in asks.items():
            r = a.wait()
            self.assertIsInstance(r, askbus.Response, f"{cid}: {r!r}")
            self.assertEqual(r.answers, {"0": "Yes" if cid.startswith("web") else "No"}, cid)

        records = {r["correlationId"]: r for r in self.daemon.wait_records(4)}
        self.assertEqual(records["web-1"]["agent"], "py-agent/2.1")
        self.assertEqual(records["web-1"]["project"], "web")
        self.assertEqual(records["api-2"]["project"], "api")
        self.assertNotIn("agent", records["api-2"])
        for r in records.values():
            # Agent and project only: never the title, cwd or the question text.
            self.assertNotIn("title", r)
            self.assertNotIn("cwd", r)
            self.assertNotIn("Ship it?", str(r))

    def test_every_bad_context_value_is_refused_naming_its_field(self) -> None:
        cases: List[Dict[str, Any]] = []
        for name, _, limit in CONTEXT_FIELDS:
            cases += [
                {name: ""},
                {name: "x" * (limit + 1)},
                {name: "two\nlines"},
                {name: 7},
            ]
        self.assertEqual(len(cases), 20)
        with askbus.Producer(self.socket, client="bad-context") as p:
            for i, context in enumerate(cases):
                (name, value), = context.items()
                with self.subTest(field=name, value=repr(value)[:20]):
                    with self.assertRaises(askbus.InvalidRequest) as caught:
                        p.ask(QUESTION, correlation_id=f"bad-{i}", context=context)
                    message = caught.exception.message
                    self.assertTrue(message.startswith(f"context.{name} "), message)
                    self.assertEqual(caught.exception.correlation_id, f"bad-{i}")
        self.assertEqual(stats(self.socket)["requests"]["rejected"], len(cases))

    def test_approval_mode_and_interactive_reach_the_ui_and_bad_ones_are_refused(self) -> None:
        with askbus.Producer(self.socket, client="mode-py",
                             context=askbus.RequestContext(approval_mode="autoEdit")) as p, \
                askbus.subscribe(self.socket, client="mode-ui") as ui:
            seen: Iterator[askbus.Request] = iter(ui)
            ask = Asker(p, "mode-1", context={"interactive": False})
            got = next(seen)
            self.assertEqual(got.context, askbus.RequestContext(
                approval_mode="autoEdit", interactive=False))
            self.assertEqual(got.context.to_wire(),
                             {"approvalMode": "autoEdit", "interactive": False})
            got.dismiss()
            ask.wait()
            for i, (context, message) in enumerate([
                ({"approval_mode": "auto_edit"}, 'context.approvalMode must be one of "default", '
                 '"autoEdit", "yolo", "plan", not "auto_edit"'),
                ({"approvalMode": "YOLO"}, 'context.approvalMode must be one of "default", '
                 '"autoEdit", "yolo", "plan", not "YOLO"'),
                ({"interactive": "no"}, "context.interactive must be true or false, not a string"),
            ]):
                with self.subTest(context=context):
                    with self.assertRaises(askbus.InvalidRequest) as caught:
                        p.ask(QUESTION, correlation_id=f"bad-mode-{i}", context=context)
                    self.assertEqual(caught.exception.message, message)
        self.assertEqual(askbus.APPROVAL_MODES, ("default", "autoEdit", "yolo", "plan"))


if __name__ == "__main__":
    unittest.main()
