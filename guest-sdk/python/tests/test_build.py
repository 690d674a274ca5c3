"""Unit tests of the build script's choice of world (`guest-sdk/python/build`), which reads
the plugin's `app.py` without running it."""

from __future__ import annotations

import importlib.util
import tempfile
import textwrap
import unittest
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType


def load_build() -> ModuleType:
    """The build script as a module (it has no `.py` suffix, so by its loader)."""
    path = Path(__file__).resolve().parent.parent / "build"
    loader = SourceFileLoader("wasmop_build", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


build = load_build()


def world(app: str) -> str:
    """The world `build` picks for a plugin whose `app.py` is `app`."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "app.py").write_text(textwrap.dedent(app))
        result: str = build.world(Path(tmp))
        return result


class World(unittest.TestCase):
    def test_each_set_of_exports_has_its_world(self) -> None:
        self.assertEqual(world("Reconciler = wasmop.export(R)\n"), "plugin")
        self.assertEqual(
            world("Admission = wasmop.export_admission(A, name='a', version='1')\n"),
            "admission-plugin",
        )
        self.assertEqual(
            world("Reconciler = wasmop.export(R)\nAdmission = wasmop.export_admission(A, R)\n"),
            "plugin-with-admission",
        )

    def test_only_top_level_assignments_are_exports(self) -> None:
        app = """
            from wasmop import Admission, Reconciler

            class A(Admission):
                Reconciler = None

            def helper():
                Admission = 1

            Admission == 2
            Reconciler = wasmop.export(R)
        """
        self.assertEqual(world(app), "plugin")

    def test_annotated_tuple_and_guarded_assignments_count(self) -> None:
        self.assertEqual(
            world("Admission: type = wasmop.export_admission(A, R)\n"), "admission-plugin"
        )
        self.assertEqual(
            world("Reconciler, Admission = export(R), export_admission(A, R)\n"),
            "plugin-with-admission",
        )
        app = """
            try:
                import fast
            except ImportError:
                fast = None
            if True:
                Admission = wasmop.export_admission(A, name="a", version="1")
        """
        self.assertEqual(world(app), "admission-plugin")

    def test_an_app_py_with_no_export_or_that_does_not_parse_is_refused(self) -> None:
        with self.assertRaisesRegex(build.BuildError, "assigns neither `Reconciler`"):
            world("import wasmop\n")
        with self.assertRaisesRegex(build.BuildError, r"app.py:1: "):
            world("Admission = (\n")


if __name__ == "__main__":
    unittest.main()
