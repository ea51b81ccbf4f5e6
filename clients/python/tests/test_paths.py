"""Default socket resolution: the client's rule against the daemon's own (src/paths.rs),
checked by starting the real daemon with no --socket in a given environment and connecting
with no socket argument in the same one."""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from typing import Dict, Optional
from unittest import mock

from support import Daemon

import askbus


def env_without(*names: str, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(extra)
    return env


class ResolutionRuleTest(unittest.TestCase):
    def resolve(self, env: Dict[str, str], uid: int = 1000) -> str:
        with mock.patch.dict(os.environ, env, clear=True), mock.patch("os.geteuid",
                                                                       return_value=uid):
            return askbus.default_socket_path()

    def test_order_of_the_rule(self) -> None:
        self.assertEqual(self.resolve({"ASKBUS_SOCKET": "/x/a.sock",
                                       "XDG_RUNTIME_DIR": "/run/user/1000"}), "/x/a.sock")
        self.assertEqual(self.resolve({"XDG_RUNTIME_DIR": "/run/user/1000"}),
                         "/run/user/1000/askbus.sock")
        self.assertEqual(self.resolve({"XDG_RUNTIME_DIR": "/run/user/1000/"}),
                         "/run/user/1000/askbus.sock")
        self.assertEqual(self.resolve({}, uid=0), "/run/askbus/askbus.sock")
        self.assertEqual(self.resolve({}, uid=1234), "/tmp/askbus-1234/askbus.sock")

    def test_empty_variables_count_as_unset(self) -> None:
        self.assertEqual(self.resolve({"ASKBUS_SOCKET": "", "XDG_RUNTIME_DIR": "/r"}),
                         "/r/askbus.sock")
        self.assertEqual(self.resolve({"ASKBUS_SOCKET": "", "XDG_RUNTIME_DIR": ""}, uid=7),
                         "/tmp/askbus-7/askbus.sock")

    def test_relative_paths_are_kept_as_given(self) -> None:
        self.assertEqual(self.resolve({"ASKBUS_SOCKET": "rel/a.sock"}), "rel/a.sock")

    def test_an_explicit_socket_wins_and_path_objects_work(self) -> None:
        from pathlib import Path

        with mock.patch.dict(os.environ, {"ASKBUS_SOCKET": "/nowhere.sock"}):
            p = askbus.Producer(Path("/tmp/somewhere.sock"))
            self.assertEqual(p.socket_path, "/tmp/somewhere.sock")
            self.assertEqual(askbus.Producer().socket_path, "/nowhere.sock")


class SameRuleAsTheDaemonTest(unittest.TestCase):
    """The daemon picks its socket from the environment; the client, given the same
    environment and no socket, must find it."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="askbus-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def meet(self, env: Dict[str, str], expected: Optional[str]) -> None:
        daemon = Daemon("", None, env=env)
        daemon.start()
        self.addCleanup(daemon.stop)
        with mock.patch.dict(os.environ, env, clear=True):
            path = askbus.default_socket_path()
            if expected is not None:
                self.assertEqual(path, expected)
            self.assertTrue(os.path.exists(path), f"the daemon did not bind {path}")
            r = askbus.ask([{"question": "Q?", "header": "H", "type": "text"}],
                           no_ui="reject")
        self.assertEqual(r.reason, "no-ui")

    def test_askbus_socket(self) -> None:
        path = os.path.join(self.tmp, "explicit.sock")
        self.meet(env_without("XDG_RUNTIME_DIR", ASKBUS_SOCKET=path,
                              XDG_RUNTIME_DIR=os.path.join(self.tmp, "not-this")), path)

    def test_xdg_runtime_dir(self) -> None:
        self.meet(env_without("ASKBUS_SOCKET", XDG_RUNTIME_DIR=self.tmp),
                  os.path.join(self.tmp, "askbus.sock"))

    def test_empty_askbus_socket_falls_through_to_xdg_runtime_dir(self) -> None:
        self.meet(env_without("ASKBUS_SOCKET", ASKBUS_SOCKET="", XDG_RUNTIME_DIR=self.tmp),
                  os.path.join(self.tmp, "askbus.sock"))


if __name__ == "__main__":
    unittest.main()
