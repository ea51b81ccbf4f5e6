"""The installed package, when there is one (CI runs ``pip install ./clients/python``
first, and scripts/package-test.sh the whole suite in a venv holding the built wheel with
ASKBUS_TEST_INSTALLED=1): it must ship every module of the source tree and ``py.typed``, at
the source's version, and the suite must be testing it. Otherwise the suite tests the source
tree itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unittest

from support import INSTALLED, PACKAGE_ROOT, SRC

PROBE = """
import importlib.metadata as md, json, os
import askbus
root = os.path.dirname(askbus.__file__)
print(json.dumps({
    "file": askbus.__file__,
    "version": askbus.__version__,
    "dist_version": md.version("askbus"),
    "files": sorted(f for f in os.listdir(root) if f.endswith((".py", ".typed"))),
}))
"""


class InstalledPackageTest(unittest.TestCase):
    def test_the_installed_package_is_complete(self) -> None:
        # -I: no PYTHONPATH, no script directory: only what is installed.
        probe = subprocess.run([sys.executable, "-I", "-c", PROBE], capture_output=True,
                               text=True, cwd="/")
        if probe.returncode != 0:
            if INSTALLED:
                self.fail(f"ASKBUS_TEST_INSTALLED=1 but askbus does not import: {probe.stderr}")
            self.skipTest("askbus is not installed (pip install ./clients/python)")
        info = json.loads(probe.stdout)
        self.assertFalse(info["file"].startswith(str(SRC)), "expected an installed copy")
        source_files = sorted(p.name for p in (SRC / "askbus").iterdir()
                              if p.name.endswith((".py", ".typed")))
        self.assertIn("py.typed", info["files"])
        self.assertEqual(info["files"], source_files)
        sys.path.insert(0, str(SRC))
        import askbus

        self.assertEqual(info["version"], askbus.__version__)
        self.assertEqual(info["dist_version"], askbus.__version__)


    def test_the_suite_tests_what_it_says(self) -> None:
        import askbus

        from_source = askbus.__file__.startswith(str(SRC))
        self.assertEqual(from_source, not INSTALLED, askbus.__file__)


class VersionTest(unittest.TestCase):
    def test_pyproject_and_module_agree(self) -> None:
        text = (PACKAGE_ROOT / "pyproject.toml").read_text(encoding="utf-8")
        match = re.search(r'^version = "([^"]+)"$', text, re.M)
        assert match is not None
        import askbus

        self.assertEqual(match.group(1), askbus.__version__)


if __name__ == "__main__":
    unittest.main()
