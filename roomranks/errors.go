package roomranks

import "errors"

// ErrInvalidConfig wraps every Config and constructor error.
var ErrInvalidConfig = errors.New("roomranks: invalid config")
