"""Log lines into the host's log, tagged with the plugin's name and the object being
reconciled: `wasmop.log.info("applied %s", name)` (or `ctx.log.info(...)`). The host cuts
long lines, rate-limits floods and escapes control characters, so one call is one line.

`print` also works (stdout and stderr reach the host's log, capped), but has no level.
"""

from __future__ import annotations

from typing import Any

from . import _wit


class Logger:
    """Writes log lines at a level; `%`-style arguments are formatted only when given."""

    def log(self, level: str, message: str, *args: Any) -> None:
        """Writes `message % args` at `level` (`trace`, `debug`, `info`, `warn`, `error`)."""
        text = message % args if args else message
        _wit.log.log(_wit.log.Level[level.upper()], text)

    def trace(self, message: str, *args: Any) -> None:
        """Very detailed."""
        self.log("trace", message, *args)

    def debug(self, message: str, *args: Any) -> None:
        """Detailed."""
        self.log("debug", message, *args)

    def info(self, message: str, *args: Any) -> None:
        """Normal."""
        self.log("info", message, *args)

    def warn(self, message: str, *args: Any) -> None:
        """Suspicious."""
        self.log("warn", message, *args)

    def error(self, message: str, *args: Any) -> None:
        """Failed."""
        self.log("error", message, *args)


#: The plugin's logger.
logger = Logger()
trace = logger.trace
debug = logger.debug
info = logger.info
warn = logger.warn
error = logger.error
