package webhooks_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// TestFailedDeliveriesAreRetriedInOrder: a 5xx, a 408, a 429 and a
// dropped connection each fail an attempt; the same delivery (same id,
// same body) comes again and the room's later events wait: every event
// is accepted once, in order.
func TestFailedDeliveriesAreRetriedInOrder(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	var mu sync.Mutex
	attempts := map[string][]request{}
	statuses := []int{500, 503, 408, 429, -1}
	rc.setAnswer(func(r request) answer {
		mu.Lock()
		defer mu.Unlock()
		attempts[r.id] = append(attempts[r.id], r)
		if len(attempts[r.id]) == 1 {
			// The first attempt of every delivery fails, each way in turn.
			s := statuses[len(attempts)%len(statuses)]
			if s == -1 {
				return answer{drop: true}
			}
			return answer{status: s, body: "try again"}
		}
		return answer{status: 200}
	})
	h.startSink(testConfig())
	envs := roomEvents("app1", []string{"r1", "r2", "r3"}, 8)
	h.publish(envs...)
	rc.waitAccepted(idsByRoom(envs), 60*time.Second)
	rc.checkVerified()
	mu.Lock()
	defer mu.Unlock()
	for id, rs := range attempts {
		if len(rs) < 2 {
			t.Errorf("delivery %s: %d attempts, want a failed one and a retry", id, len(rs))
			continue
		}
		if string(rs[0].body) != string(rs[1].body) || !slices.Equal(rs[0].eventIDs, rs[1].eventIDs) {
			t.Errorf("delivery %s: the retry carried other events: %v, then %v", id, rs[0].eventIDs, rs[1].eventIDs)
		}
	}
}

// TestConcurrencyAcrossRooms: rooms are delivered at once, up to the
// endpoint's concurrency, never two deliveries of one room at once.
func TestConcurrencyAcrossRooms(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	const limit = 4
	release := make(chan struct{})
	var mu sync.Mutex
	held := 0
	rc.setAnswer(func(r request) answer {
		mu.Lock()
		defer mu.Unlock()
		if held < limit {
			// The first deliveries wait until limit of them are in flight
			// together: with one at a time this never happens.
			if held++; held == limit {
				close(release)
			}
			return answer{hold: release}
		}
		return answer{}
	})
	cfg := testConfig()
	cfg.Concurrency = limit
	h.startSink(cfg)
	envs := roomEvents("app1", []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"}, 5)
	h.publish(envs...)
	rc.waitAccepted(idsByRoom(envs), 60*time.Second)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.maxAll != limit {
		t.Errorf("at most %d deliveries in flight at once, want the concurrency %d", rc.maxAll, limit)
	}
	if rc.maxRoom != 1 {
		t.Errorf("%d deliveries of one room in flight at once, want 1", rc.maxRoom)
	}
}

// TestRejectedEventIsDeadLettered: a 4xx (not 408/429) refuses the
// event: it goes to the webhooks dead letters with the endpoint and the
// answer as reason, the room's other events (a batch it was in too) are
// delivered, and a replay of the letter delivers it.
func TestRejectedEventIsDeadLettered(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	envs := roomEvents("app1", []string{"r1"}, 6)
	bad := envs[2].EventID
	var refuse sync.Mutex
	refusing := true
	rc.setAnswer(func(r request) answer {
		refuse.Lock()
		defer refuse.Unlock()
		if refusing && slices.Contains(r.eventIDs, bad) {
			return answer{status: 422, body: "unknown user"}
		}
		return answer{}
	})
	// The first event's delivery waits until the others are stored, so
	// they queue up behind it and go as one batch.
	hold, holding := make(chan struct{}), make(chan struct{})
	first := envs[0].EventID
	answerBatch := rc.answerFn
	rc.setAnswer(func(r request) answer {
		if slices.Contains(r.eventIDs, first) {
			close(holding)
			return answer{hold: hold}
		}
		return answerBatch(r)
	})
	h.startSink(testConfig())
	h.publish(envs[0])
	<-holding
	h.publish(envs[1:]...)
	waitHeld(t, h, 1+5)
	close(hold)
	want := map[string][]string{"r1": {envs[0].EventID, envs[1].EventID, envs[3].EventID, envs[4].EventID, envs[5].EventID}}
	rc.waitAccepted(want, 30*time.Second)
	batched := false
	for _, r := range rc.requests() {
		batched = batched || (len(r.eventIDs) > 1 && slices.Contains(r.eventIDs, bad))
	}
	if !batched {
		t.Log("the refused event never travelled in a batch; the split is not exercised this run")
	}

	dlq := newDLQ(t, h)
	var letters bus.LetterPage
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		letters, err = dlq.List(context.Background(), bus.DurableWebhooks, "app1", 0, 10)
		if err == nil && len(letters.Letters) == 0 {
			return errWaiting
		}
		return err
	})
	if len(letters.Letters) != 1 {
		t.Fatalf("%d letters, want 1", len(letters.Letters))
	}
	l := letters.Letters[0]
	if _, _, _, id := l.Event(); id != bad {
		t.Errorf("letter of event %s, want %s", id, bad)
	}
	if !strings.Contains(l.Reason, "HTTP 422: unknown user") || !strings.Contains(l.Reason, "webhook ") {
		t.Errorf("letter reason %q: want the endpoint and its answer", l.Reason)
	}
	if n := testenv.MetricValue(t, h.reg, "voiceroom_webhooks_events_total", "outcome", "dead_lettered"); n != 1 {
		t.Errorf("dead_lettered events %v, want 1", n)
	}

	refuse.Lock()
	refusing = false
	refuse.Unlock()
	if _, err := dlq.Replay(context.Background(), bus.DurableWebhooks, "app1", nil); err != nil {
		t.Fatal(err)
	}
	rc.waitGot("r1", bad, 30*time.Second)
}

