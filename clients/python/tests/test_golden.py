"""The golden frames of proto/examples (index.json lists them): this client must parse every
server frame as its type, losing nothing, and what it sends must equal the client frames as
JSON values, both from its frame builders and, through a scripted stand-in daemon that
replays the golden server frames, from its real producer, UI and observer code paths. A
protocol change that the client does not follow breaks these loudly."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import struct
import tempfile
import unittest
from typing import Any, Callable, Dict, List, Optional

from support import REPO

import askbus
from askbus import _frames, _parse, aio
from askbus.types import BusEvent, Response, Welcome


EXAMPLES = REPO / "proto" / "examples"


def load(relative: str) -> Dict[str, Any]:
    with open(EXAMPLES.parent / relative, encoding="utf-8") as f:
        frame: Dict[str, Any] = json.load(f)
    return frame


def index() -> List[Dict[str, Any]]:
    with open(EXAMPLES / "index.json", encoding="utf-8") as f:
        entries: List[Dict[str, Any]] = json.load(f)["examples"]
    return entries


def server(name: str) -> Dict[str, Any]:
    return load(f"examples/server/{name}.json")


def client(name: str) -> Dict[str, Any]:
    return load(f"examples/client/{name}.json")


def to_wire(parsed: Any) -> Dict[str, Any]:
    """The daemon frame a parsed object stands for, rebuilt independently of the parser, so
    comparing it with the golden frame shows that parsing kept every field."""
    def ui_info(u: Any) -> Dict[str, Any]:
        return {"pid": u.pid, **({"client": u.client} if u.client else {}),
                **({"node": u.node} if u.node is not None else {})}

    def federated(out: Dict[str, Any], node: Any, answered_by: Any = None) -> Dict[str, Any]:
        if node is not None:
            out["node"] = node
        if answered_by is not None:
            out["answeredBy"] = ui_info(answered_by)
        return out

    def producer(p: askbus.ProducerInfo) -> Dict[str, Any]:
        out: Dict[str, Any] = {"pid": p.pid, "uid": p.uid}
        if p.client is not None:
            out["client"] = p.client
        return out

    if isinstance(parsed, Welcome):
        return {"type": "welcome", "protocol": parsed.protocol, "server": parsed.server,
                "maxFrameBytes": parsed.max_frame_bytes,
                "defaultTimeoutMs": parsed.default_timeout_ms,
                "maxTimeoutMs": parsed.max_timeout_ms}
    if isinstance(parsed, _parse.Pong):
        return {"type": "pong", **({"id": parsed.id} if parsed.has_id else {})}
    if isinstance(parsed, _parse.Subscribed):
        return {"type": "subscribed", "pending": parsed.pending}
    if isinstance(parsed, _parse.UiRequest):
        out = {"type": "ask-user-request", "correlationId": parsed.correlation_id,
               "questions": parsed.questions, "timeoutMs": parsed.timeout_ms,
               "producer": producer(parsed.producer)}
        if parsed.context is not None:
            out["context"] = parsed.context.to_wire()
        return federated(out, parsed.node)
    if isinstance(parsed, _parse.WithdrawnFrame):
        return federated({"type": "ask-user-withdrawn", "correlationId": parsed.correlation_id,
                          "reason": parsed.reason}, parsed.node, parsed.answered_by)
    if isinstance(parsed, _parse.Ack):
        return {"type": "ask-user-ack", "correlationId": parsed.correlation_id,
                "outcome": parsed.outcome}
    if isinstance(parsed, Response):
        return {"type": "ask-user-response", "correlationId": parsed.correlation_id,
                "answers": parsed.answers, "cancelled": parsed.cancelled,
                "reason": parsed.reason,
                "result": {"llmContent": parsed.result.llm_content,
                           "returnDisplay": parsed.result.return_display,
                           "data": parsed.result.data}}
    if isinstance(parsed, askbus.DaemonError):
        out = {"type": "error", "code": parsed.code, "message": parsed.message}
        if parsed.correlation_id is not None:
            out["correlationId"] = parsed.correlation_id
        return out
    if isinstance(parsed, _parse.Stats):
        return {"type": "stats", **parsed.counters}
    if isinstance(parsed, _parse.Watching):
        return {"type": "watching"}
    if isinstance(parsed, _parse.HistoryPage):
        return {"type": "history", "records": parsed.records, "cursor": parsed.cursor}
    if isinstance(parsed, _parse.ApprovalRequest):
        out = {"type": "tool-confirmation-request", "correlationId": parsed.correlation_id,
               "toolCall": parsed.tool_call, "outcomes": parsed.outcomes,
               "timeoutMs": parsed.timeout_ms, "producer": producer(parsed.producer)}
        for key, value in (("serverName", parsed.server_name),
                           ("toolAnnotations", parsed.tool_annotations),
                           ("subagent", parsed.subagent), ("details", parsed.details),
                           ("context", parsed.context.to_wire() if parsed.context else None)):
            if value is not None:
                out[key] = value
        return federated(out, parsed.node)
    if isinstance(parsed, _parse.ApprovalWithdrawn):
        return federated({"type": "tool-confirmation-withdrawn",
                          "correlationId": parsed.correlation_id, "reason": parsed.reason},
                         parsed.node, parsed.answered_by)
    if isinstance(parsed, _parse.ApprovalAck):
        return {"type": "tool-confirmation-ack", "correlationId": parsed.correlation_id,
                "reason": parsed.reason, "confirmed": parsed.confirmed,
                "outcome": parsed.outcome}
    if isinstance(parsed, askbus.types.ApprovalResponse):
        out = {"type": "tool-confirmation-response", "correlationId": parsed.correlation_id,
               "confirmed": parsed.confirmed, "outcome": parsed.outcome,
               "reason": parsed.reason}
        if parsed.message is not None:
            out["message"] = parsed.message
        if parsed.payload is not None:
            out["payload"] = parsed.payload
        return out
    if isinstance(parsed, BusEvent):
        out = {"type": "bus-event", "event": parsed.event, "ts": parsed.ts,
               "correlationId": parsed.correlation_id, "producer": producer(parsed.producer),
               "questionTypes": parsed.question_types, "headers": parsed.headers}
        if parsed.ui is not None:
            out["ui"] = ui_info(parsed.ui)
        for key, value in (("latencyMs", parsed.latency_ms), ("timeoutMs", parsed.timeout_ms),
                           ("code", parsed.code), ("agent", parsed.agent),
                           ("project", parsed.project), ("kind", parsed.kind),
                           ("tool", parsed.tool), ("detailsType", parsed.details_type),
                           ("confirmed", parsed.confirmed), ("outcome", parsed.outcome),
                           ("notify", parsed.notify),
                           ("node", parsed.node)):
            if value is not None:
                out[key] = value
        if parsed.decided_by is not None:
            d = parsed.decided_by
            out["decidedBy"] = {k: v for k, v in (
                ("kind", d.kind), ("via", d.via), ("uid", d.uid), ("client", d.client),
                ("node", d.node), ("user", d.user), ("rule", d.rule)) if v is not None}
        return out
    raise AssertionError(f"no wire form for {parsed!r}")


class GoldenFramesTest(unittest.TestCase):
    def test_every_server_example_parses_as_its_type_and_keeps_every_field(self) -> None:
        entries = [e for e in index() if e["direction"] == "server"]
        self.assertGreater(len(entries), 20)
        for entry in entries:
            frame = load(entry["file"])
            with self.subTest(entry["file"]):
                self.assertEqual(frame["type"], entry["type"])
                # Through the same decode path the connection uses.
                parsed = _parse.parse_server_frame(_frames.decode(_frames.encode(frame)))
                self.assertNotIsInstance(parsed, _parse.Unknown,
                                         "a server frame type this client does not know")
                self.assertEqual(to_wire(parsed), frame)

    def test_frame_builders_reproduce_every_client_example(self) -> None:
        builders: Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
            "hello": lambda f: _frames.hello(f.get("client"), f.get("via")),
            "history": lambda f: _frames.history(f.get("filter"), f.get("limit"),
                                                 f.get("cursor")),
            "ping": lambda f: _frames.ping(f["id"]) if "id" in f else _frames.ping(),
            "stats": lambda f: _frames.stats(),
            "subscribe": lambda f: _frames.subscribe(f.get("client"), f.get("filter"),
                                                     f.get("via")),
            "watch": lambda f: _frames.watch(f.get("client")),
            "ask-user-request": lambda f: _frames.ask_user_request(
                f["correlationId"], f["questions"], f.get("timeoutMs"), f.get("noUi"),
                askbus.RequestContext.of(f.get("context")).to_wire()),
            "ask-user-cancel": lambda f: _frames.ask_user_cancel(f["correlationId"]),
            "ask-user-response": lambda f: _frames.ask_user_response(
                f["correlationId"], f.get("answers", {}), f.get("cancelled", False)),
            "tool-confirmation-request": lambda f: _frames.tool_confirmation_request(
                f["correlationId"], f["toolCall"], f.get("details"), f.get("outcomes"),
                f.get("timeoutMs"), f.get("noUi"), f.get("serverName"), f.get("context")),
            "notify-report": lambda f: _frames.notify_report(
                f["sink"], f["result"], f.get("correlationIds", ()), f.get("error")),
            "tool-confirmation-cancel": lambda f: _frames.tool_confirmation_cancel(
                f["correlationId"], f.get("reason"), f.get("via")),
            "tool-confirmation-response": lambda f: _frames.tool_confirmation_response(
                f["correlationId"], f.get("confirmed"), f.get("outcome"), f.get("message"),
                f.get("payload"), f.get("dismissed", False), f.get("user")),
        }
        entries = [e for e in index() if e["direction"] == "client"]
        self.assertEqual({e["type"] for e in entries}, set(builders))
        for entry in entries:
            frame = load(entry["file"])
            if frame["type"] == "hello" and entry.get("rejectedWith") == "unsupported-protocol":
                continue  # this client only ever sends the integer 1 (not 2, nor 1.0)
            with self.subTest(entry["file"]):
                self.assertEqual(builders[frame["type"]](frame), frame)


class ScriptedDaemon:
    """A stand-in askbusd on a Unix socket that records every frame it is sent and answers
    each with the golden frames ``reply(frame)`` returns."""

    def __init__(self, path: str, reply: Callable[[Dict[str, Any]], List[Dict[str, Any]]]):
        self.path = path
        self.reply = reply
        self.received: List[Dict[str, Any]] = []
        self.server: Optional[asyncio.AbstractServer] = None

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._serve, self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                frame = json.loads(await reader.readexactly(n))
                self.received.append(frame)
                for out in self.reply(frame):
                    payload = json.dumps(out).encode()
                    writer.write(struct.pack(">I", len(payload)) + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def sent_of_type(self, kind: str) -> List[Dict[str, Any]]:
        return [f for f in self.received if f["type"] == kind]


class GoldenConversationTest(unittest.IsolatedAsyncioTestCase):
    """The client's real code paths, against golden server frames."""

    async def asyncSetUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="askbus-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    async def scripted(self, reply: Callable[[Dict[str, Any]], List[Dict[str, Any]]]
                       ) -> ScriptedDaemon:
        daemon = ScriptedDaemon(os.path.join(self.tmp, f"d{len(os.listdir(self.tmp))}.sock"),
                                reply)
        await daemon.start()
        self.addAsyncCleanup(daemon.stop)
        return daemon

    async def test_producer(self) -> None:
        request = client("ask-user-request")
        outcomes = {
            request["correlationId"]: "answered",
        }

        def reply(frame: Dict[str, Any]) -> List[Dict[str, Any]]:
            if frame["type"] == "hello":
                return [server("welcome")]
            if frame["type"] == "ask-user-request" and frame.get("noUi") == "reject":
                return [server("ask-user-response.no-ui")]
            if frame["type"] == "ask-user-request" and frame["questions"] == request["questions"]:
                name = outcomes[frame["correlationId"]]
                return [] if name == "wait" else [server(f"ask-user-response.{name}")]
            if frame["type"] == "ask-user-request":
                return [server("error.invalid-request")]
            if frame["type"] == "ask-user-cancel":
                return [server("ask-user-response.withdrawn")]
            if frame["type"] == "stats":
                return [server("stats")]
            return []

        daemon = await self.scripted(reply)
        async with aio.AsyncProducer(daemon.path, client="my-agent/1.2.0") as producer:
            r = await producer.ask(request["questions"], timeout_ms=request["timeoutMs"],
                                   correlation_id=request["correlationId"])
            self.assertEqual(to_wire(r), server("ask-user-response.answered"))
            r = await producer.ask(request["questions"], timeout_ms=request["timeoutMs"],
                                   no_ui="reject", correlation_id=request["correlationId"])
            self.assertEqual(r.reason, "no-ui")
            invalid = client("ask-user-request.invalid")
            with self.assertRaises(askbus.InvalidRequest) as cm:
                await producer.ask(invalid["questions"], correlation_id=invalid["correlationId"])
            self.assertEqual(cm.exception.message, server("error.invalid-request")["message"])
            outcomes[request["correlationId"]] = "wait"
            asking = asyncio.ensure_future(producer.ask(
                request["questions"], timeout_ms=request["timeoutMs"],
                correlation_id=request["correlationId"]))
            while len(daemon.sent_of_type("ask-user-request")) < 4:
                await asyncio.sleep(0.01)
            await producer.cancel(request["correlationId"])
            self.assertEqual((await asking).reason, "withdrawn")
            counters = await producer.stats()
        self.assertEqual({"type": "stats", **counters}, server("stats"))
        self.assertEqual(daemon.received[0], client("hello"))
        requests = daemon.sent_of_type("ask-user-request")
        self.assertEqual(requests[0], request)
        self.assertEqual(requests[1], client("ask-user-request.no-ui-reject"))
        self.assertEqual(requests[2], invalid)
        self.assertEqual(daemon.sent_of_type("ask-user-cancel"), [client("ask-user-cancel")])
        self.assertEqual(daemon.sent_of_type("stats"), [client("stats")])

    async def test_producer_shutdown_and_dismissal_responses(self) -> None:
        request = client("ask-user-request")
        name = "shutdown"

        def reply(frame: Dict[str, Any]) -> List[Dict[str, Any]]:
            if frame["type"] == "hello":
                return [server("welcome")]
            if frame["type"] == "ask-user-request":
                return [server(f"ask-user-response.{name}")]
            return []

        daemon = await self.scripted(reply)
        async with aio.AsyncProducer(daemon.path, reconnect=False) as producer:
            for name in ("shutdown", "dismissed", "timeout"):
                r = await producer.ask(request["questions"],
                                       correlation_id=request["correlationId"])
                self.assertEqual(to_wire(r), server(f"ask-user-response.{name}"))
                with self.assertRaises(askbus.NotAnswered):
                    r.raise_for_outcome()

    async def test_ui(self) -> None:
        mode = {"answer": "ask-user-ack"}

        def reply(frame: Dict[str, Any]) -> List[Dict[str, Any]]:
            if frame["type"] == "hello":
                return [server("welcome")]
            if frame["type"] == "subscribe":
                return [server("subscribed"), server("ask-user-request.minimal"),
                        server("ask-user-request")]
            if frame["type"] == "ask-user-response" and frame.get("cancelled"):
                return [server("ask-user-ack.dismissed")]
            if frame["type"] == "ask-user-response":
                return [server(mode["answer"])]
            return []

        daemon = await self.scripted(reply)
        for answer_reply, expected in [("ask-user-ack", "answered"),
                                       ("error.not-pending", askbus.NotPending),
                                       (None, "dismissed")]:
            async with aio.subscribe(daemon.path, client="askbus-tui/0.1.0", via="tui",
                                     reconnect=False) as sub:
                minimal = await sub.__anext__()
                self.assertEqual(minimal.correlation_id, "q-1")
                req = await sub.__anext__()
                self.assertEqual(
                    to_wire(_parse.UiRequest(req.correlation_id, req.questions,
                                              req.timeout_ms, req.producer)),
                    server("ask-user-request"))
                if answer_reply is None:
                    self.assertEqual(await req.dismiss(), expected)
                    continue
                mode["answer"] = answer_reply
                answers = client("ask-user-response")["answers"]
                if isinstance(expected, str):
                    self.assertEqual(await req.answer(answers), expected)
                else:
                    with self.assertRaises(expected):
                        await req.answer(answers)
        self.assertEqual(daemon.sent_of_type("subscribe"), [client("subscribe")] * 3)
        responses = daemon.sent_of_type("ask-user-response")
        self.assertEqual(responses, [client("ask-user-response")] * 2
                         + [client("ask-user-response.dismissed")])

    async def test_ui_withdrawals(self) -> None:
        def reply(frame: Dict[str, Any]) -> List[Dict[str, Any]]:
            if frame["type"] == "hello":
                return [server("welcome")]
            if frame["type"] == "subscribe":
                return [server("subscribed"), server("ask-user-request"),
                        server("ask-user-withdrawn")]
            return []

        daemon = await self.scripted(reply)
        async with aio.subscribe(daemon.path) as sub:
            events = sub.events()
            req = await events.__anext__()
            w = await events.__anext__()
            self.assertIsInstance(w, askbus.Withdrawal)
            self.assertEqual((w.reason, req.withdraw_reason), ("answered", "answered"))

    async def test_observer(self) -> None:
        names = ["bus-event.request", "bus-event.answered", "bus-event.rejected",
                 "bus-event.answered.rule", "bus-event.withdrawn.acp"]

        def reply(frame: Dict[str, Any]) -> List[Dict[str, Any]]:
            if frame["type"] == "hello":
                return [server("welcome")]
            if frame["type"] == "watch":
                return [server("watching")] + [server(n) for n in names]
            return []

        daemon = await self.scripted(reply)
        got = []
        async with aio.watch(daemon.path, client="askbus-watch/0.1.0") as w:
            async for event in w:
                got.append(to_wire(event))
                if len(got) == len(names):
                    break
        self.assertEqual(got, [server(n) for n in names])
        self.assertEqual(daemon.sent_of_type("watch"), [client("watch")])

    def test_decided_by_is_typed(self) -> None:
        rule = _parse.parse_server_frame(server("bus-event.answered.rule"))
        assert isinstance(rule, BusEvent) and rule.decided_by is not None
        self.assertEqual(rule.decided_by.kind, "rule")
        self.assertEqual(rule.decided_by.rule["source"], "User: mine.toml")
        acp = _parse.parse_server_frame(server("bus-event.withdrawn.acp"))
        assert isinstance(acp, BusEvent) and acp.decided_by is not None
        self.assertEqual((acp.event, acp.decided_by.kind, acp.decided_by.via),
                         ("withdrawn", "human", "acp"))
        request = _parse.parse_server_frame(server("bus-event.request"))
        assert isinstance(request, BusEvent)
        self.assertIsNone(request.decided_by)


if __name__ == "__main__":
    unittest.main()
