package listprojector

import "errors"

// ErrInvalidConfig wraps every Config and constructor error.
var ErrInvalidConfig = errors.New("listprojector: invalid config")
