//! What an operator checks first, per plugin: version, state, last error, reconcile counts;
//! the components a source holds that run as no plugin, and why they were refused; and for
//! the host: leadership and readiness. The host records into [`Status`]; the health
//! server serves its [`Snapshot`] as JSON on `/status`, which `wasmop status` prints, and
//! `/readyz` answers from it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The longest last-error message kept: an error chain is a line or two; a plugin's own
/// message is capped so that a plugin cannot grow `/status` without bound.
const MAX_ERROR_LEN: usize = 2048;

/// The most refused components listed: each is a file or key of a source the operator
/// configured, and every refusal is logged and reported as an Event anyway.
const MAX_REFUSED: usize = 64;

/// Where a plugin is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Loaded; its controller has not started yet.
    Loaded,
    /// One of its kinds is not served by the API server yet (its CRD is missing).
    WaitingForKinds,
    /// Its watches are filling their caches.
    Syncing,
    /// Caches are warm; another host holds the leader Lease, so it does not reconcile.
    Standby,
    /// It reconciles.
    Running,
    /// Its controller could not start or stopped with an error (see `last_error`).
    Failed,
    /// Its controller stopped (shutdown, or removed).
    Stopped,
    /// It serves admission reviews only: it exports no reconciler, so it has no controller,
    /// and every replica serves its webhooks, leader or not.
    Reviewing,
}

impl State {
    /// Whether a plugin in this state still holds up readiness (its caches are not synced).
    fn pending(self) -> bool {
        matches!(self, State::Loaded | State::Syncing)
    }
}

/// The host's part in leader election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Leadership {
    /// Leader election is off: this host always reconciles.
    Disabled,
    /// This host holds the Lease.
    Leader,
    /// Another host holds the Lease (or none does yet).
    Standby,
}

/// One plugin's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginStatus {
    /// The version its `describe` returns.
    pub(crate) version: String,
    /// The component's short digest.
    pub(crate) digest: String,
    /// Its state.
    pub state: State,
    /// The last error reported for it (a failed reconcile, a controller that cannot start).
    pub(crate) last_error: Option<String>,
    /// When the last error happened (RFC 3339).
    pub(crate) last_error_at: Option<String>,
    /// Reconciles that succeeded.
    pub(crate) reconciles: u64,
    /// Reconciles that did not.
    pub(crate) errors: u64,
}

/// A component that runs as no plugin: its version was refused (a load error, the policy, a
/// component too big to compile here) and no earlier version of it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Why, as the log line and the Event say it.
    pub(crate) error: String,
    /// When (RFC 3339).
    pub(crate) at: String,
}

/// Everything `/status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Whether `/readyz` answers ready.
    pub ready: bool,
    /// The host's part in leader election.
    pub leadership: Leadership,
    /// Per plugin name.
    pub plugins: BTreeMap<String, PluginStatus>,
    /// Per component (`<key> in <source>`) that was refused and provides no plugin, at most
    /// 64 of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, Refusal>,
}

#[derive(Debug)]
struct Inner {
    plugins_loaded: bool,
    leadership: Leadership,
    plugins: BTreeMap<String, PluginStatus>,
    refused: BTreeMap<String, Refusal>,
}

/// The shared, mutable status. Cheap to clone; every method is a short critical section
/// (never held across an `.await`).
#[derive(Debug, Clone)]
pub struct Status {
    inner: Arc<Mutex<Inner>>,
}

