//! The glue between an [`Admission`] and the generated `admission` export: the request
//! decoded into a typed [`Review`], the answer encoded back, and a mutation laid over the
//! object under review.

use std::marker::PhantomData;

use serde_json::Value;

use super::{Admission, Denied, Review, UserInfo, wit};
use crate::context::Context;
use crate::error::chain;
use crate::object::{Gvk, Object, ObjectRef, from_json};
use crate::reconciler::Reconciler;

/// Connects an [`Admission`] (and the [`Identity`] whose name and version it declares) to
/// the generated export trait. Used by [`export!`](crate::export).
#[doc(hidden)]
pub struct AdmissionAdapter<I, A>(PhantomData<(I, A)>);

/// Where an admission half takes the plugin's name and version from: its reconciler's
/// [`Info`](crate::Info), or, for a plugin that only serves admission, what its
/// `export!(admission = ..., name = ..., version = ...)` says.
#[doc(hidden)]
pub trait Identity {
    /// The plugin's name and version.
    fn identity() -> (String, String);
}

/// The name and version of the reconciler `R`.
#[doc(hidden)]
pub struct ReconcilerIdentity<R>(PhantomData<R>);

impl<R: Reconciler> Identity for ReconcilerIdentity<R> {
    fn identity() -> (String, String) {
        R::describe().identity()
    }
}

/// The request as the SDK's [`Review`], its objects decoded as `T`, and the object's text
/// (which a mutation is laid over); a refusal if they do not decode.
fn decode<T: Object>(
    mut review: wit::Review,
) -> Result<(Review<T>, Context, Option<String>), wit::Denial> {
    let kind = Gvk::of::<T>();
    let object = |text: Option<&str>, which: &str| -> Result<Option<T>, wit::Denial> {
        text.map(|t| {
            from_json::<T>(t).map_err(|e| {
                Denied::new(format!(
                    "cannot decode the {which} as {kind}: {}",
                    chain(&e)
                ))
                .reason("BadRequest")
                .code(400)
                .into_wit()
            })
        })
        .transpose()
    };
    let target = ObjectRef {
        gvk: kind,
        namespace: review.namespace.clone(),
        name: review.name.clone().unwrap_or_default(),
    };
    let text = review.object.take();
    let decoded = Review {
        uid: review.uid,
        operation: review.operation.into(),
        sub_resource: review.sub_resource,
        name: review.name,
        namespace: review.namespace,
        user: UserInfo {
            username: review.user_info.username,
            uid: review.user_info.uid,
            groups: review.user_info.groups,
            extra: review.user_info.extra,
        },
        object: object(text.as_deref(), "object")?,
        old_object: object(review.old_object.as_deref(), "old object")?,
        dry_run: review.dry_run,
    };
    Ok((decoded, Context::new(target), text))
}

/// `changed` laid over `original`: objects are merged key by key (keys `changed` lacks are
/// kept), everything else is replaced.
fn overlay(original: &mut Value, changed: Value) {
    match (original, changed) {
        (Value::Object(o), Value::Object(c)) => {
            for (key, value) in c {
                match o.get_mut(&key) {
                    Some(slot) => overlay(slot, value),
                    None => {
                        o.insert(key, value);
                    }
                }
            }
        }
        (slot, changed) => *slot = changed,
    }
}

impl<I: Identity, A: Admission> wit::Guest for AdmissionAdapter<I, A> {
    fn describe() -> wit::AdmissionInfo {
        let (name, version) = I::identity();
        let kind = Gvk::of::<A::Object>();
        let hooks = A::webhooks();
        wit::AdmissionInfo {
            name,
            version,
            validating: hooks.validating.map(|w| w.into_wit(kind)),
            mutating: hooks.mutating.map(|w| w.into_wit(kind)),
            permissions: hooks.permissions.into_iter().map(Into::into).collect(),
        }
    }

    fn validate(review: wit::Review) -> Result<wit::Allowed, wit::Denial> {
        let (review, ctx, _) = decode::<A::Object>(review)?;
        match A::validate(review, &ctx) {
            Ok(allowed) => Ok(wit::Allowed {
                warnings: allowed.warnings,
            }),
            Err(denied) => Err(denied.into_wit()),
        }
    }

    fn mutate(review: wit::Review) -> Result<wit::Mutation, wit::Denial> {
        let (review, ctx, original) = decode::<A::Object>(review)?;
        let mutated = A::mutate(review, &ctx).map_err(Denied::into_wit)?;
        let object = match (mutated.object, original) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Denied::new("a request without an object cannot be mutated")
                    .reason("BadRequest")
                    .code(400)
                    .into_wit());
            }
            (Some(changed), Some(original)) => {
                let fail = |e: serde_json::Error| {
                    Denied::new(format!("cannot encode the mutated object: {}", chain(&e)))
                        .reason("InternalError")
                        .code(500)
                        .into_wit()
                };
                let mut merged: Value = serde_json::from_str(&original).map_err(fail)?;
                overlay(&mut merged, serde_json::to_value(&changed).map_err(fail)?);
                Some(merged.to_string())
            }
        };
        Ok(wit::Mutation {
            object,
            warnings: mutated.warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_returned_object_is_laid_over_the_original_keeping_unknown_fields() {
        let mut original = json!({"spec": {"engine": "postgres", "newField": 1}, "kind": "X"});
        overlay(
            &mut original,
            json!({"spec": {"replicas": 1, "engine": "postgres"}}),
        );
        assert_eq!(
            original,
            json!({"spec": {"engine": "postgres", "newField": 1, "replicas": 1}, "kind": "X"})
        );
    }
}
