"""What `export` runs at build time, which componentize-py snapshots (`wasmop/warm.py`):
on the build machine's CPython, with the world's real bindings and fake host calls."""

from __future__ import annotations

import unittest
from typing import Any
from unittest import mock

from test_sdk import DATABASE, Plugin, Spec, Tls, call, kube_err

import wasmop
from wasmop import _wit


class WarmUp(unittest.TestCase):
    """What `export` runs at build time (componentize-py snapshots it), against fakes."""

    HOST = (
        (_wit.kube, "get"),
        (_wit.kube, "list"),
        (_wit.kube, "apply"),
        (_wit.kube, "patch_status"),
        (_wit.kube, "delete"),
        (_wit.events, "emit"),
        (_wit.log, "log"),
        (_wit.config, "get"),
    )

    def test_the_host_calls_are_what_they_were_after_export(self) -> None:
        before = [getattr(m, n) for m, n in self.HOST]
        wasmop.export(Plugin)
        self.assertEqual([getattr(m, n) for m, n in self.HOST], before)
        # And a call after it reaches them, not a fake.
        applied: list[str] = []

        def body(obj: wasmop.Object, ctx: wasmop.Context) -> None:
            ctx.apply({"metadata": {"name": "x", "namespace": "shop"}}, wasmop.CONFIG_MAP)

        with mock.patch.object(_wit.kube, "apply", lambda b: applied.append(b) or b):
            result = call(body)
        self.assertIsInstance(result, _wit.exports.Action_Done)
        self.assertEqual(len(applied), 1)

    def test_a_plugin_of_a_cluster_scoped_kind_warms_too(self) -> None:
        class Namespaces(Plugin):
            kind = wasmop.NAMESPACE

        self.assertTrue(callable(wasmop.export(Namespaces)().reconcile))

    def test_the_plugins_own_dataclasses_are_worked_out_at_export(self) -> None:
        from wasmop import objects

        objects._PLANS.clear()
        wasmop.export(Plugin)
        # Spec and Tls are this module's: the plugin's own, as app.py's would be.
        self.assertIn(Spec, objects._PLANS)
        self.assertIn(Tls, objects._PLANS)
        self.assertEqual(objects._PLANS[Spec].keys[-1], "maxConnections")
        # And decoding with a worked-out plan says what it said before.
        with self.assertRaises(wasmop.DecodeError) as caught:
            wasmop.decode(Spec, {"engine": "pg", "port": 1, "x": 1}, deny_unknown=True)
        self.assertIn("unknown field `x`, expected one of `engine`, `port`", str(caught.exception))

    def test_warm_up_objects_are_reconciled_against_an_empty_cluster(self) -> None:
        seen: list[Any] = []

        class Warmed(Plugin):
            warm_up = ({**DATABASE, "spec": {"engine": "warm", "port": 1}},)

            def reconcile(self, obj: wasmop.Object, ctx: wasmop.Context) -> None:
                got = ctx.get(wasmop.CONFIG_MAP, "x", obj.namespace)
                listed = ctx.list(wasmop.CONFIG_MAP, obj.namespace)
                stored = ctx.apply(
                    {"metadata": {"name": "x", "namespace": "shop"}}, wasmop.CONFIG_MAP
                ).object()
                status = ctx.update_status(obj, {"ready": True}).object()
                seen.append((obj["spec"]["engine"], got, listed, stored.name, status.name))

        with mock.patch.object(_wit.kube, "apply", kube_err(_wit.types.KubeError_Other, "real")):
            wasmop.export(Warmed)
        # Twice (CPython specialises on the second run), never through the real host.
        self.assertEqual(seen, [("warm", None, [], "x", "orders")] * 2)

    def test_a_warm_up_entry_that_is_not_an_object_fails_the_build_naming_it(self) -> None:
        class Nameless(Plugin):
            warm_up = ({"apiVersion": "demo.wasmop.dev/v1", "kind": "Database"},)

        with self.assertRaises(wasmop.UsageError) as caught:
            wasmop.export(Nameless)
        self.assertIn("Nameless.warm_up[0] is not an object to reconcile", str(caught.exception))
        self.assertIn("has no metadata.name", str(caught.exception))

    def test_a_failing_warm_up_is_said_and_the_build_goes_on(self) -> None:
        class Broken(Plugin):
            warm_up = (DATABASE,)

            def reconcile(self, obj: wasmop.Object, ctx: wasmop.Context) -> None:
                raise KeyError("replicas")

        with mock.patch("sys.stderr") as stderr:
            export = wasmop.export(Broken)
        said = "".join(c.args[0] for c in stderr.write.call_args_list)
        self.assertIn("Broken.warm_up[0] failed", said)
        self.assertIn("KeyError: 'replicas'", said)
        self.assertTrue(callable(export().reconcile))

    def test_the_dev_runner_does_not_warm_every_call(self) -> None:
        from wasmop import warm

        ran: list[bool] = []

        class Counted(Plugin):
            warm_up = (DATABASE,)

            def reconcile(self, obj: wasmop.Object, ctx: wasmop.Context) -> None:
                ran.append(True)

        with mock.patch.object(warm, "ENABLED", False):
            wasmop.export(Counted)
        self.assertEqual(ran, [])


if __name__ == "__main__":
    unittest.main()
