package imemu

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Fault is an injected failure: every matching call fails until it is
// cleared, DurationMs has passed or Calls calls have failed.
type Fault struct {
	// Mode is "error" (answer ErrorCode), "timeout" (answer nothing until
	// the caller gives up) or "http500".
	Mode string `json:"mode"`
	// ErrorCode is the code of mode "error".
	ErrorCode int `json:"error_code"`
	// DurationMs is how long the fault lasts; 0 until cleared.
	DurationMs int64 `json:"duration_ms"`
	// API limits the fault to one "service/command"; empty: all.
	API string `json:"api"`
	// Calls is how many matching calls fail before the fault clears
	// itself; 0: no limit.
	Calls int `json:"calls,omitempty"`
}

// Validate reports a mode it does not know, a mode error without a code
// or a negative duration.
func (f Fault) Validate() error {
	switch f.Mode {
	case "error":
		if f.ErrorCode == 0 {
			return fmt.Errorf("fault: mode error needs a non-zero error_code")
		}
	case "timeout", "http500":
	default:
		return fmt.Errorf("fault: mode %q: want error, timeout or http500", f.Mode)
	}
	if f.DurationMs < 0 {
		return fmt.Errorf("fault: duration_ms %d: must not be negative", f.DurationMs)
	}
	if f.Calls < 0 {
		return fmt.Errorf("fault: calls %d: must not be negative", f.Calls)
	}
	return nil
}

// SetFault injects f (replacing any other) until ClearFault or its
// duration ends.
func (e *Emulator) SetFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fault = &f
	e.faultCalls = 0
	e.faultEnd = time.Time{}
	if f.DurationMs > 0 {
		e.faultEnd = e.now().Add(time.Duration(f.DurationMs) * time.Millisecond)
	}
	return nil
}

// ClearFault removes the injected fault.
func (e *Emulator) ClearFault() {
	e.mu.Lock()
	e.fault = nil
	e.mu.Unlock()
}

// activeFaultLocked returns the fault that applies to api now, if any.
func (e *Emulator) activeFaultLocked(api string) *Fault {
	if e.fault == nil {
		return nil
	}
	if !e.faultEnd.IsZero() && !e.now().Before(e.faultEnd) {
		e.fault = nil
		return nil
	}
	if e.fault.API != "" && e.fault.API != api {
		return nil
	}
	f := e.fault
	if f.Calls > 0 {
		if e.faultCalls++; e.faultCalls >= f.Calls {
			e.fault = nil // this call is the last that fails
		}
	}
	return f
}

func (e *Emulator) serveSetFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "fault: bad json"})
		return
	}
	if err := e.SetFault(f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (e *Emulator) serveClearFault(w http.ResponseWriter, _ *http.Request) {
	e.ClearFault()
	writeJSON(w, http.StatusOK, map[string]bool{"cleared": true})
}
