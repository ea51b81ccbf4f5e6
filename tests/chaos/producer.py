"""A producer process for the chaos test (tests/e2e/chaos.rs): asks the questions listed in a file
through the Python client (askbus.aio.AsyncProducer, which reconnects and resends across daemon
restarts) and appends one JSON line per event to its log, flushed to the kernel at once so that
a SIGKILL loses nothing already logged:

    {"ask": cid, "t": monotonic}                        before the question is sent
    {"cid": cid, "reason": ..., "answers": {...}, "t"}   its one terminal outcome
    {"cid": cid, "kind": "approval", "reason", "confirmed", "outcome", "message", "payload", "t"}
                                                        the same, for an approval
    {"error": repr, "cid": cid}                          an ask that raised
    {"dup": cid, "gen": n} / {"foreign": cid}            wire-level violations (see below)
    {"done": true}                                       every question has ended

Usage: producer.py SOCKET NAME TODO_FILE LOG_FILE CONCURRENCY TIMEOUT_MS [APPROVE_EVERY]

With APPROVE_EVERY = k > 0 (the crash loop), every index with index % k == k - 1 is an approval
(a tool-confirmation-request through AsyncProducer.confirm, tool_for(index)) instead of
questions; 0 or absent (the chaos test): questions only.

correlationIds are "NAME:INDEX", so every id names the process that asked it. The client
matches responses to asks and drops frames it cannot match, which would hide exactly the
faults this test looks for; so the dispatcher is wrapped to see every ask-user-response frame
as it comes off the wire, per connection: a second one for the same id on one connection is a
duplicate terminal frame, one whose id this process never asked is another producer's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback

import askbus
from askbus import aio


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **fields: object) -> None:
        # One write(2) per line: on SIGKILL a line is either wholly in the file or absent.
        os.write(self.fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())


def questions_for(index: int) -> list:
    """One to three questions of every type, varying with the index."""
    choice = {
        "question": f"Which database for task {index}?",
        "header": "Database",
        "type": "choice",
        "options": [
            {"label": "SQLite", "description": "A single file"},
            {"label": "PostgreSQL", "description": "A server"},
        ],
    }
    yesno = {"question": "Run the migration now?", "header": "Migrate", "type": "yesno"}
    text = {"question": "Name the new table", "header": "Table", "type": "text",
            "placeholder": "e.g. accounts"}
    return [[choice], [choice, yesno], [text, yesno, choice]][index % 3]


def tool_for(index: int) -> dict:
    """The tool call and details an approval asks about (the crash loop's `tool_for`)."""
    command = f"make task-{index}"
    return {
        "tool_call": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": "make", "rootCommands": ["make"]},
        "outcomes": ["proceed_once", "proceed_always", "modify_with_editor", "cancel"],
    }


def watch_the_wire(producer: aio.AsyncProducer, prefix: str, log: Log) -> None:
    seen: set = set()
    inner = producer._dispatch

    def dispatch(frame: dict) -> None:
        if frame.get("type") in ("ask-user-response", "tool-confirmation-response"):
            cid = frame.get("correlationId")
            key = (producer._gen, cid)
            if not (isinstance(cid, str) and cid.startswith(prefix)):
                log.write(foreign=cid)
            elif key in seen:
                log.write(dup=cid, gen=producer._gen)
            seen.add(key)
        inner(frame)

    producer._dispatch = dispatch  # type: ignore[method-assign]


async def main() -> None:
    socket, name, todo_file, log_file, concurrency, timeout_ms = sys.argv[1:7]
    approve_every = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    with open(todo_file) as f:
        todo = [int(line) for line in f if line.strip()]
    log = Log(log_file)
    prefix = f"{name}:"
    gate = asyncio.Semaphore(int(concurrency))
    producer = aio.AsyncProducer(socket, client=f"chaos-producer/{name}")
    watch_the_wire(producer, prefix, log)
    # A producer that never connected fails at once when no daemon answers (the client's
    # contract); one started while the test restarts the daemon retries, as an agent would.
    while True:
        try:
            await producer.connect()
            break
        except (askbus.DaemonUnreachable, askbus.ConnectionLost):
            await asyncio.sleep(0.05)
    async def one(index: int) -> None:
        cid = f"{prefix}{index}"
        async with gate:
            log.write(ask=cid, t=time.monotonic())
            if approve_every and index % approve_every == approve_every - 1:
                # confirm never raises for how it ended: a refused or lost request is a
                # reason other than answered, which the test fails on.
                c = await producer.confirm(
                    **tool_for(index), timeout_ms=int(timeout_ms), correlation_id=cid
                )
                log.write(cid=c.correlation_id, kind="approval", reason=c.reason,
                          confirmed=c.confirmed, outcome=c.outcome, message=c.message,
                          payload=c.payload,
                          error=None if c.error is None else repr(c.error),
                          t=time.monotonic())
                return
            try:
                r = await producer.ask(
                    questions_for(index), timeout_ms=int(timeout_ms), correlation_id=cid
                )
            except Exception as e:  # reported to the test, which fails on it
                log.write(error=repr(e), cid=cid, traceback=traceback.format_exc())
                return
            log.write(cid=r.correlation_id, reason=r.reason, answers=r.answers,
                      t=time.monotonic())

    try:
        await asyncio.gather(*(one(i) for i in todo))
    finally:
        await producer.close()
    log.write(done=True)


if __name__ == "__main__":
    asyncio.run(main())
