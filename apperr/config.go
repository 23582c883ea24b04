package apperr

import (
	"errors"
	"fmt"
)

// ConfigError is a configuration value that a component's Config.Validate
// rejects. Field is the Go name of the Config field at fault ("BatchSize",
// "PresenceTTL"), so that cmd/voiceroom can report the environment
// variable that set it. Its message is Err's, which names the field in
// words; errors.Is sees through it to a package's sentinel (for example
// bus.ErrInvalidConfig).
type ConfigError struct {
	Field string
	Err   error
}

// Error returns the message of Err.
func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// BadConfig returns a *ConfigError for field whose Err is
// fmt.Errorf(format, args...), so format may wrap a sentinel with %w.
func BadConfig(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ConfigFieldOf returns the Field of the first *ConfigError in err's chain,
// or "".
func ConfigFieldOf(err error) string {
	var e *ConfigError
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
