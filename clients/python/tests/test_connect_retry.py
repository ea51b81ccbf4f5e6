"""A refused connect is retried briefly (askbus/_conn.py), as the Rust and Node clients do: a
daemon restarting (ECONNREFUSED) or too busy to accept (EAGAIN) is waited for, a missing socket
is not. The socket here is real and bound but not listening; it starts listening when the
client, refused once, goes to wait before its next attempt, so the order of events decides
and no timing does."""

import asyncio
import os
import socket
import tempfile
import unittest
from unittest import mock

from askbus import _conn
from askbus.errors import DaemonUnreachable


class ConnectRetryTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="askbus-retry-")
        self.path = os.path.join(self.dir.name, "askbus.sock")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_refused_connect_is_retried_until_the_daemon_listens(self):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)  # bound, not listening: connects are refused
        waits = []
        real_sleep = asyncio.sleep

        async def sleep(delay, *args, **kwargs):
            if not waits:
                listener.listen(16)
            waits.append(delay)
            return await real_sleep(0)

        async def main():
            with mock.patch.object(_conn.asyncio, "sleep", sleep):
                conn = await _conn.Connection.open(self.path)
            accepted, _ = listener.accept()
            accepted.close()
            conn.close()

        try:
            asyncio.run(main())
        finally:
            listener.close()
        self.assertEqual(len(waits), 1, waits)
        self.assertLessEqual(waits[0], 0.2)

    def test_a_daemon_that_never_listens_is_unreachable_after_the_retry_window(self):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        waits = []
        real_sleep = asyncio.sleep
        clock = [0.0]

        async def sleep(delay, *args, **kwargs):
            waits.append(delay)
            clock[0] += delay
            return await real_sleep(0)

        async def main():
            loop = asyncio.get_running_loop()
            start = loop.time()
            # The window is measured on the loop's clock: advance it by the waits instead of
            # waiting them out.
            with mock.patch.object(_conn.asyncio, "sleep", sleep), mock.patch.object(
                loop, "time", lambda: start + clock[0]
            ):
                with self.assertRaises(DaemonUnreachable) as caught:
                    await _conn.Connection.open(self.path)
            return caught.exception

        try:
            err = asyncio.run(main())
        finally:
            listener.close()
        self.assertIn(self.path, str(err))
        self.assertGreater(len(waits), 1, waits)
        self.assertLessEqual(sum(waits), _conn.CONNECT_RETRY_S)

    def test_a_missing_socket_fails_at_once(self):
        waits = []

        async def sleep(delay, *args, **kwargs):
            waits.append(delay)

        async def main():
            with mock.patch.object(_conn.asyncio, "sleep", sleep):
                with self.assertRaises(DaemonUnreachable):
                    await _conn.Connection.open(self.path)

        asyncio.run(main())
        self.assertEqual(waits, [])


if __name__ == "__main__":
    unittest.main()
