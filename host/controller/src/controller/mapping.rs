//! Which primary objects a change to another object reconciles: owned objects through their
//! ownerReferences, watched objects through the mapping their plugin declared.

use crate::watches::{CachedObject, CachedObjectError, Kind, ObjectKey, Store};
use wasmop_core::plugin::Mapping;

/// The primary kind as the mappers need it.
#[derive(Clone)]
pub(crate) struct Primary {
    /// The resolved primary kind (shared with the cache keys).
    pub(crate) resource: Kind,
    /// Whether it is namespaced.
    pub(crate) namespaced: bool,
}

impl Primary {
    fn reference(&self, name: &str, namespace: Option<&str>) -> ObjectKey {
        ObjectKey::new(namespace.filter(|_| self.namespaced), name)
    }

    /// The primary objects that own `child`: its ownerReferences of the primary kind (any
    /// version of it). An owner is in the child's namespace, or cluster-scoped.
    pub(crate) fn owners_of(&self, child: &CachedObject) -> Vec<ObjectKey> {
        let group_of = |api_version: &str| match api_version.split_once('/') {
            Some((group, _)) => group.to_owned(),
            None => String::new(),
        };
        let owners = match child.owner_references() {
            Ok(owners) => owners,
            Err(error) => {
                unreadable(&error);
                return Vec::new();
            }
        };
        let namespace = child.namespace();
        let namespace = namespace.as_deref();
        owners
            .iter()
            .filter(|o| {
                o.kind == self.resource.kind && group_of(&o.api_version) == self.resource.group
            })
            .map(|o| self.reference(&o.name, namespace))
            .collect()
    }

    /// The primary objects a change to `watched` maps to under `mapping`. `primaries` is the
    /// cache of primary objects (for the namespace-wide and global mappings).
    pub(crate) fn mapped(
        &self,
        mapping: &Mapping,
        watched: &CachedObject,
        primaries: &Store,
    ) -> Vec<ObjectKey> {
        let ns = watched.namespace();
        let ns = ns.as_deref();
        let one = |name: &str| vec![self.reference(name, ns)];
        match mapping {
            Mapping::SameName => Some(watched.name())
                .filter(|name| !name.is_empty())
                .map(|name| one(&name))
                .unwrap_or_default(),
            Mapping::Label(label) => match watched.labels() {
                Ok(labels) => labels.get(label).map(|name| one(name)).unwrap_or_default(),
                Err(error) => {
                    unreadable(&error);
                    Vec::new()
                }
            },
            Mapping::Annotation(annotation) => match watched.annotations() {
                Ok(annotations) => annotations
                    .get(annotation)
                    .map(|value| match value.split_once('/') {
                        Some((ns, name)) => vec![self.reference(name, Some(ns))],
                        None => one(value),
                    })
                    .unwrap_or_default(),
                Err(error) => {
                    unreadable(&error);
                    Vec::new()
                }
            },
            Mapping::AllInNamespace => primaries
                .state()
                .iter()
                .filter(|p| p.namespace().as_deref() == ns)
                .map(|p| self.reference(&p.name(), ns))
                .collect(),
            Mapping::All => primaries
                .state()
                .iter()
                .map(|p| self.reference(&p.name(), p.namespace().as_deref()))
                .collect(),
        }
    }
}

/// A cached object's text that does not decode is a host bug: logged, and the change maps
/// to nothing.
fn unreadable(error: &CachedObjectError) {
    tracing::error!(error = %wasmop_core::chain(error), "cannot read a cached object's metadata");
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::TypeMeta;
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;
    use std::sync::Arc;

    fn primary() -> Primary {
        Primary {
            resource: Arc::new(ApiResource::from_gvk(&GroupVersionKind::gvk(
                "example.com",
                "v1",
                "Database",
            ))),
            namespaced: true,
        }
    }

    fn obj(v: serde_json::Value) -> CachedObject {
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        CachedObject::new(serde_json::from_value(v).expect("object"), &types).expect("cached")
    }

    #[test]
    fn owned_child_maps_to_its_owner_of_the_primary_kind_only() {
        let child = obj(
            json!({"metadata": {"name": "db-config", "namespace": "team", "ownerReferences": [
                {"apiVersion": "example.com/v1", "kind": "Database", "name": "db", "uid": "1", "controller": true},
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "2"}
            ]}}),
        );
        let owners = primary().owners_of(&child);
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].name, "db");
        assert_eq!(owners[0].namespace.as_deref(), Some("team"));
    }

    #[test]
    fn label_and_annotation_mappings_name_the_primary() {
        let store = crate::watches::Writer::new().reader();
        let watched = obj(json!({"metadata": {"name": "x", "namespace": "team",
            "labels": {"db": "orders"}, "annotations": {"target": "other/users"}}}));
        let by_label = primary().mapped(&Mapping::Label("db".into()), &watched, &store);
        assert_eq!(by_label[0].name, "orders");
        assert_eq!(by_label[0].namespace.as_deref(), Some("team"));
        let by_annotation =
            primary().mapped(&Mapping::Annotation("target".into()), &watched, &store);
        assert_eq!(by_annotation[0].name, "users");
        assert_eq!(by_annotation[0].namespace.as_deref(), Some("other"));
        assert!(
            primary()
                .mapped(&Mapping::Label("missing".into()), &watched, &store)
                .is_empty()
        );
        let same = primary().mapped(&Mapping::SameName, &watched, &store);
        assert_eq!(same[0].name, "x");
    }

    #[test]
    fn namespace_and_global_mappings_name_every_cached_primary() {
        let mut writer = crate::watches::Writer::new();
        let store = writer.reader();
        for (ns, name) in [("team", "a"), ("team", "b"), ("other", "c")] {
            let db = obj(json!({"metadata": {"name": name, "namespace": ns}}));
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(db));
        }
        let watched = obj(json!({"metadata": {"name": "x", "namespace": "team"}}));
        let mut in_ns = primary().mapped(&Mapping::AllInNamespace, &watched, &store);
        in_ns.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(
            in_ns,
            [
                ObjectKey::new(Some("team"), "a"),
                ObjectKey::new(Some("team"), "b")
            ]
        );
        let mut all = primary().mapped(&Mapping::All, &watched, &store);
        all.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(all.len(), 3);
        assert_eq!(all[2], ObjectKey::new(Some("other"), "c"));
    }
}