// Test429HonoursRetryAfter: a 429 waits as long as its Retry-After asks,
// far longer than the retry delay.
func Test429HonoursRetryAfter(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	var once sync.Once
	rc.setAnswer(func(r request) answer {
		a := answer{}
		once.Do(func() { a = answer{status: 429, headers: map[string]string{"Retry-After": "2"}} })
		return a
	})
	h.startSink(testConfig()) // retries after 50ms
	envs := roomEvents("app1", []string{"r1"}, 1)
	h.publish(envs...)
	rc.waitAccepted(idsByRoom(envs), 30*time.Second)
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].status != 429 {
		t.Fatalf("%d requests, want a 429 and its retry", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 2*time.Second {
		t.Errorf("retried %v after the 429, want at least its Retry-After of 2s", gap)
	}
}

// TestRedirectIsNotFollowed: a 3xx is a failed attempt, retried at the
// same URL, and the target of the redirect never hears of it.
func TestRedirectIsNotFollowed(t *testing.T) {
	h := newHarness(t)
	rc, target := newReceiver(t), newReceiver(t)
	e := h.create("app1", rc.url())
	rc.setSecrets(e.Secret)
	var mu sync.Mutex
	redirects := 0
	rc.setAnswer(func(r request) answer {
		mu.Lock()
		defer mu.Unlock()
		if redirects < 3 {
			redirects++
			return answer{status: http.StatusFound, headers: map[string]string{"Location": target.url()}}
		}
		return answer{}
	})
	h.startSink(testConfig())
	envs := roomEvents("app1", []string{"r1"}, 1)
	h.publish(envs...)
	rc.waitAccepted(idsByRoom(envs), 30*time.Second)
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
	hist := h.waitHistory("app1", e.ID, 4)
	last := hist[len(hist)-1] // the oldest
	if last.Outcome != webhooks.OutcomeFailed || last.Status != 302 || !strings.Contains(last.Error, "not followed") {
		t.Errorf("first attempt in the history: %+v, want a failed 302 not followed", last)
	}
	if hist[0].Outcome != webhooks.OutcomeDelivered || hist[0].Attempt != 4 {
		t.Errorf("last attempt in the history: %+v, want the 4th, delivered", hist[0])
	}
}

// TestTimeoutIsRetried: an attempt the endpoint does not answer within
// the timeout fails and the same delivery goes again; the room's next
// event waits for it.
func TestTimeoutIsRetried(t *testing.T) {
	h := newHarness(t)
	rc, e := h.newEndpoint("app1")
	envs := roomEvents("app1", []string{"r1"}, 2)
	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) })
	var once sync.Once
	rc.setAnswer(func(r request) answer {
		a := answer{}
		once.Do(func() { a = answer{hold: slow} }) // answered only when the test ends
		return a
	})
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond
	h.startSink(cfg)
	h.publish(envs[0])
	h.waitHistory("app1", e.ID, 2)
	h.publish(envs[1])
	rc.waitAccepted(idsByRoom(envs), 30*time.Second)
	hist := h.waitHistory("app1", e.ID, 3)
	first := hist[len(hist)-1]
	if first.Outcome != webhooks.OutcomeFailed || first.Error != "timeout" || first.Attempt != 1 {
		t.Errorf("first attempt %+v, want failed by timeout", first)
	}
	if first.ID != hist[len(hist)-2].ID {
		t.Errorf("the retry has id %s, the first attempt %s: want the same", hist[len(hist)-2].ID, first.ID)
	}
}

