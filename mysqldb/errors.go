package mysqldb

import "errors"

// ErrOutcomeUnknown marks a transaction whose COMMIT was sent but not
// answered (the connection broke or timed out): it may or may not have
// committed. Callers that keep state derived from the write must reread it
// from MySQL. Every other error of Update means nothing was committed.
var ErrOutcomeUnknown = errors.New("transaction outcome unknown")
