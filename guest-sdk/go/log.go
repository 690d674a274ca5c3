package wasmop

import "fmt"

// Level is a log line's severity, as in the host's tracing levels.
type Level int

// The levels.
const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Logger writes log lines into the host's log, tagged with the plugin's name and the object
// being reconciled. The host escapes each line (one call is always one line) and caps and
// rate-limits them.
type Logger struct{ host Host }

func (l Logger) log(level Level, format string, args []any) {
	if l.host != nil {
		l.host.Log(level, fmt.Sprintf(format, args...))
	}
}

// Tracef logs at trace level.
func (l Logger) Tracef(format string, args ...any) { l.log(LevelTrace, format, args) }

// Debugf logs at debug level.
func (l Logger) Debugf(format string, args ...any) { l.log(LevelDebug, format, args) }

// Infof logs at info level.
func (l Logger) Infof(format string, args ...any) { l.log(LevelInfo, format, args) }

// Warnf logs at warn level.
func (l Logger) Warnf(format string, args ...any) { l.log(LevelWarn, format, args) }

// Errorf logs at error level.
func (l Logger) Errorf(format string, args ...any) { l.log(LevelError, format, args) }
