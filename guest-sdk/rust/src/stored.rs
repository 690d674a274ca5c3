//! [`Stored`]: what a write returns — the object as the API server stored it, kept as the
//! JSON text the host sent and decoded only when the plugin asks for it.

use std::fmt;
use std::marker::PhantomData;

use crate::error::Error;
use crate::object::{Object, decode};

/// The object a write ([`Context::create`](crate::Context::create),
/// [`apply`](crate::Context::apply), [`patch`](crate::Context::patch),
/// [`patch_status`](crate::Context::patch_status),
/// [`update_status`](crate::Context::update_status)) left on the API server.
///
/// Most reconciles never look at it, so it stays JSON text until [`object`](Self::object)
/// or [`into_object`](Self::into_object) decodes it: ignoring it costs nothing, and decoding
/// it later reports the same [`Error::Decode`] the write would have.
///
/// ```no_run
/// # // no_run: outside a wasm host every host call panics.
/// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
/// use wasmop_guest::{Context, ReconcileError};
///
/// fn example(cm: &ConfigMap, ctx: &Context) -> Result<(), ReconcileError> {
///     ctx.apply(cm)?; // the stored copy is not needed: nothing is decoded
///     let stored: ConfigMap = ctx.apply(cm)?.into_object()?;
///     wasmop_guest::info!("resourceVersion {:?}", stored.metadata.resource_version);
///     Ok(())
/// }
/// ```
pub struct Stored<T> {
    json: String,
    call: &'static str,
    object: PhantomData<fn() -> T>,
}

impl<T: Object> Stored<T> {
    pub(crate) fn new(json: String, call: &'static str) -> Self {
        Self {
            json,
            call,
            object: PhantomData,
        }
    }

    /// Decodes the stored object (each call decodes again; keep the result).
    pub fn object(&self) -> Result<T, Error> {
        decode(&self.json, self.call)
    }

    /// Decodes the stored object, consuming the text.
    pub fn into_object(self) -> Result<T, Error> {
        self.object()
    }

    /// The stored object as the JSON text the host sent.
    pub fn json(&self) -> &str {
        &self.json
    }
}

impl<T> fmt::Debug for Stored<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stored")
            .field("call", &self.call)
            .field("json", &self.json)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn decodes_only_when_asked_and_names_the_call_on_failure() {
        let good: Stored<ConfigMap> = Stored::new(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}"#.into(),
            "apply",
        );
        let cm = good.object().expect("a ConfigMap");
        assert_eq!(cm.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(good.into_object().expect("a ConfigMap"), cm);

        // Garbage is only an error once someone decodes it.
        let bad: Stored<ConfigMap> = Stored::new("{\"metadata\": 3}".into(), "patch-status");
        assert_eq!(bad.json(), "{\"metadata\": 3}");
        let err = bad.object().expect_err("not a ConfigMap").to_string();
        assert!(err.contains("patch-status"), "{err}");
        assert!(err.contains("ConfigMap"), "{err}");
    }
}
