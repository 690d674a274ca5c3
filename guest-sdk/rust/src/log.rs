//! Log lines into the host's logs, tagged with the plugin's name and the object being
//! reconciled. Use the macros: [`info!`](crate::info), [`warn!`](crate::warn), ...

use crate::bindings::wasmop::plugin::log as wit;

/// Severity, as in `tracing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Detailed.
    Debug,
    /// Normal.
    Info,
    /// Suspicious.
    Warn,
    /// Failed.
    Error,
}

/// Writes one log line. The host cuts long lines and rate-limits floods.
pub fn write(level: Level, message: &str) {
    let level = match level {
        Level::Trace => wit::Level::Trace,
        Level::Debug => wit::Level::Debug,
        Level::Info => wit::Level::Info,
        Level::Warn => wit::Level::Warn,
        Level::Error => wit::Level::Error,
    };
    wit::log(level, message);
}

/// Logs at trace level, with `format!` arguments.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Trace, &::std::format!($($arg)+)) };
}

/// Logs at debug level, with `format!` arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Debug, &::std::format!($($arg)+)) };
}

/// Logs at info level, with `format!` arguments: `wasmop_guest::info!("applied {name}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Info, &::std::format!($($arg)+)) };
}

/// Logs at warn level, with `format!` arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Warn, &::std::format!($($arg)+)) };
}

/// Logs at error level, with `format!` arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Error, &::std::format!($($arg)+)) };
}
