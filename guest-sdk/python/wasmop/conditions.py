"""Status conditions (`metav1.Condition`) as Kubernetes API conventions want them, with the
Rust SDK's rules: one condition per type; `lastTransitionTime` changes only when the status
changes; `observedGeneration` records which spec the condition describes.

Conditions are dicts with the API's keys (`type`, `status`, `reason`, `message`,
`observedGeneration`, `lastTransitionTime`), so a status is plain JSON data.
"""

from __future__ import annotations

import time
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]


def now() -> str:
    """Now in whole seconds as Kubernetes stores times (`2025-01-01T00:00:00Z`), from the
    host's wall clock (stopped at the scenario's time in `wasmop test`). A clock before 1970
    reads as the epoch."""
    seconds = max(0, int(time.time()))
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def condition(
    type_: str,
    status: bool | Status,
    reason: str,
    message: str,
    observed_generation: int | None = None,
) -> dict[str, Any]:
    """A condition of `type_` with `status` (`True`/`False` or `"Unknown"`), `reason`
    (CamelCase) and `message`, describing `observed_generation` of the object (pass its
    `generation`), transitioning now."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    cond: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation
    return cond


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> bool:
    """Puts `new` into `conditions`, replacing the condition of the same type. When the
    status is unchanged, the old `lastTransitionTime` is kept. Returns whether anything but
    the time changed, so a plugin can skip a status write that would change nothing."""
    new = dict(new)
    for i, old in enumerate(conditions):
        if old.get("type") == new.get("type"):
            if old.get("status") == new.get("status") and "lastTransitionTime" in old:
                new["lastTransitionTime"] = old["lastTransitionTime"]
            changed = old != new
            conditions[i] = new
            return changed
    conditions.append(new)
    return True


def find_condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    """The condition of `type_`, if present."""
    for cond in conditions:
        if cond.get("type") == type_:
            return cond
    return None
