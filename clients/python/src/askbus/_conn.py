"""One asyncio connection to askbusd: connect, send and receive whole frames, and the
``hello``/``welcome`` handshake. Failures become askbus errors here, so the layers above deal
only in ``DaemonUnreachable``, ``ConnectionLost`` and ``ProtocolError``."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Mapping, Optional

from . import _frames, _parse, _trust
from .errors import ConnectionLost, DaemonUnreachable, ProtocolError
from .types import Welcome

#: How long a connect refused for a full accept queue (EAGAIN) or a socket nobody listens on
#: for the moment (ECONNREFUSED) is retried, as the Rust and Node clients do.
CONNECT_RETRY_S = 1.0


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        socket_path: str,
    ) -> None:
        self.socket_path = socket_path
        self._reader = reader
        self._writer = writer
        # Python 3.9's StreamWriter.drain() does not support concurrent callers.
        self._drain_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, socket_path: str) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_RETRY_S
        pause = 0.01
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(socket_path)
                break
            except (BlockingIOError, ConnectionRefusedError) as e:
                # A full accept queue (another user flooding the daemon) or a daemon
                # restarting: retry briefly before giving up.
                if loop.time() + pause < deadline:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.2)
                    continue
                raise DaemonUnreachable(
                    socket_path, f"cannot reach askbusd at {socket_path}: {e.strerror or e}"
                ) from e
            except OSError as e:
                detail = e.strerror or str(e)
                raise DaemonUnreachable(
                    socket_path, f"cannot reach askbusd at {socket_path}: {detail}"
                ) from e
        try:
            _trust.check_daemon(writer.get_extra_info("socket"), socket_path)
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, socket_path)

    @property
    def closed(self) -> bool:
        return self._closed or self._writer.is_closing()

    async def send(self, frame: Mapping[str, Any]) -> None:
        await self.send_payload(_frames.encode(frame))

    async def send_payload(self, payload: bytes) -> None:
        if self.closed:
            raise ConnectionLost(f"the connection to askbusd at {self.socket_path} is closed")
        try:
            self._writer.write(_frames.with_prefix(payload))
            async with self._drain_lock:
                await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self.close()
            raise ConnectionLost(
                f"the connection to askbusd at {self.socket_path} failed: {e}"
            ) from e

    async def recv(self) -> Optional[Dict[str, Any]]:
        """The next frame, or ``None`` once the daemon closed the connection cleanly."""
        try:
            prefix = await self._reader.readexactly(_frames.LENGTH_PREFIX.size)
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                return None
            raise ConnectionLost("askbusd closed the connection in the middle of a frame") from e
        except OSError as e:
            raise ConnectionLost(f"the connection to askbusd failed: {e}") from e
        (length,) = _frames.LENGTH_PREFIX.unpack(prefix)
        if length > _frames.MAX_INBOUND_FRAME:
            raise ProtocolError(
                f"askbusd announced a {length}-byte frame, over this client's limit of "
                f"{_frames.MAX_INBOUND_FRAME} bytes"
            )
        try:
            payload = await self._reader.readexactly(length)
        except asyncio.IncompleteReadError as e:
            raise ConnectionLost("askbusd closed the connection in the middle of a frame") from e
        except OSError as e:
            raise ConnectionLost(f"the connection to askbusd failed: {e}") from e
        return _frames.decode(payload)

    async def handshake(self, client: Optional[str], via: Optional[str] = None) -> Welcome:
        """``hello``, then the daemon's ``welcome`` (or the error that refused us)."""
        await self.send(_frames.hello(client, via))
        while True:
            frame = await self.recv()
            if frame is None:
                raise ConnectionLost("askbusd closed the connection before its welcome")
            kind = frame["type"]
            if kind == "welcome":
                return _parse.parse_welcome(frame)
            if kind == "error":
                raise _parse.parse_error(frame)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
