//! `wasmop check FILE`: load a component as the host would and print what it declares.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

use super::{Exit, RawRuntime};
use wasmop_core::plugin::{Mapping, Permission, PluginInfo, Watch};
use wasmop_runtime::{AllocatorChoice, AllocatorMode, LoadOptions, Plugin, Runtime, RuntimeConfig};

/// The exit codes, as `--help` shows them.
const EXIT_CODES: &str = "\
Exit codes:
  0  the plugin loads; what it declares is printed
  1  it cannot be read or loaded, or what it declares is refused (the reason is on stderr)
  2  a usage error (bad or missing arguments)";

/// Arguments of `wasmop check`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RawCheck {
    /// The plugin component (.wasm).
    file: PathBuf,
    /// Build the engine as `wasmop run --concurrency N` would: probe the pooling allocator
    /// for N concurrent calls, fall back to on-demand allocation where the machine cannot
    /// reserve its address space, and print which one this machine gets. Without it, `check`
    /// uses on-demand allocation (one load needs no pool).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: Option<u32>,
    #[command(flatten)]
    runtime: RawRuntime,
}

fn gvk(g: &kube::core::GroupVersionKind) -> String {
    shown(&format!("{} {}", g.api_version(), g.kind))
}

/// What the plugin declared, as a terminal may show it. `describe` validates every field, so
/// this changes nothing in a loaded plugin's summary; it keeps a field a validator might miss
/// from writing escape sequences or rows to the operator's terminal.
fn shown(s: &str) -> String {
    wasmop_core::plugin::text::PluginText::new(s).into_string()
}

/// The human-readable summary `check` prints.
pub(crate) fn render(file: &std::path::Path, plugin: &Plugin, engine: &AllocatorMode) -> String {
    let mut out = artefact(file, plugin, engine);
    let _ = writeln!(out, "name:        {}", plugin.name());
    let _ = writeln!(out, "version:     {}", shown(plugin.version()));
    match plugin.reconciler() {
        Some(info) => reconciler(&mut out, info),
        None => {
            let _ = writeln!(out, "reconciler:  none (it serves admission only)");
        }
    }
    match plugin.admission() {
        None => {
            let _ = writeln!(out, "webhooks:    none");
        }
        Some(admission) => {
            let _ = writeln!(out, "webhooks:");
            for (what, registration) in [
                ("validating", &admission.validating),
                ("mutating", &admission.mutating),
            ] {
                if let Some(r) = registration {
                    let _ = writeln!(out, "  {what}: {}", webhook_line(r));
                }
            }
            if !admission.permissions.is_empty() {
                let reads = admission.permissions.iter().map(permission_line);
                let _ = writeln!(out, "  reads: {}", list(reads));
            }
        }
    }
    let _ = writeln!(out, "grants:");
    for line in plugin.grants().to_string().lines() {
        let _ = writeln!(out, "  {line}");
    }
    out
}

/// The summary's lines about the reconciler: its kinds, finalizer and permissions.
fn reconciler(out: &mut String, info: &PluginInfo) {
    let PluginInfo {
        name: _,
        version: _,
        primary,
        primary_selector,
        owns,
        watches,
        finalizer,
        reconcile_on_metadata_change,
        permissions,
    } = info;
    let _ = write!(out, "primary:     {}", gvk(primary));
    if let Some(s) = primary_selector {
        let _ = write!(out, " (selector: {})", shown(s));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "reconcile on metadata change: {reconcile_on_metadata_change}"
    );
    let _ = writeln!(out, "owns:        {}", list(owns.iter().map(gvk)));
    let watches = watches.iter().map(watch_line);
    let _ = writeln!(out, "watches:     {}", list(watches));
    let _ = writeln!(
        out,
        "finalizer:   {}",
        shown(finalizer.as_deref().unwrap_or("none"))
    );
    let permissions = permissions.iter().map(permission_line);
    let _ = writeln!(out, "permissions: {}", list(permissions));
}

