//! The webhook configurations: one `ValidatingWebhookConfiguration` and one
//! `MutatingWebhookConfiguration` per host deployment (`admission.configurationName`),
//! written by server-side apply (field manager `wasmop`), labelled
//! `app.kubernetes.io/managed-by=wasmop`, with one webhook per plugin that registers that
//! review. They follow the catalog: a new version's registration replaces the old one, a
//! plugin that leaves is taken out, and a configuration left with no webhook is deleted.
//!
//! Only the leader writes (every replica serves). A kind the API server does not serve yet
//! (its CRD not installed) is left out of the rules and tried again every 10 s.
//!
//! Every webhook's `namespaceSelector` leaves out `admission.excludeNamespaces` (by default
//! `kube-system` and the host's own namespace), so that no plugin can stop the control
//! plane's or the host's own objects from being written; a plugin confined to namespaces (`plugins.<name>.namespaces`) only reviews
//! requests in them.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use tokio::sync::watch;

use super::Catalog;
use crate::config::admission::{AdmissionConfig, Endpoint};
use wasmop_controller::kubeapi::discovery::Resolver;
use wasmop_core::cluster::selector::{Expression, LabelSelector as Selector};
use wasmop_runtime::admission::{Registration, ReviewKind};

/// The field manager of the configurations.
const FIELD_MANAGER: &str = "wasmop";
/// How often a configuration with an unresolved kind is written again.
const RETRY: Duration = Duration::from_secs(10);
/// How often a complete configuration is written again (repairs a hand edit).
const RESYNC: Duration = Duration::from_secs(300);
/// The label every configuration the host manages carries.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "wasmop");
/// The namespace label the API server sets on every namespace.
const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

/// Writes the configurations.
pub(crate) struct Registrar {
    client: Client,
    resolver: Resolver,
    config: AdmissionConfig,
    host_namespace: String,
    /// The CA the API server should trust, as it changes; `None` leaves `caBundle` out (to
    /// whoever injects it).
    trusted: watch::Receiver<Option<String>>,
}

/// One plugin's webhook, before it becomes the validating or the mutating type.
struct Entry {
    name: String,
    client_config: WebhookClientConfig,
    rules: Vec<RuleWithOperations>,
    namespace_selector: LabelSelector,
    object_selector: Option<LabelSelector>,
    failure_policy: String,
    timeout_seconds: i32,
}

impl Registrar {
    /// A registrar pointing the API server at `config`'s endpoint, trusting the CA `trusted`
    /// holds.
    pub(crate) fn new(
        client: Client,
        resolver: Resolver,
        config: AdmissionConfig,
        host_namespace: String,
        trusted: watch::Receiver<Option<String>>,
    ) -> Self {
        Self {
            client,
            resolver,
            config,
            host_namespace,
            trusted,
        }
    }

