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

// ConfigChecks collects the field errors of one Validate, so that every
// field at fault is reported, each as a *ConfigError wrapping sentinel:
//
//	checks := apperr.NewConfigChecks(ErrInvalidConfig)
//	checks.Check(c.Batch >= 1, "Batch", "want at least 1, got %d", c.Batch)
//	return checks.Err()
type ConfigChecks struct {
	sentinel error
	errs     []error
}

// NewConfigChecks returns checks whose errors wrap sentinel.
func NewConfigChecks(sentinel error) *ConfigChecks { return &ConfigChecks{sentinel: sentinel} }

// Check records "<sentinel>: <field>: <message>" for field unless ok.
func (c *ConfigChecks) Check(ok bool, field, format string, args ...any) {
	if !ok {
		c.errs = append(c.errs, BadConfig(field, "%w: %s: %s", c.sentinel, field, fmt.Sprintf(format, args...)))
	}
}

// Err returns the recorded errors joined, or nil.
func (c *ConfigChecks) Err() error { return errors.Join(c.errs...) }
