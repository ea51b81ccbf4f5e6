"""A UI process for the chaos test (tests/e2e/chaos.rs): subscribes through the Python client
(askbus.aio.subscribe, which resubscribes and takes the replay across daemon restarts) and
answers the questions its slot is responsible for, appending one JSON line per event to its
log, flushed to the kernel at once:

    {"sent": cid, "value": {...} | null, "t": monotonic}   before answering (null: dismissing)
    {"ack": cid, "outcome": "answered"|"dismissed", "t"}   the daemon acknowledged this UI won
    {"lost": cid, "why": ...}                              not-pending, or the connection died
    {"sync": cid}                                          the test's last question arrived

Usage: ui.py SOCKET SLOT NAME LOG_FILE

Which UIs answer a question, and how, is a function of its correlationId that every process
computes alike (crc32, not Python's per-process randomised hash): two of the six UI slots race
for each question, and about one question in eleven is dismissed instead. Each answer to
question q reads "CID#q@NAME", so whoever receives it can tell which question and which UI
process it came from.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import zlib

import askbus
from askbus import aio

UI_SLOTS = 6
RACERS = 2


def answered_by(cid: str) -> list:
    first = zlib.crc32(cid.encode()) % UI_SLOTS
    return [(first + k * (UI_SLOTS // RACERS)) % UI_SLOTS for k in range(RACERS)]


def dismissed(cid: str) -> bool:
    return zlib.crc32(b"dismiss:" + cid.encode()) % 11 == 0


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **fields: object) -> None:
        os.write(self.fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())


async def main() -> None:
    socket, slot, name, log_file = sys.argv[1:5]
    slot_n = int(slot)
    log = Log(log_file)
    tasks: set = set()

    async def handle(req: aio.AsyncRequest) -> None:
        cid = req.correlation_id
        try:
            if dismissed(cid):
                log.write(sent=cid, value=None, t=time.monotonic())
                outcome = await req.dismiss()
            else:
                value = {str(q): f"{cid}#{q}@{name}" for q in range(len(req.questions))}
                log.write(sent=cid, value=value, t=time.monotonic())
                outcome = await req.answer(value)
            log.write(ack=cid, outcome=outcome, t=time.monotonic())
        except askbus.NotPending as e:
            log.write(lost=cid, why=str(e.withdraw_reason))
        except askbus.ConnectionLost as e:
            log.write(lost=cid, why=f"connection: {e}")

    sub = aio.subscribe(socket, client=name, resume_grace=10.0)
    # As for producers: the first subscription fails at once when no daemon answers; a UI
    # started while the test restarts the daemon retries.
    while True:
        try:
            await sub.open()
            break
        except (askbus.DaemonUnreachable, askbus.ConnectionLost):
            await asyncio.sleep(0.05)
    async with sub:
        async for req in sub:
            if req.correlation_id.startswith("sync-"):
                # The test's last question: every frame before it, acks included, has been
                # handled and logged (the ack callbacks ran before this frame was read).
                log.write(sync=req.correlation_id)
                continue
            if slot_n in answered_by(req.correlation_id):
                task = asyncio.ensure_future(handle(req))
                tasks.add(task)
                task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(main())