/// The summary's first lines: the file, its size and digest, the contract version it was
/// built against, how it was loaded, the engine.
fn artefact(file: &std::path::Path, plugin: &Plugin, engine: &AllocatorMode) -> String {
    let stats = plugin.load_stats();
    let mut out = String::new();
    let _ = writeln!(out, "file:        {}", file.display());
    let _ = writeln!(out, "size:        {} bytes", stats.size);
    let _ = writeln!(out, "digest:      sha256:{}", plugin.digest());
    let _ = writeln!(out, "contract:    wasmop:plugin@{}", plugin.contract());
    let how = if stats.precompiled {
        "precompiled by wasmop compile"
    } else if stats.from_cache {
        "loaded from cache"
    } else {
        "compiled"
    };
    let _ = writeln!(
        out,
        "load time:   {} ms ({how})",
        stats.compile_time.as_millis()
    );
    let _ = writeln!(out, "engine:      {engine}");
    out
}

/// One webhook: its rules, selectors, failure policy and timeout.
fn webhook_line(r: &wasmop_runtime::Registration) -> String {
    let rules: Vec<String> = r
        .rules
        .iter()
        .map(|rule| {
            let ops: Vec<&str> = rule.operations.iter().map(|o| o.as_api()).collect();
            let sub = rule
                .subresource
                .as_deref()
                .map(|s| format!("/{}", shown(s)))
                .unwrap_or_default();
            format!("{}{sub} on {}", gvk(&rule.kind), ops.join(","))
        })
        .collect();
    let mut line = rules.join("; ");
    if let Some(s) = &r.namespace_selector {
        let _ = write!(line, " (namespaces: {})", shown(s));
    }
    if let Some(s) = &r.object_selector {
        let _ = write!(line, " (objects: {})", shown(s));
    }
    let _ = write!(
        line,
        ", failure policy {}, timeout {} s",
        r.failure_policy.as_api(),
        r.timeout.as_secs()
    );
    line
}

/// One watched kind: its kind, its selector and how it maps to primaries.
fn watch_line(w: &Watch) -> String {
    let mapping = match &w.mapping {
        Mapping::SameName => "same name".to_owned(),
        Mapping::Label(l) => format!("label {}", shown(l)),
        Mapping::Annotation(a) => format!("annotation {}", shown(a)),
        Mapping::AllInNamespace => "all in namespace".to_owned(),
        Mapping::All => "all".to_owned(),
    };
    match &w.selector {
        Some(s) => format!(
            "{} (selector: {}; maps by {mapping})",
            gvk(&w.kind),
            shown(s)
        ),
        None => format!("{} (maps by {mapping})", gvk(&w.kind)),
    }
}

/// One declared permission: its verbs, group/kind and namespaces.
fn permission_line(p: &Permission) -> String {
    let verbs: Vec<String> = p.verbs.iter().map(ToString::to_string).collect();
    let group = if p.group.is_empty() { "core" } else { &p.group };
    let scope = if p.namespaces.is_empty() {
        String::new()
    } else {
        format!(" in {}", p.namespaces.join(", "))
    };
    shown(&format!(
        "{} on {group}/{}{scope}",
        verbs.join(", "),
        p.kind
    ))
}

fn list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// Runs `wasmop check`.
pub(crate) async fn run(raw: RawCheck) -> anyhow::Result<Exit> {
    let config = match raw.concurrency {
        Some(n) => RuntimeConfig::default()
            .concurrency(n)
            .allocator(AllocatorChoice::Auto),
        None => RuntimeConfig::default()
            .concurrency(1)
            .allocator(AllocatorChoice::OnDemand),
    };
    let config = raw.runtime.apply(config);
    let runtime = Runtime::new(config).context("cannot start the plugin runtime")?;
    let plugin = runtime
        .load_file(&raw.file, LoadOptions::default())
        .await
        .with_context(|| format!("{} is not a usable plugin", raw.file.display()))?;
    print!("{}", render(&raw.file, &plugin, runtime.allocator()));
    Ok(Exit::Success)
}