impl Status {
    /// A status with no plugins yet, not ready, with the given leadership.
    pub fn new(leadership: Leadership) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                plugins_loaded: false,
                leadership,
                plugins: BTreeMap::new(),
                refused: BTreeMap::new(),
            })),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        // A panic while holding the lock leaves plain data behind; keep using it.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut inner)
    }

    /// Records a loaded plugin (state `loaded`), replacing what was known of that name.
    pub fn loaded(&self, plugin: &str, version: &str, digest: &str) {
        self.with(|i| {
            i.plugins.insert(
                plugin.to_owned(),
                PluginStatus {
                    version: version.to_owned(),
                    digest: digest.to_owned(),
                    state: State::Loaded,
                    last_error: None,
                    last_error_at: None,
                    reconciles: 0,
                    errors: 0,
                },
            );
        });
    }

    /// A new version of a plugin runs: its version and digest change, its state and counts
    /// stay (the same controller goes on). An unknown plugin is recorded as [`Status::loaded`].
    pub fn version(&self, plugin: &str, version: &str, digest: &str) {
        let known = self.with(|i| match i.plugins.get_mut(plugin) {
            Some(p) => {
                p.version = version.to_owned();
                p.digest = digest.to_owned();
                true
            }
            None => false,
        });
        if !known {
            self.loaded(plugin, version, digest);
        }
    }

    /// Records an error about a plugin that does not change its state: a rejected new
    /// version, a failing one rolled back. Unknown plugins are ignored.
    pub fn error(&self, plugin: &str, error: String) {
        self.with(|i| {
            if let Some(p) = i.plugins.get_mut(plugin) {
                set_error(p, error);
            }
        });
    }

    /// Records that `component` (`<key> in <source>`) was refused and provides no plugin,
    /// replacing what was known of it; beyond [`MAX_REFUSED`] components, new ones are left
    /// to the log and the Events.
    pub fn refused(&self, component: &str, error: String) {
        self.with(|i| {
            if i.refused.len() < MAX_REFUSED || i.refused.contains_key(component) {
                i.refused.insert(
                    component.to_owned(),
                    Refusal {
                        error: capped(error),
                        at: Timestamp::now().to_string(),
                    },
                );
            }
        });
    }

    /// Forgets `component`'s refusal: a version of it runs now, or it left its source.
    pub fn not_refused(&self, component: &str) {
        self.with(|i| {
            i.refused.remove(component);
        });
    }

    /// Forgets a plugin removed from its source.
    pub fn remove(&self, plugin: &str) {
        self.with(|i| {
            i.plugins.remove(plugin);
        });
    }

    /// Every plugin the host found at start is loaded (or refused): readiness now depends
    /// only on their caches.
    pub fn plugins_loaded(&self) {
        self.with(|i| i.plugins_loaded = true);
    }

    /// Records a plugin's state and, when given, its last error. Unknown plugins are
    /// ignored (a plugin is known from [`Status::loaded`] on).
    pub fn record(&self, plugin: &str, state: State, error: Option<String>) {
        self.with(|i| {
            if let Some(p) = i.plugins.get_mut(plugin) {
                p.state = state;
                if let Some(e) = error {
                    set_error(p, e);
                }
            }
        });
    }

    /// Counts one reconcile; a failure's message becomes the last error.
    pub(crate) fn reconciled(&self, plugin: &str, error: Option<String>) {
        self.with(|i| {
            if let Some(p) = i.plugins.get_mut(plugin) {
                match error {
                    None => p.reconciles += 1,
                    Some(e) => {
                        p.errors += 1;
                        set_error(p, e);
                    }
                }
            }
        });
    }

    /// Records the host's part in leader election; running plugins become standby and back.
    pub fn set_leadership(&self, leadership: Leadership) {
        self.with(|i| {
            i.leadership = leadership;
            for p in i.plugins.values_mut() {
                p.state = match (p.state, leadership) {
                    (State::Running, Leadership::Standby) => State::Standby,
                    (State::Standby, Leadership::Leader | Leadership::Disabled) => State::Running,
                    (s, _) => s,
                };
            }
        });
    }

    /// Ready: every plugin found at start is loaded and none is still syncing its caches.
    /// A plugin waiting for its CRD or failed does not hold readiness up (it is reported).
    pub(crate) fn ready(&self) -> bool {
        self.with(|i| i.plugins_loaded && !i.plugins.values().any(|p| p.state.pending()))
    }

    /// A copy of everything, for `/status`.
    pub fn snapshot(&self) -> Snapshot {
        let ready = self.ready();
        self.with(|i| Snapshot {
            ready,
            leadership: i.leadership,
            plugins: i.plugins.clone(),
            refused: i.refused.clone(),
        })
    }
}

fn set_error(p: &mut PluginStatus, error: String) {
    p.last_error = Some(capped(error));
    p.last_error_at = Some(Timestamp::now().to_string());
}

/// `error` cut at [`MAX_ERROR_LEN`] bytes, on a character boundary, marked with `…`.
fn capped(mut error: String) -> String {
    if error.len() > MAX_ERROR_LEN {
        let mut cut = MAX_ERROR_LEN;
        while !error.is_char_boundary(cut) {
            cut -= 1;
        }
        error.truncate(cut);
        error.push('…');
    }
    error
}

/// A cell as a terminal may show it: the snapshot may come from any host, and last errors
/// quote what plugins said, so no newline or escape sequence passes raw (see [`wasmop_core::plugin::text`]).
fn shown(s: &str) -> String {
    wasmop_core::plugin::text::PluginText::new(s).into_string()
}

/// The snapshot as an operator reads it: one line for the host, one row per plugin, then a
/// line per last error and per refused component; every string escaped for the terminal.
pub fn render(s: &Snapshot) -> String {
    let leadership = match s.leadership {
        Leadership::Disabled => "leader election off",
        Leadership::Leader => "leader",
        Leadership::Standby => "standby",
    };
    let mut out = format!(
        "host: {} ({leadership})\n",
        if s.ready { "ready" } else { "not ready" }
    );
    if s.plugins.is_empty() {
        out.push_str("no plugins\n");
        render_refused(s, &mut out);
        return out;
    }
    let rows: Vec<[String; 6]> = s
        .plugins
        .iter()
        .map(|(name, p)| {
            [
                shown(name),
                shown(&p.version),
                shown(&p.digest),
                serde_json::to_value(p.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                p.reconciles.to_string(),
                p.errors.to_string(),
            ]
        })
        .collect();
    let header = [
        "PLUGIN",
        "VERSION",
        "DIGEST",
        "STATE",
        "RECONCILES",
        "ERRORS",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for (name, p) in &s.plugins {
        if let Some(e) = &p.last_error {
            let at = p.last_error_at.as_deref().unwrap_or("");
            let (name, at, e) = (shown(name), shown(at), shown(e));
            out.push_str(&format!("last error of {name} ({at}): {e}\n"));
        }
    }
    render_refused(s, &mut out);
    out
}

fn render_refused(s: &Snapshot, out: &mut String) {
    for (component, r) in &s.refused {
        let (component, at, e) = (shown(component), shown(&r.at), shown(&r.error));
        out.push_str(&format!("refused {component} ({at}): {e}\n"));
    }
}

#[cfg(test)]
mod tests;
