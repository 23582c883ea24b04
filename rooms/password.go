package rooms

import (
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"voiceroom/apperr"
)

// Password bounds. bcrypt reads at most 72 bytes.
const (
	minPasswordLen = 4
	maxPasswordLen = 64
)

// hashPassword returns a salted bcrypt hash: slow on purpose, so a leaked
// snapshot does not give rooms' passwords away cheaply.
func hashPassword(password string, cost int) (string, error) {
	if len(password) < minPasswordLen || len(password) > maxPasswordLen {
		return "", apperr.Invalid("password", "must be %d..%d bytes, or empty to unlock", minPasswordLen, maxPasswordLen)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", apperr.Wrap(apperr.Internal, "could not hash the password", err)
	}
	return string(h), nil
}

// passwordMatches reports whether password is the one hash was made from.
func passwordMatches(hash, password string) bool {
	if hash == "" || len(password) > maxPasswordLen {
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// attemptLimiter counts wrong room passwords per app, room and user, and
// refuses further tries once limit failures fall inside window. Entries
// expire with their window, so memory follows recent failures only.
type attemptLimiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu        sync.Mutex
	failures  map[attemptKey][]time.Time
	lastSweep time.Time
}

type attemptKey struct {
	app, room string
	user      int64
}

func newAttemptLimiter(limit int, window time.Duration, now func() time.Time) *attemptLimiter {
	return &attemptLimiter{limit: limit, window: window, now: now, failures: map[attemptKey][]time.Time{}, lastSweep: now()}
}

// allow reports whether the user may try a password now.
func (l *attemptLimiter) allow(k attemptKey) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent(k, now)) < l.limit
}

// fail records a wrong password.
func (l *attemptLimiter) fail(k attemptKey) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[k] = append(l.recent(k, now), now)
	if now.Sub(l.lastSweep) > l.window {
		for key := range l.failures {
			if len(l.recent(key, now)) == 0 {
				delete(l.failures, key)
			}
		}
		l.lastSweep = now
	}
}

// recent returns k's failures inside the window, dropping older ones.
func (l *attemptLimiter) recent(k attemptKey, now time.Time) []time.Time {
	times := l.failures[k]
	i := 0
	for i < len(times) && now.Sub(times[i]) >= l.window {
		i++
	}
	if i > 0 {
		times = times[i:]
		if len(times) == 0 {
			delete(l.failures, k)
			return nil
		}
		l.failures[k] = times
	}
	return times
}
