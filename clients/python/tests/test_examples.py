"""The runnable examples, run as a person would: examples/ask.py asking, examples/ui.py
answering from what is typed on its stdin, both as real processes on the real daemon."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import unittest
from typing import List

from support import INSTALLED, PACKAGE_ROOT, SRC, DaemonTestCase

import askbus

EXAMPLES = PACKAGE_ROOT / "examples"


def env() -> dict:
    e = dict(os.environ)
    if not INSTALLED:
        e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    e["PYTHONUNBUFFERED"] = "1"
    return e


class ExamplesTest(DaemonTestCase):
    def start_ui(self, typed: str) -> subprocess.Popen:
        ui = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "ui.py"), "--socket", self.socket, "--once"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env(), text=True,
        )
        self.addCleanup(lambda: ui.poll() is None and ui.kill())
        assert ui.stdout is not None and ui.stdin is not None
        self.assertIn("waiting for questions", ui.stdout.readline())
        ui.stdin.write(typed)
        ui.stdin.close()
        return ui

    def finish(self, ui: subprocess.Popen) -> str:
        assert ui.stdout is not None and ui.stderr is not None
        out = ui.stdout.read()
        ui.wait(10)
        ui.stdout.close()
        ui.stderr.close()
        return out

    def ask(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(EXAMPLES / "ask.py"), "--socket", self.socket, *args],
            capture_output=True, text=True, env=env(), timeout=30,
        )

    def test_ask_answered_by_the_terminal_ui(self) -> None:
        ui = self.start_ui("2\ny\n")
        asked = self.ask()
        out = self.finish(ui)
        self.assertEqual(asked.returncode, 0, asked.stderr)
        self.assertEqual(asked.stdout, "Database: PostgreSQL\nMigrate: Yes\n")
        self.assertIn("askbus-example-ask/0.1.0", out)
        self.assertIn("-> sent", out)
        self.assertEqual(ui.returncode, 0)

    def test_other_text_and_blank_answers(self) -> None:
        ui = self.start_ui("  MySQL \n\n")
        asked = self.ask()
        self.finish(ui)
        self.assertEqual(asked.stdout, "Database: MySQL\n")

    def test_dismissed_from_the_terminal_ui(self) -> None:
        ui = self.start_ui("!\n")
        asked = self.ask()
        self.finish(ui)
        self.assertEqual(asked.returncode, 1)
        self.assertIn("User dismissed ask_user dialog", asked.stderr)

    def test_exit_statuses_without_a_ui_or_a_daemon(self) -> None:
        self.assertEqual(self.ask("--no-ui", "reject").returncode, 3)
        self.assertEqual(self.ask("--timeout-ms", "100").returncode, 2)
        self.daemon.stop()
        gone = self.ask()
        self.assertEqual(gone.returncode, 5)
        self.assertIn(self.socket, gone.stderr)

    def test_ctrl_c_withdraws_the_question(self) -> None:
        withdrawn: List[askbus.Request] = []
        with askbus.subscribe(self.socket, on_withdrawn=withdrawn.append) as sub:
            asking = subprocess.Popen(
                [sys.executable, str(EXAMPLES / "ask.py"), "--socket", self.socket],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
            )
            req = next(iter(sub))
            asking.send_signal(signal.SIGINT)
            _, err = asking.communicate(timeout=10)
            self.assertTrue(req.wait_withdrawn(5))
        self.assertEqual(asking.returncode, 130)
        self.assertIn("withdrawn", err)
        # Withdrawn by the producer, not merely abandoned by a dying connection.
        self.assertEqual(req.withdraw_reason, "withdrawn")
        self.assertEqual(withdrawn, [req])


def readme_blocks() -> List[str]:
    text = (PACKAGE_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


class ReadmeTest(DaemonTestCase):
    def test_the_readme_examples_compile(self) -> None:
        blocks = readme_blocks()
        self.assertGreaterEqual(len(blocks), 2)
        for block in blocks:
            compile(block, "README.md", "exec")

    def test_the_readme_producer_example_runs_as_shown(self) -> None:
        import contextlib
        import io
        import threading
        from unittest import mock

        with askbus.subscribe(self.socket) as sub:
            def ui() -> None:
                for req in sub:
                    req.answer({0: "PostgreSQL"})
                    return

            t = threading.Thread(target=ui, daemon=True)
            t.start()
            out = io.StringIO()
            with mock.patch.dict(os.environ, {"ASKBUS_SOCKET": self.socket}), \
                    contextlib.redirect_stdout(out):
                exec(readme_blocks()[0], {})
            t.join(5)
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "answered {'0': 'PostgreSQL'}")
        self.assertEqual(lines[1], '{"answers":{"0":"PostgreSQL"}}')


if __name__ == "__main__":
    unittest.main()