    /// Keeps the configurations in step with the catalog while this host leads, until the
    /// host shuts down.
    pub(crate) async fn run(
        mut self,
        mut catalog: watch::Receiver<Catalog>,
        mut leading: watch::Receiver<bool>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let mut wait = RESYNC;
            if *leading.borrow_and_update() {
                self.trusted.borrow_and_update();
                let current = catalog.borrow_and_update().clone();
                match self.sync(&current).await {
                    Ok(true) => {}
                    Ok(false) => wait = RETRY,
                    Err(error) => {
                        tracing::warn!(error = %wasmop_core::chain(&error), configuration = self.config.configuration_name, "cannot write the webhook configurations; trying again");
                        wait = RETRY;
                    }
                }
            }
            tokio::select! {
                changed = catalog.changed() => if changed.is_err() { return },
                changed = leading.changed() => if changed.is_err() { return },
                changed = self.trusted.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Writes both configurations for `catalog`; `Ok(false)` when a kind could not be
    /// resolved and was left out.
    pub(crate) async fn sync(&self, catalog: &Catalog) -> Result<bool, kube::Error> {
        let (validating, complete_v) = self.entries(catalog, ReviewKind::Validate).await;
        let (mutating, complete_m) = self.entries(catalog, ReviewKind::Mutate).await;
        let name = self.config.configuration_name.clone();
        let validating = ValidatingWebhookConfiguration {
            metadata: self.metadata(),
            webhooks: Some(
                validating
                    .into_iter()
                    .map(|e| ValidatingWebhook {
                        admission_review_versions: vec!["v1".into()],
                        client_config: e.client_config,
                        failure_policy: Some(e.failure_policy),
                        match_policy: Some("Equivalent".into()),
                        name: e.name,
                        namespace_selector: Some(e.namespace_selector),
                        object_selector: e.object_selector,
                        rules: Some(e.rules),
                        side_effects: "None".into(),
                        timeout_seconds: Some(e.timeout_seconds),
                        ..ValidatingWebhook::default()
                    })
                    .collect(),
            ),
        };
        let mutating = MutatingWebhookConfiguration {
            metadata: self.metadata(),
            webhooks: Some(
                mutating
                    .into_iter()
                    .map(|e| MutatingWebhook {
                        admission_review_versions: vec!["v1".into()],
                        client_config: e.client_config,
                        failure_policy: Some(e.failure_policy),
                        match_policy: Some("Equivalent".into()),
                        name: e.name,
                        namespace_selector: Some(e.namespace_selector),
                        object_selector: e.object_selector,
                        reinvocation_policy: Some("Never".into()),
                        rules: Some(e.rules),
                        side_effects: "None".into(),
                        timeout_seconds: Some(e.timeout_seconds),
                        ..MutatingWebhook::default()
                    })
                    .collect(),
            ),
        };
        let v: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let m: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        if validating.webhooks.as_ref().is_some_and(Vec::is_empty) {
            delete(&v, &name).await?;
        } else {
            v.patch(&name, &apply(), &Patch::Apply(&validating)).await?;
        }
        if mutating.webhooks.as_ref().is_some_and(Vec::is_empty) {
            delete(&m, &name).await?;
        } else {
            m.patch(&name, &apply(), &Patch::Apply(&mutating)).await?;
        }
        Ok(complete_v && complete_m)
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.config.configuration_name.clone()),
            labels: Some(
                [
                    (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
                    (
                        "wasmop.dev/host-namespace".to_owned(),
                        self.host_namespace.clone(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        }
    }

    /// The webhooks of `kind` for every plugin that registers one, and whether every kind
    /// was resolved.
    async fn entries(&self, catalog: &Catalog, kind: ReviewKind) -> (Vec<Entry>, bool) {
        let mut complete = true;
        let mut entries = Vec::new();
        for (name, webhook) in catalog.iter() {
            let Some(registration) = webhook.registration(kind) else {
                continue;
            };
            let mut rules = Vec::new();
            for rule in &registration.rules {
                match self.resolver.resolve(&rule.kind).await {
                    Ok(resolved) => rules.push(RuleWithOperations {
                        api_groups: Some(vec![rule.kind.group.clone()]),
                        api_versions: Some(vec![rule.kind.version.clone()]),
                        operations: Some(
                            rule.operations
                                .iter()
                                .map(|o| o.as_api().to_owned())
                                .collect(),
                        ),
                        resources: Some(vec![match &rule.subresource {
                            Some(sub) => format!("{}/{sub}", resolved.resource.plural),
                            None => resolved.resource.plural.clone(),
                        }]),
                        scope: Some(
                            if resolved.namespaced {
                                "Namespaced"
                            } else {
                                "Cluster"
                            }
                            .into(),
                        ),
                    }),
                    Err(error) => {
                        complete = false;
                        tracing::warn!(plugin = %name, review = kind.as_str(), kind = %rule.kind.kind, error = %error, "a kind the plugin reviews is not served by the API server; registering without it for now");
                    }
                }
            }
            if rules.is_empty() {
                continue;
            }
            entries.push(Entry {
                name: format!("{name}.plugins.wasmop.dev"),
                client_config: self.client_config(kind, name.as_str()),
                rules,
                namespace_selector: self
                    .namespace_selector(registration, webhook.namespaces.as_ref()),
                object_selector: registration.object_selector.as_deref().map(selector),
                failure_policy: webhook.failure_policy(registration).as_api().to_owned(),
                timeout_seconds: i32::try_from(registration.timeout.as_secs()).unwrap_or(30),
            });
        }
        (entries, complete)
    }

    fn client_config(&self, kind: ReviewKind, plugin: &str) -> WebhookClientConfig {
        let path = format!("/{}/{plugin}", kind.as_str());
        let ca_bundle = self
            .trusted
            .borrow()
            .as_ref()
            .map(|pem| ByteString(pem.clone().into_bytes()));
        match &self.config.endpoint {
            Endpoint::Url { base, .. } => WebhookClientConfig {
                ca_bundle,
                service: None,
                url: Some(format!("{base}{path}")),
            },
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                ca_bundle,
                service: Some(ServiceReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    path: Some(path),
                    port: Some(i32::from(*port)),
                }),
                url: None,
            },
        }
    }

    /// The plugin's namespace selector, less the excluded namespaces, within
    /// the namespaces it is confined to.
    fn namespace_selector(
        &self,
        registration: &Registration,
        confined: Option<&std::collections::BTreeSet<String>>,
    ) -> LabelSelector {
        let mut selector = registration
            .namespace_selector
            .as_deref()
            .map(selector)
            .unwrap_or_default();
        let expressions = selector.match_expressions.get_or_insert_with(Vec::new);
        if !self.config.exclude_namespaces.is_empty() {
            expressions.push(LabelSelectorRequirement {
                key: NAMESPACE_NAME.into(),
                operator: "NotIn".into(),
                values: Some(self.config.exclude_namespaces.clone()),
            });
        }
        if let Some(confined) = confined {
            expressions.push(LabelSelectorRequirement {
                key: NAMESPACE_NAME.into(),
                operator: "In".into(),
                values: Some(confined.iter().cloned().collect()),
            });
        }
        selector
    }
}

/// A selector the plugin declared (checked at load) in the API's structured form.
fn selector(text: &str) -> LabelSelector {
    let expressions = Selector::parse(text)
        .map(|s| s.expressions())
        .unwrap_or_default();
    LabelSelector {
        match_expressions: Some(
            expressions
                .into_iter()
                .map(
                    |Expression {
                         key,
                         operator,
                         values,
                     }| LabelSelectorRequirement {
                        key,
                        operator: operator.to_owned(),
                        values: (!values.is_empty()).then_some(values),
                    },
                )
                .collect(),
        ),
        match_labels: None,
    }
}

fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_selector_becomes_match_expressions() {
        let s = selector("env in (prod), !legacy");
        let e = s.match_expressions.expect("expressions");
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].key.as_str(), e[0].operator.as_str()), ("env", "In"));
        assert_eq!(e[0].values.as_deref(), Some(&["prod".to_owned()][..]));
        assert_eq!(e[1].operator, "DoesNotExist");
        assert_eq!(e[1].values, None);
    }
}
