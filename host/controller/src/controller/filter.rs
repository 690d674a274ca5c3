//! The generation filter: changes to a primary object that do not bump
//! `metadata.generation` (its status, labels, annotations) do not trigger a reconcile, unless
//! the plugin asked for them.
//!
//! Passed through always: an object seen for the first time, an object without a generation
//! (many built-in kinds have none), and the moment an object starts being deleted (so
//! finalizers run even where deletion does not bump the generation).

use std::collections::HashMap;

use kube::api::ObjectMeta;

/// What the filter remembers of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    generation: Option<i64>,
    deleting: bool,
}

/// Generations seen, per object uid.
#[derive(Debug, Default)]
pub(crate) struct GenerationFilter {
    seen: HashMap<String, Seen>,
}

impl GenerationFilter {
    /// Whether a change to the object with metadata `meta` should trigger a reconcile.
    pub(crate) fn admit(&mut self, meta: &ObjectMeta) -> bool {
        let Some(uid) = meta.uid.clone() else {
            return true;
        };
        let now = Seen {
            generation: meta.generation,
            deleting: meta.deletion_timestamp.is_some(),
        };
        if now.generation.is_none() {
            return true;
        }
        self.seen.insert(uid, now) != Some(now)
    }

    /// Forgets a deleted object.
    pub(crate) fn forget(&mut self, meta: &ObjectMeta) {
        if let Some(uid) = &meta.uid {
            self.seen.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(generation: Option<i64>, rv: &str, deleting: bool) -> ObjectMeta {
        let mut o: ObjectMeta =
            serde_json::from_value(json!({"name": "a", "uid": "u1", "resourceVersion": rv}))
                .expect("metadata");
        o.generation = generation;
        if deleting {
            o.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        }
        o
    }

    #[test]
    fn status_only_change_is_filtered_and_spec_change_passes() {
        let mut f = GenerationFilter::default();
        assert!(f.admit(&obj(Some(1), "1", false)), "first sight");
        assert!(!f.admit(&obj(Some(1), "2", false)), "status-only change");
        assert!(f.admit(&obj(Some(2), "3", false)), "spec change");
    }

    #[test]
    fn deletion_start_passes_even_without_a_generation_bump() {
        let mut f = GenerationFilter::default();
        assert!(f.admit(&obj(Some(1), "1", false)));
        assert!(f.admit(&obj(Some(1), "2", true)));
        assert!(!f.admit(&obj(Some(1), "3", true)));
    }

    #[test]
    fn kinds_without_generation_always_pass() {
        let mut f = GenerationFilter::default();
        assert!(f.admit(&obj(None, "1", false)));
        assert!(f.admit(&obj(None, "2", false)));
    }

    #[test]
    fn a_recreated_object_passes_after_forget() {
        let mut f = GenerationFilter::default();
        let o = obj(Some(1), "1", false);
        assert!(f.admit(&o));
        f.forget(&o);
        assert!(f.admit(&o));
    }
}
