"""Errors: Kubernetes errors of host calls as exceptions a plugin can catch, and the errors a
reconcile raises to tell the host to retry (or not).

A failed host call raises a subclass of `KubeError` (`NotFound`, `Conflict`, `AlreadyExists`,
`Forbidden`, `Denied`, `Invalid`, `Unavailable`, `Other`), mirroring the WIT `kube-error`. Its
message names the call and the object, then the case and the API server's words, as the Rust
SDK's errors do: `apply ConfigMap shop/orders-config: conflict: the object has been modified`.

What a reconcile does not catch becomes its result (see `wasmop.reconciler`): a `KubeError` is
retryable unless it is `Denied` or `Invalid` (those repeat until the object or the plugin
changes); `Retryable` and `Permanent` say so themselves; any other `wasmop.Error` (a bad
object, bad configuration) is permanent; any other exception is retryable, with its traceback.
"""

from __future__ import annotations

from typing import ClassVar


class Error(Exception):
    """Everything the SDK raises. Permanent unless a subclass says otherwise."""

    retryable: ClassVar[bool] = False

    @property
    def message(self) -> str:
        """The message the host reports."""
        return str(self)


class Retryable(Error):
    """A passing problem: the host retries the object with per-object exponential backoff."""

    retryable = True


class Permanent(Error):
    """The object cannot be reconciled as it is: the host reports it (Event, log, metric)
    and does not retry until the object changes."""

    retryable = False


class DecodeError(Error):
    """An object or a configuration does not have the shape the plugin expects. Permanent:
    the same input fails the same way until it changes."""


class UsageError(Error):
    """The SDK was used in a way that cannot work: an owner without a uid, a namespaced kind
    without a namespace, a guarded write of an object never read from the cluster."""


class KubeError(Error):
    """A host call failed. `call` is the call (`get`, `apply`, `patch-status`, ...), `target`
    what it was about, `reason` the host's (or the API server's) own message."""

    retryable = True
    #: The case's words in the message, as the Rust SDK writes them.
    label: ClassVar[str] = ""

    def __init__(self, call: str, target: str, reason: str) -> None:
        self.call = call
        self.target = target
        self.reason = reason
        prefix = f"{self.label}: " if self.label else ""
        super().__init__(f"{call} {target}: {prefix}{reason}")


class NotFound(KubeError):
    """The object does not exist (HTTP 404)."""

    label = "not found"


class Conflict(KubeError):
    """A write lost a race or its precondition failed (HTTP 409): the object changed since it
    was read. Read it again, or let the reconcile be retried."""

    label = "conflict"


class AlreadyExists(KubeError):
    """`create` found an object of that name (HTTP 409 AlreadyExists). Read it, or apply."""

    label = "already exists"


class Forbidden(KubeError):
    """The host's Kubernetes identity may not do this (HTTP 403 from RBAC); an operator can
    fix it, so it is retried."""

    label = "forbidden"


class Denied(KubeError):
    """The operator's wasmop policy does not grant this call to this plugin. Permanent."""

    retryable = False
    label = "denied by the wasmop policy"


class Invalid(KubeError):
    """The request or the object was invalid (HTTP 400/422). Permanent."""

    retryable = False
    label = "invalid"


class Unavailable(KubeError):
    """The API server is unavailable or throttling and the host's retries ran out."""

    label = "unavailable"


class Other(KubeError):
    """Anything else."""
