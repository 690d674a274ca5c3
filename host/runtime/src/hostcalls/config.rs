//! `wasmop:plugin/config`: the plugin's settings, as the operator gave them.

use super::wit::config::Host;
use crate::call::CallState;

impl Host for CallState {
    async fn get(&mut self) -> wasmtime::Result<String> {
        Ok(self.host.config_json().to_owned())
    }
}
