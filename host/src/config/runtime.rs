//! The conversion into the runtime's own [`RuntimeConfig`]: the engine-wide settings that
//! follow from the host config (concurrency, the largest memory limit, whether any plugin
//! meters fuel, tiers, the lanes, artefact directories, the compile bound).

use wasmop_runtime::{Limits, RuntimeConfig};

use super::Config;

impl Config {
    /// The plugin runtime's configuration for this host. `wasmop run` and `wasmop compile
    /// --config` both build it here, so that artefacts compiled ahead of time are made with
    /// exactly the engine settings the host uses.
    ///
    /// The engine meters fuel when any plugin's settings (its own, or the defaults) have a
    /// budget. Every plugin a source may bring later, while the host runs, gets one of these
    /// settings, so the decision made here at start holds for all of them.
    pub(crate) fn runtime_config(&self) -> RuntimeConfig {
        let limits = Limits {
            memory: self.max_memory(),
            ..Limits::default()
        };
        let mut config = RuntimeConfig::default()
            .concurrency(self.concurrency)
            .limits(limits)
            .consume_fuel(self.any_fuel_budget())
            .tiered(self.tiered_compilation)
            .perf_map(self.perf_map)
            .dev_sources(self.dev_sources)
            .demote_after(self.demote_after)
            .describe_deadline(self.describe_deadline)
            .max_compile_bytes(self.max_compile_bytes);
        if let Some(dir) = &self.cache_directory {
            config = config.cache_dir(dir);
        }
        if let Some(dir) = &self.precompiled_directory {
            config = config.precompiled_dir(dir);
        }
        config
    }

    /// Whether any plugin (or the defaults) has a fuel budget.
    pub(crate) fn any_fuel_budget(&self) -> bool {
        self.plugins
            .values()
            .chain(std::iter::once(&self.defaults))
            .any(|s| s.limits.fuel.is_some())
    }

    /// The largest memory limit of any plugin: the runtime sizes its instance slots by it.
    pub(crate) fn max_memory(&self) -> u64 {
        self.plugins
            .values()
            .chain(std::iter::once(&self.defaults))
            .map(|s| s.limits.memory)
            .max()
            .unwrap_or(self.defaults.limits.memory)
    }
}
