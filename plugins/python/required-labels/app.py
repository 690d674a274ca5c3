"""`required-labels` in Python: an admission-only plugin (it exports `admission` and no
`reconciler`, world `admission-plugin`). Its validating webhook refuses a Deployment, on
create or update, that lacks one of the labels the cluster requires, or gives one an empty
value; the required label keys are the plugin's settings (`labels`, default `["team"]`). The
same logic as the Rust plugin, passing the same golden cases
(`plugins/rust/required-labels/tests/admission`).

Build: `guest-sdk/python/build plugins/python/required-labels -o required-labels.wasm`.
"""

from typing import Any

import wasmop
from wasmop import DEPLOYMENT, Allowed, Context, Operation, Refused, Review, Webhook, Webhooks

#: The label keys required when the settings name none: every Deployment says which team
#: owns it.
DEFAULT_LABELS = ("team",)


def invalid_settings() -> Refused:
    """The refusal of every review while the settings are unusable: the operator's mistake,
    not the user's (`InternalError`, 500)."""
    return Refused(
        "the plugin's settings are invalid: `labels` must be a list of label keys",
        "InternalError",
        500,
    )


def required_labels(settings: Any) -> list[str]:
    """The label keys the settings require, in their order: `labels`, or the default when it
    is absent or `null` (as the Rust twin reads it, an `Option`). Raises `invalid_settings()`
    when `labels` is not a list of strings or the settings are not an object."""
    if not isinstance(settings, dict):
        raise invalid_settings()
    labels = settings.get("labels")
    if labels is None:
        return list(DEFAULT_LABELS)
    if not (isinstance(labels, list) and all(isinstance(key, str) for key in labels)):
        raise invalid_settings()
    return labels


class RequiredLabels(wasmop.Admission):
    kind = DEPLOYMENT

    def webhooks(self) -> Webhooks:
        return Webhooks(
            validating=Webhook([Operation.CREATE, Operation.UPDATE], timeout_seconds=5),
        )

    def validate(self, review: Review, ctx: Context) -> Allowed | None:
        deployment = review.object
        if deployment is None:
            return None
        required = required_labels(ctx.config())
        labels = deployment.labels
        missing = [key for key in required if labels.get(key, "") == ""]
        if missing:
            name = "(generated name)" if review.name is None else review.name
            raise Refused.invalid(
                f"Deployment {name} lacks the labels this cluster requires: {', '.join(missing)}"
            )
        return None


Admission = wasmop.export_admission(RequiredLabels, name="required-labels", version="0.1.0")
