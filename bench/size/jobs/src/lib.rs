//! A size probe for `bench/run`'s size section: a plugin that lists the Jobs it owns and
//! creates one from its primary object's spec, the core of a batch controller. Built as it
//! is (k8s-openapi's `Job` both ways), and with `--features light` (the list decoded into a
//! view of the Job's metadata and status only).

use serde::{Deserialize, Serialize};
use wasmop_guest::k8s_openapi::api::batch::v1::{Job, JobSpec};
use wasmop_guest::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::{Action, Context, Info, Object, ReconcileError, Reconciler, owned_meta};

/// The primary kind: run `image` with `command` once per generation.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Task {
    metadata: ObjectMeta,
    spec: TaskSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct TaskSpec {
    image: String,
    #[serde(default)]
    command: Vec<String>,
}

wasmop_guest::custom_resource!(
    Task,
    group = "example.com",
    version = "v1",
    kind = "Task",
    plural = "tasks",
    namespaced
);

/// What the plugin reads of a Job: its metadata and whether it finished.
#[cfg(feature = "light")]
#[derive(Serialize, Deserialize, Clone, Debug)]
struct JobView {
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<wasmop_guest::k8s_openapi::api::batch::v1::JobStatus>,
}

#[cfg(feature = "light")]
wasmop_guest::custom_resource!(
    JobView,
    group = "batch",
    version = "v1",
    kind = "Job",
    plural = "jobs",
    namespaced
);

#[cfg(feature = "light")]
type Listed = JobView;
#[cfg(not(feature = "light"))]
type Listed = Job;

struct Plugin;

impl Reconciler for Plugin {
    type Object = Task;

    fn describe() -> Info {
        Info::new("size-jobs", "0.1.0").owns::<Job>()
    }

    fn reconcile(task: Task, ctx: &Context) -> Result<Action, ReconcileError> {
        let generation = task.generation().unwrap_or_default().to_string();
        let jobs: Vec<Listed> = ctx.list_owned(&task)?;
        let done = jobs.iter().any(|j| {
            j.label("example.com/generation") == Some(&generation)
                && j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
        });
        let running = jobs
            .iter()
            .any(|j| j.label("example.com/generation") == Some(&generation));
        if done || running {
            return Ok(Action::Done);
        }
        let mut metadata = owned_meta(&task, &format!("{}-{generation}", task.name()))?;
        metadata.labels = Some([("example.com/generation".to_owned(), generation)].into());
        ctx.create(&Job {
            metadata,
            spec: Some(JobSpec {
                backoff_limit: Some(2),
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".to_owned()),
                        containers: vec![Container {
                            name: "task".to_owned(),
                            image: Some(task.spec.image.clone()),
                            command: Some(task.spec.command.clone()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        })?;
        Ok(Action::Done)
    }
}

wasmop_guest::export!(Plugin);