// TestReplayReachesPausedEndpoint: a dead letter replayed while its
// endpoint is paused waits for it (readers read room events, not
// replays) and arrives once it is resumed.
func TestReplayReachesPausedEndpoint(t *testing.T) {
	h := newHarness(t)
	rc, e := h.newEndpoint("app1")
	envs := roomEvents("app1", []string{"r1"}, 3)
	bad := envs[1].EventID
	var refusing atomic.Bool
	refusing.Store(true)
	rc.setAnswer(func(r request) answer {
		if refusing.Load() && slices.Contains(r.eventIDs, bad) {
			return answer{status: 422, body: "unknown user"}
		}
		return answer{}
	})
	h.startSink(testConfig())
	h.publish(envs...)
	rc.waitAccepted(map[string][]string{"r1": {envs[0].EventID, envs[2].EventID}}, 30*time.Second)
	dlq := newDLQ(t, h)
	testenv.Eventually(t, 30*time.Second, func() error {
		page, err := dlq.List(context.Background(), bus.DurableWebhooks, "app1", 0, 10)
		if err == nil && len(page.Letters) != 1 {
			return errWaiting
		}
		return err
	})

	h.setEnabled("app1", e.ID, false)
	waitCursor(t, h, e.ID, true)
	refusing.Store(false)
	if _, err := dlq.Replay(context.Background(), bus.DurableWebhooks, "app1", nil); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, h, 1) // the replay, held for the paused endpoint
	time.Sleep(5 * testConfig().RefreshInterval)
	if slices.Contains(rc.accepted()["r1"], bad) {
		t.Fatal("a paused endpoint got the replay")
	}
	h.setEnabled("app1", e.ID, true)
	rc.waitGot("r1", bad, 30*time.Second)
}

// TestHistoryThinsDeliveredAttempts: with HistoryInterval a minute, only the
// first delivered attempt within it is recorded; every failed one is.
func TestHistoryThinsDeliveredAttempts(t *testing.T) {
	h := newHarness(t)
	rc, e := h.newEndpoint("app1")
	cfg := testConfig()
	cfg.HistoryInterval = time.Minute
	h.startSink(cfg)
	first := roomEvents("app1", []string{"r1", "r2", "r3"}, 3)
	h.publish(first...)
	rc.waitAccepted(idsByRoom(first), 30*time.Second)
	var failing atomic.Bool
	failing.Store(true)
	rc.setAnswer(func(request) answer {
		if failing.CompareAndSwap(true, false) {
			return answer{status: 503}
		}
		return answer{}
	})
	second := roomEvents("app1", []string{"r4"}, 1)
	h.publish(second...)
	rc.waitAccepted(idsByRoom(second), 30*time.Second)
	hist := h.waitHistory("app1", e.ID, 2)
	time.Sleep(5 * cfg.RefreshInterval) // anything more would show by now
	if hist = h.waitHistory("app1", e.ID, 2); len(hist) != 2 {
		t.Fatalf("history %+v: want the first delivered attempt and the failed one only", hist)
	}
	if hist[0].Outcome != webhooks.OutcomeFailed || hist[0].Status != 503 || hist[1].Outcome != webhooks.OutcomeDelivered {
		t.Errorf("history %+v: want the failed attempt, then (older) the first delivered", hist)
	}
}
