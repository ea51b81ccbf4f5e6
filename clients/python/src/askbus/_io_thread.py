"""The one background I/O thread the blocking API runs the asyncio implementation on, started
on first use and forgotten after ``fork()``; ``_IoThread.run`` turns a coroutine into a
blocking call whose interruption (Ctrl-C) cancels it."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Awaitable, Callable, Dict, Optional, TypeVar

T = TypeVar("T")


class _IoThread:
    """The event loop every blocking askbus object runs on, started on first use."""

    _lock = threading.Lock()
    _current: Optional[_IoThread] = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="askbus-io", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> _IoThread:
        with cls._lock:
            current = cls._current
            # After fork() the child has the object but not the thread.
            if current is None or current.pid != os.getpid():
                current = cls._current = _IoThread()
            return current

    def run(self, coro: Awaitable[T]) -> T:
        """Runs ``coro`` on the I/O thread and waits for it. Interrupting the wait (Ctrl-C)
        cancels it, which for an ask withdraws the question."""
        if os.getpid() != self.pid:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError("askbus objects cannot be used across fork(); make new ones")
        if threading.current_thread() is self.thread:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError(
                "a blocking askbus call was made from an askbus callback, which runs on the "
                "I/O thread; hand the work to another thread, or use askbus.aio"
            )
        done = threading.Event()
        box: Dict[str, Any] = {}

        def start() -> None:
            task = self.loop.create_task(_as_coroutine(coro))
            box["task"] = task
            task.add_done_callback(lambda _: done.set())

        def cancel() -> None:
            task = box.get("task")
            if task is None:
                # Interrupted before start() was even scheduled: nothing runs, nothing to wait.
                if asyncio.iscoroutine(coro):
                    coro.close()
                done.set()
            else:
                task.cancel()

        try:
            # Scheduling inside the try: a Ctrl-C that lands between scheduling and waiting
            # (the question may already be on the UIs by then) must still cancel it, or the
            # producer's close would abandon the question as producer-gone.
            self.loop.call_soon_threadsafe(start)
            done.wait()
        except BaseException:
            # Interrupted (Ctrl-C): cancel the operation and give it a moment to finish its
            # cancellation (an ask sends ask-user-cancel), so that it is not cut off when
            # the interpreter exits right after. Callbacks run in order, so cancel() finds
            # the task whenever start() was scheduled.
            self.loop.call_soon_threadsafe(cancel)
            done.wait(_CANCEL_GRACE)
            raise
        task: asyncio.Task[T] = box["task"]
        return task.result()

    def close_soon(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Schedules a close without waiting for it: for ``__del__``, which may run on any
        thread, or at interpreter exit when the loop is gone."""
        if os.getpid() != self.pid or self.loop.is_closed() or not self.thread.is_alive():
            return

        def start() -> None:
            self.loop.create_task(_as_coroutine(closer()))

        try:
            self.loop.call_soon_threadsafe(start)
        except RuntimeError:
            pass  # the loop closed meanwhile


def _forget_after_fork() -> None:
    # The child has the parent's objects but not its threads: start afresh, with a lock
    # that no vanished thread can be holding.
    _IoThread._lock = threading.Lock()
    _IoThread._current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


#: How long an interrupted blocking call waits for its cancellation to be carried out. It
#: takes a millisecond when the machine is idle; on a loaded one a second was seen not to be
#: enough, and a question abandoned instead of withdrawn shows as producer-gone.
_CANCEL_GRACE = 5.0


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
