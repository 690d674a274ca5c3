"""Unit tests of the `wasmop dev` runner (`wasmop.dev`): reading the sources a dev build
carries and importing the project's modules from them."""

from __future__ import annotations

import importlib
import json
import sys
import traceback
import unittest

from wasmop import dev


def bundle(modules: object, fmt: object = dev.FORMAT) -> bytes:
    return json.dumps({"format": fmt, "modules": modules}).encode()


class Sources(unittest.TestCase):
    def test_a_bundle_gives_its_modules(self) -> None:
        modules = {"app.py": "X = 1\n", "helpers/__init__.py": ""}
        self.assertEqual(dev.sources(bundle(modules)), modules)

    def test_no_sources_says_it_runs_only_under_wasmop_dev(self) -> None:
        with self.assertRaisesRegex(ValueError, "only under|`wasmop dev` build"):
            dev.sources(b"")

    def test_what_is_not_a_bundle_is_named(self) -> None:
        cases: list[tuple[bytes, str]] = [
            (b"{not json", "not JSON"),
            (bundle({"app.py": ""}, fmt=2), "format 1"),
            (bundle(["app.py"]), "`modules`"),
            (bundle({"app.py": 3}), "`modules`"),
            (bundle({"helpers.py": ""}), "no app.py"),
        ]
        for data, says in cases:
            with self.subTest(data=data), self.assertRaisesRegex(ValueError, says):
                dev.sources(data)


class Imports(unittest.TestCase):
    def setUp(self) -> None:
        self.before = set(sys.modules)

    def tearDown(self) -> None:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, dev._Sources)]
        for name in set(sys.modules) - self.before:
            del sys.modules[name]

    def test_modules_and_packages_import_from_the_sources_first(self) -> None:
        files = {
            # `json` is the standard library's: only the project's own names are found here.
            "app.py": (
                "import json\nfrom helpers import shout\nfrom pkg.sub import N\n"
                "X = shout('a') + str(N)\n"
            ),
            "helpers.py": "def shout(s):\n    return s.upper()\n",
            "pkg/__init__.py": "",
            "pkg/sub.py": "N = 7\n",
        }
        sys.meta_path.insert(0, dev._Sources(files))
        app = importlib.import_module("app")
        self.assertEqual(app.X, "A7")
        self.assertEqual(app.__file__, "app.py")
        self.assertIs(app.json, json)

    def test_a_traceback_shows_the_projects_lines(self) -> None:
        files = {"app.py": "X = 1\nraise ValueError('broken on line two')\n"}
        sys.meta_path.insert(0, dev._Sources(files))
        try:
            importlib.import_module("app")
        except ValueError as e:
            last = traceback.extract_tb(e.__traceback__)[-1]
        else:
            self.fail("app.py raised nothing")
        self.assertEqual((last.filename, last.lineno), ("app.py", 2))
        self.assertEqual(last.line, "raise ValueError('broken on line two')")


if __name__ == "__main__":
    unittest.main()
