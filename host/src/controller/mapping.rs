//! Which primary objects a change to another object reconciles: owned objects through their
//! ownerReferences, watched objects through the mapping their plugin declared.

use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::plugin::Mapping;

/// The primary kind as the mappers need it.
#[derive(Clone)]
pub struct Primary {
    /// The resolved primary kind.
    pub resource: ApiResource,
    /// Whether it is namespaced.
    pub namespaced: bool,
}

impl Primary {
    fn reference(&self, name: &str, namespace: Option<&str>) -> ObjectRef<DynamicObject> {
        let r = ObjectRef::new_with(name, self.resource.clone());
        match (self.namespaced, namespace) {
            (true, Some(ns)) => r.within(ns),
            _ => r,
        }
    }

    /// The primary objects that own `child`: its ownerReferences of the primary kind (any
    /// version of it). An owner is in the child's namespace, or cluster-scoped.
    pub fn owners_of(&self, child: &DynamicObject) -> Vec<ObjectRef<DynamicObject>> {
        let group_of = |api_version: &str| match api_version.split_once('/') {
            Some((group, _)) => group.to_owned(),
            None => String::new(),
        };
        child
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| {
                o.kind == self.resource.kind && group_of(&o.api_version) == self.resource.group
            })
            .map(|o| self.reference(&o.name, child.metadata.namespace.as_deref()))
            .collect()
    }

    /// The primary objects a change to `watched` maps to under `mapping`. `primaries` is the
    /// cache of primary objects (for the namespace-wide and global mappings).
    pub fn mapped(
        &self,
        mapping: &Mapping,
        watched: &DynamicObject,
        primaries: &Store<DynamicObject>,
    ) -> Vec<ObjectRef<DynamicObject>> {
        let ns = watched.metadata.namespace.as_deref();
        let one = |name: &str| vec![self.reference(name, ns)];
        match mapping {
            Mapping::SameName => watched
                .metadata
                .name
                .as_deref()
                .map(one)
                .unwrap_or_default(),
            Mapping::Label(label) => watched
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(label))
                .map(|name| one(name))
                .unwrap_or_default(),
            Mapping::Annotation(annotation) => watched
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotation))
                .map(|value| match value.split_once('/') {
                    Some((ns, name)) => vec![self.reference(name, Some(ns))],
                    None => one(value),
                })
                .unwrap_or_default(),
            Mapping::AllInNamespace => primaries
                .state()
                .iter()
                .filter(|p| p.metadata.namespace.as_deref() == ns)
                .filter_map(|p| Some(self.reference(p.metadata.name.as_deref()?, ns)))
                .collect(),
            Mapping::All => {
                primaries
                    .state()
                    .iter()
                    .filter_map(|p| {
                        Some(self.reference(
                            p.metadata.name.as_deref()?,
                            p.metadata.namespace.as_deref(),
                        ))
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::GroupVersionKind;
    use serde_json::json;

    fn primary() -> Primary {
        Primary {
            resource: ApiResource::from_gvk(&GroupVersionKind::gvk(
                "example.com",
                "v1",
                "Database",
            )),
            namespaced: true,
        }
    }

    fn obj(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).expect("object")
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
        let (store, _writer) = {
            let w = kube::runtime::reflector::store::Writer::new(primary().resource);
            (w.as_reader(), w)
        };
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
}
