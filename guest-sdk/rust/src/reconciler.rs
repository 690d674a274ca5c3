//! The [`Reconciler`] trait a plugin implements, the [`Action`] it returns, and the adapter
//! that [`export!`](crate::export) connects to the component's exports.

use std::marker::PhantomData;
use std::time::Duration;

use crate::bindings::exports::wasmop::plugin::reconciler as wit;
use crate::context::Context;
use crate::error::{ReconcileError, chain};
use crate::info::Info;
use crate::object::{Gvk, Object, ObjectRef, from_json};

/// What to do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more until something changes (or the periodic resync).
    Done,
    /// Reconcile again after this long (the host works in milliseconds).
    RequeueAfter(Duration),
}

impl From<Action> for wit::Action {
    fn from(action: Action) -> Self {
        match action {
            Action::Done => Self::Done,
            // Saturating: u64 milliseconds outlast any cluster.
            Action::RequeueAfter(after) => {
                Self::RequeueAfter(u64::try_from(after.as_millis()).unwrap_or(u64::MAX))
            }
        }
    }
}

/// A reconcile plugin: one type, exported with [`export!`](crate::export).
///
/// Reconcile is level-based: given the object as it is now, make the world match it, and be
/// idempotent, since the host calls it again on every change, resync and retry. Each call runs
/// in a fresh instance, so nothing carries over between calls; keep state in the cluster.
pub trait Reconciler {
    /// The primary kind: a k8s-openapi type, or a CRD type declared with
    /// [`custom_resource!`](crate::custom_resource).
    type Object: Object;

    /// What the plugin declares. Called once per loaded version; must not make host calls.
    fn describe() -> Info;

    /// Brings the world in line with `object`.
    fn reconcile(object: Self::Object, ctx: &Context) -> Result<Action, ReconcileError>;

    /// Called instead of `reconcile` for an object that is being deleted and carries the
    /// plugin's finalizer (see [`Info::finalizer`]); the host removes the finalizer when this
    /// returns `Ok(Action::Done)`. The default has nothing to clean up.
    fn cleanup(object: Self::Object, ctx: &Context) -> Result<Action, ReconcileError> {
        let _ = (object, ctx);
        Ok(Action::Done)
    }
}

/// Connects a [`Reconciler`] to the generated export trait. Used by [`export!`](crate::export).
#[doc(hidden)]
pub struct Adapter<R>(PhantomData<R>);

impl<R: Reconciler> Adapter<R> {
    fn call(
        request: wit::Request,
        f: fn(R::Object, &Context) -> Result<Action, ReconcileError>,
    ) -> Result<wit::Action, wit::Error> {
        let object: R::Object = from_json(&request.object).map_err(|e| {
            let target = &request.target;
            wit::Error::Permanent(format!(
                "cannot decode {} {}{} from the host as {}: {}",
                target.kind.kind,
                target
                    .namespace
                    .as_deref()
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default(),
                target.name,
                Gvk::of::<R::Object>(),
                chain(&e)
            ))
        })?;
        let target = ObjectRef::of(&object).map_err(|e| wit::Error::Permanent(chain(&e)))?;
        match f(object, &Context::new(target)) {
            Ok(action) => Ok(action.into()),
            Err(e) if e.is_retryable() => Err(wit::Error::Retryable(e.message().to_owned())),
            Err(e) => Err(wit::Error::Permanent(e.message().to_owned())),
        }
    }
}

impl<R: Reconciler> wit::Guest for Adapter<R> {
    fn describe() -> wit::Info {
        R::describe().into_wit(Gvk::of::<R::Object>())
    }

    fn reconcile(request: wit::Request) -> Result<wit::Action, wit::Error> {
        Self::call(request, R::reconcile)
    }

    fn cleanup(request: wit::Request) -> Result<wit::Action, wit::Error> {
        Self::call(request, R::cleanup)
    }
}

/// Exports a [`Reconciler`] as the component's `wasmop:plugin/reconciler` implementation,
/// and with `admission = A` also an [`Admission`](crate::admission::Admission) as its
/// `wasmop:plugin/admission` (`export!(MyReconciler, admission = MyAdmission)`). A plugin
/// that only serves admission exports no reconciler and names itself:
/// `export!(admission = MyPolicy, name = "my-policy", version = env!("CARGO_PKG_VERSION"))`
/// (world `admission-plugin`; the host runs no controller for it, only its webhooks). Use
/// it once, at the top level of the plugin crate (a `cdylib`).
///
/// ```
/// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
/// use wasmop_guest::{Action, Context, Info, ReconcileError, Reconciler};
///
/// struct Hello;
///
/// impl Reconciler for Hello {
///     type Object = ConfigMap;
///
///     fn describe() -> Info {
///         Info::new("hello", "0.1.0")
///     }
///
///     fn reconcile(cm: ConfigMap, _ctx: &Context) -> Result<Action, ReconcileError> {
///         wasmop_guest::info!("saw {}", cm.metadata.name.unwrap_or_default());
///         Ok(Action::Done)
///     }
/// }
///
/// wasmop_guest::export!(Hello);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export {
    ($reconciler:ty) => {
        // wit-bindgen's export macro takes a bare identifier; name the adapter type here.
        #[doc(hidden)]
        type __WasmopGuestExport = $crate::__private::Adapter<$reconciler>;
        $crate::__private::bindings::__export_plugin!(__WasmopGuestExport with_types_in $crate::__private::bindings);
    };
    ($reconciler:ty, admission = $admission:ty $(,)?) => {
        $crate::export!($reconciler);
        #[doc(hidden)]
        type __WasmopGuestAdmission = $crate::__private::AdmissionAdapter<$crate::__private::ReconcilerIdentity<$reconciler>, $admission>;
        $crate::__private::bindings::admission::__export_admission_plugin!(__WasmopGuestAdmission with_types_in $crate::__private::bindings::admission);
    };
    (admission = $admission:ty, name = $name:expr, version = $version:expr $(,)?) => {
        #[doc(hidden)]
        struct __WasmopGuestIdentity;
        impl $crate::__private::Identity for __WasmopGuestIdentity {
            fn identity() -> (::std::string::String, ::std::string::String) {
                (::std::string::String::from($name), ::std::string::String::from($version))
            }
        }
        #[doc(hidden)]
        type __WasmopGuestAdmission = $crate::__private::AdmissionAdapter<__WasmopGuestIdentity, $admission>;
        $crate::__private::bindings::admission::__export_admission_plugin!(__WasmopGuestAdmission with_types_in $crate::__private::bindings::admission);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_after_is_in_milliseconds() {
        assert!(matches!(
            wit::Action::from(Action::RequeueAfter(Duration::from_secs(2))),
            wit::Action::RequeueAfter(2000)
        ));
        assert!(matches!(
            wit::Action::from(Action::RequeueAfter(Duration::MAX)),
            wit::Action::RequeueAfter(u64::MAX)
        ));
    }
}
