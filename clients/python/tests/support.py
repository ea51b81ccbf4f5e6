"""Test support: runs the real askbusd binary on a temporary socket per test, and puts this
checkout's ``askbus`` package first on the import path (so the tests exercise the source
tree, not whatever version happens to be installed).

The daemon is ``$ASKBUS_DAEMON`` if set, else ``<repo>/target/debug/askbusd``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket as socketlib
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
REPO = PACKAGE_ROOT.parent.parent
SRC = PACKAGE_ROOT / "src"
# ASKBUS_TEST_INSTALLED=1 (scripts/package-test.sh, in a fresh venv holding the built wheel):
# test the installed package instead of the source tree.
INSTALLED = os.environ.get("ASKBUS_TEST_INSTALLED") == "1"
if not INSTALLED and str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

DATA = REPO / "clients" / "rust" / "tests" / "data"


def daemon_binary() -> str:
    path = os.environ.get("ASKBUS_DAEMON") or str(REPO / "target" / "debug" / "askbusd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"askbusd not found at {path}: build it with `cargo build --bin askbusd` in "
            f"{REPO}, or point $ASKBUS_DAEMON at the binary"
        )
    return path


def load_json(name: str) -> Any:
    with open(DATA / name, encoding="utf-8") as f:
        return json.load(f)


class Daemon:
    """One askbusd process on ``socket``, restartable on the same socket and telemetry file."""

    def __init__(
        self,
        socket: str,
        telemetry: Optional[str],
        args: Optional[List[str]] = None,
        env: Optional[Dict[str, str]] = None,
    ) -> None:
        self.socket = socket
        self.telemetry = telemetry
        self.args = list(args or [])
        self.env = env
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log: List[str] = []

    def start(self, timeout: float = 10.0) -> None:
        cmd = [daemon_binary(), "--threads", "2"]
        if self.socket:
            cmd += ["--socket", self.socket]
        cmd += ["--telemetry", self.telemetry] if self.telemetry else ["--no-telemetry"]
        # Protocol v1 exactly, unless a test asks for the store: no state shared through the
        # user's default store between tests, and no policy rule deciding a test's approvals.
        if not any(a == "--store" or a.startswith("--store=") or a == "--no-store"
                   for a in self.args):
            cmd.append("--no-store")
        cmd += self.args
        env = dict(self.env if self.env is not None else os.environ)
        env.setdefault("ASKBUS_POLICIES", "off")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env,
        )
        ready = threading.Event()
        proc = self.proc

        def drain() -> None:
            # Read stderr to its end so the daemon never blocks on a full pipe.
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode("utf-8", "replace")
                self.log.append(line)
                if "askbusd ready on" in line:
                    ready.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.02):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"askbusd did not start: {''.join(self.log)}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self._drain.join(5)
        assert proc.stderr is not None
        proc.stderr.close()
        return code

    def restart(self, sig: int = signal.SIGTERM, down_for: float = 0.0) -> None:
        self.stop(sig)
        time.sleep(down_for)
        self.start()

    def records(self) -> List[Dict[str, Any]]:
        """Telemetry lines written so far (across restarts)."""
        if not self.telemetry or not os.path.exists(self.telemetry):
            return []
        with open(self.telemetry, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_records(self, n: int, timeout: float = 5.0) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            records = self.records()
            if len(records) >= n or time.monotonic() > deadline:
                return records
            time.sleep(0.02)


class DaemonTestCase(unittest.TestCase):
    """Each test gets its own daemon on its own temporary socket (``self.socket``)."""

    daemon_args: List[str] = []

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="askbus-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.socket = os.path.join(self.tmp, "askbus.sock")
        self.daemon = Daemon(self.socket, os.path.join(self.tmp, "telemetry.jsonl"),
                             self.daemon_args)
        self.daemon.start()
        self.addCleanup(self.daemon.stop)


class AsyncDaemonTestCase(unittest.IsolatedAsyncioTestCase):
    daemon_args: List[str] = []

    async def asyncSetUp(self) -> None:
        # IsolatedAsyncioTestCase turns on asyncio's debug mode, which makes the tests that
        # keep a thousand asks in flight several times slower and warns about them as slow
        # callbacks; unretrieved task exceptions are still reported without it.
        loop = asyncio.get_running_loop()
        loop.set_debug(False)
        loop.slow_callback_duration = 2.0

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="askbus-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.socket = os.path.join(self.tmp, "askbus.sock")
        self.daemon = Daemon(self.socket, os.path.join(self.tmp, "telemetry.jsonl"),
                             self.daemon_args)
        self.daemon.start()
        self.addCleanup(self.daemon.stop)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.01)


def raw_exchange(socket: str, frames: List[Dict[str, Any]], expect: int) -> List[Dict[str, Any]]:
    """Sends frames on a plain socket and reads ``expect`` frames back: a peer that uses
    none of the client library, to watch the daemon's view independently."""
    import struct

    s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    s.settimeout(5)
    s.connect(socket)
    try:
        for frame in frames:
            payload = json.dumps(frame).encode()
            s.sendall(struct.pack(">I", len(payload)) + payload)
        out = []
        buf = b""
        while len(out) < expect:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 4:
                (n,) = struct.unpack(">I", buf[:4])
                if len(buf) < 4 + n:
                    break
                out.append(json.loads(buf[4 : 4 + n]))
                buf = buf[4 + n :]
        return out
    finally:
        s.close()


def stats(socket: str) -> Dict[str, Any]:
    return raw_exchange(socket, [{"type": "stats"}], 1)[0]


def choice_question(header: str = "Database", labels: tuple = ("SQLite", "PostgreSQL"),
                    multi: bool = False, question: str = "Which database?") -> Dict[str, Any]:
    q: Dict[str, Any] = {
        "question": question,
        "header": header,
        "type": "choice",
        "options": [{"label": label, "description": f"{label} description"} for label in labels],
    }
    if multi:
        q["multiSelect"] = True
    return q


class CuttableProxy:
    """A Unix-socket proxy in front of the daemon that can drop its clients' side of every
    connection while holding the daemon's side open a while longer: the daemon then still
    holds what those connections asked when the clients come back, as after a network-ish
    failure rather than a restart."""

    def __init__(self, listen: str, upstream: str) -> None:
        self.listen = listen
        self.upstream = upstream
        self.pairs: List[tuple] = []
        self.from_daemon = bytearray()
        self._lock = threading.Lock()
        self._server = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        self._server.bind(listen)
        self._server.listen(16)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            up = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
            try:
                up.connect(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.pairs.append((client, up))
            threading.Thread(target=self._pump, args=(client, up, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, client, True), daemon=True).start()

    def _pump(self, src: socketlib.socket, dst: socketlib.socket, record: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            if record:
                with self._lock:
                    self.from_daemon += data
            try:
                dst.sendall(data)
            except OSError:
                return

    def cut_clients(self, hold_upstream: float) -> None:
        with self._lock:
            pairs, self.pairs = self.pairs, []
        for client, _ in pairs:
            try:
                client.shutdown(socketlib.SHUT_RDWR)
            except OSError:
                pass
            client.close()

        def later() -> None:
            time.sleep(hold_upstream)
            for _, up in pairs:
                # shutdown first: close() alone would not wake the pump blocked in recv(),
                # and the daemon would not see the end until it did.
                try:
                    up.shutdown(socketlib.SHUT_RDWR)
                except OSError:
                    pass
                up.close()

        threading.Thread(target=later, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        self.cut_clients(0)
