//! A size probe for `bench/run`'s size section: kubebuilder's CronJob tutorial controller
//! ported to a wasmop plugin as an author would, on k8s-openapi's types and the `cron` crate.
//! Its spec embeds a `JobTemplateSpec` (so the whole PodSpec is decoded and encoded), it lists
//! the Jobs it owns, records the active ones and the last schedule time in its status, deletes
//! finished Jobs beyond the history limits, and creates the Job of a missed schedule. Built as
//! it is, and with `--features light` (the owned Jobs listed as a view of their metadata and
//! status only).

use std::str::FromStr as _;

use chrono::{DateTime, TimeZone as _, Utc};
use serde::{Deserialize, Serialize};
use wasmop_guest::k8s_openapi::api::batch::v1::{Job, JobStatus, JobTemplateSpec};
use wasmop_guest::k8s_openapi::api::core::v1::ObjectReference;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use wasmop_guest::k8s_openapi::jiff::Timestamp;
use wasmop_guest::{
    Action, Context, DeleteOptions, Info, Object, ReconcileError, Reconciler, object_reference,
    owned_meta,
};

/// The annotation that records when a Job was scheduled to run.
const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct CronJob {
    metadata: ObjectMeta,
    spec: CronJobSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<CronJobStatus>,
}

wasmop_guest::custom_resource!(
    CronJob,
    group = "batch.tutorial.kubebuilder.io",
    version = "v1",
    kind = "CronJob",
    plural = "cronjobs",
    namespaced
);

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
struct CronJobSpec {
    schedule: String,
    starting_deadline_seconds: Option<i64>,
    #[serde(default)]
    concurrency_policy: ConcurrencyPolicy,
    #[serde(default)]
    suspend: bool,
    job_template: JobTemplateSpec,
    successful_jobs_history_limit: Option<i32>,
    failed_jobs_history_limit: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
enum ConcurrencyPolicy {
    #[default]
    Allow,
    Forbid,
    Replace,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
struct CronJobStatus {
    #[serde(default)]
    active: Vec<ObjectReference>,
    last_schedule_time: Option<Time>,
}

/// What the plugin reads of a Job: its metadata and status.
#[cfg(feature = "light")]
#[derive(Serialize, Deserialize, Clone, Debug)]
struct JobView {
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<JobStatus>,
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

fn status_of(job: &Listed) -> Option<&JobStatus> {
    job.status.as_ref()
}

/// "Complete" or "Failed" once the Job finished.
fn finished(job: &Listed) -> Option<&str> {
    status_of(job)?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

fn scheduled_at(job: &Listed) -> Option<DateTime<Utc>> {
    let text = job.metadata.annotations.as_ref()?.get(SCHEDULED_AT)?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn to_chrono(t: &Time) -> DateTime<Utc> {
    Utc.timestamp_opt(t.0.as_second(), 0)
        .single()
        .unwrap_or_default()
}

fn to_time(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or_default())
}

/// Deletes the oldest of `jobs` beyond `limit`.
fn prune(ctx: &Context, mut jobs: Vec<&Listed>, limit: Option<i32>) -> Result<(), ReconcileError> {
    let Some(limit) = limit else { return Ok(()) };
    let keep = usize::try_from(limit).unwrap_or(0);
    jobs.sort_by_key(|j| {
        status_of(j)
            .and_then(|s| s.start_time.as_ref())
            .map(to_chrono)
    });
    let excess = jobs.len().saturating_sub(keep);
    for job in &jobs[..excess] {
        match ctx.delete_with::<Job>(job.namespace(), job.name(), &DeleteOptions::new()) {
            Err(e) if e.is_not_found() => {}
            other => other?,
        }
    }
    Ok(())
}

struct Plugin;

impl Reconciler for Plugin {
    type Object = CronJob;

    fn describe() -> Info {
        Info::new("size-cronjob", "0.1.0").owns::<Job>()
    }

    fn reconcile(cron_job: CronJob, ctx: &Context) -> Result<Action, ReconcileError> {
        let jobs: Vec<Listed> = ctx.list_owned(&cron_job)?;
        let (mut active, mut successful, mut failed) = (vec![], vec![], vec![]);
        let mut most_recent: Option<DateTime<Utc>> = None;
        for job in &jobs {
            match finished(job) {
                None => active.push(job),
                Some("Failed") => failed.push(job),
                Some(_) => successful.push(job),
            }
            if let Some(at) = scheduled_at(job) {
                most_recent = Some(most_recent.map_or(at, |m| m.max(at)));
            }
        }
        let old = cron_job.status.clone().unwrap_or_default();
        let status = CronJobStatus {
            active: active
                .iter()
                .map(|j| object_reference(*j))
                .collect::<Result<_, _>>()?,
            last_schedule_time: most_recent.map(to_time).or(old.last_schedule_time.clone()),
        };
        if status != old {
            ctx.update_status(&cron_job, &status)?;
        }
        let spec = &cron_job.spec;
        prune(ctx, failed, spec.failed_jobs_history_limit)?;
        prune(ctx, successful, spec.successful_jobs_history_limit)?;
        if spec.suspend {
            return Ok(Action::Done);
        }

        let schedule = cron::Schedule::from_str(&spec.schedule).map_err(|e| {
            ReconcileError::permanent(format!("unparseable schedule {:?}: {e}", spec.schedule))
        })?;
        let now = Utc::now();
        let mut earliest = status
            .last_schedule_time
            .as_ref()
            .or(cron_job.metadata.creation_timestamp.as_ref())
            .map_or(now, to_chrono);
        if let Some(deadline) = spec.starting_deadline_seconds {
            earliest = earliest.max(now - chrono::Duration::seconds(deadline));
        }
        let mut missed = None;
        for (count, at) in schedule
            .after(&earliest)
            .take_while(|t| *t <= now)
            .enumerate()
        {
            if count > 100 {
                return Err(ReconcileError::permanent(
                    "too many missed start times (> 100): set or decrease startingDeadlineSeconds",
                ));
            }
            missed = Some(at);
        }
        let next = schedule.after(&now).next();
        let requeue = next.map_or(Action::Done, |n| {
            Action::RequeueAfter((n - now).to_std().unwrap_or_default())
        });
        let Some(missed) = missed else {
            return Ok(requeue);
        };
        if let Some(deadline) = spec.starting_deadline_seconds {
            if missed + chrono::Duration::seconds(deadline) < now {
                return Ok(requeue);
            }
        }
        match spec.concurrency_policy {
            ConcurrencyPolicy::Forbid if !active.is_empty() => return Ok(requeue),
            ConcurrencyPolicy::Replace => {
                for job in &active {
                    ctx.delete_with::<Job>(job.namespace(), job.name(), &DeleteOptions::new())?;
                }
            }
            _ => {}
        }

        let template = &spec.job_template;
        let name = format!("{}-{}", cron_job.name(), missed.timestamp());
        let mut metadata = owned_meta(&cron_job, &name)?;
        let from = template.metadata.clone().unwrap_or_default();
        metadata.labels = from.labels;
        let mut annotations = from.annotations.unwrap_or_default();
        annotations.insert(SCHEDULED_AT.to_owned(), missed.to_rfc3339());
        metadata.annotations = Some(annotations);
        let job = Job {
            metadata,
            spec: template.spec.clone(),
            status: None,
        };
        match ctx.create(&job) {
            Err(e) if e.is_already_exists() => {}
            other => {
                other?;
            }
        }
        Ok(requeue)
    }
}

wasmop_guest::export!(Plugin);
