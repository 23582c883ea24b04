package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"voiceroom/webhooks"
)

// Webhooks is what the apps' own backend, a receiver the bench runs on
// this host, got from the webhooks sink: commit → receipt over the load's
// events, the rate of deliveries, and, with an outage, how the backlog
// drained. The ceiling is the receiver's own: signed POSTs from a plain
// client at the sink's default concurrency, measured in the same run.
type Webhooks struct {
	Endpoints int `json:"endpoints"` // one per app
	// Latency is commit (room_outbox.created_at_ms) → first receipt, over
	// the load's events (with an outage, those committed before it).
	Latency    *Latency `json:"commit_to_receipt,omitempty"`
	Committed  int64    `json:"committed"` // events the load committed
	Received   int64    `json:"received"`  // of those, at the receiver
	Repeats    int64    `json:"repeats"`   // receipts beyond an event's first
	OutOfOrder int64    `json:"out_of_order"`
	Unverified int64    `json:"unverified"`
	// Deliveries are the POSTs answered 2xx from the load's start until
	// the receiver had every event of the load.
	Deliveries        int64   `json:"deliveries"`
	DeliveriesPerSec  float64 `json:"deliveries_per_sec"`
	EventsPerSec      float64 `json:"events_per_sec"`
	EventsPerDelivery float64 `json:"events_per_delivery"`
	// CeilingPerSec is signed one-event POSTs per second to the same
	// receiver from a plain keep-alive client, 16 at a time.
	CeilingPerSec float64         `json:"ceiling_posts_per_sec"`
	Outage        *WebhooksOutage `json:"outage,omitempty"`
}

// WebhooksOutage is the backlog the receiver's outage left and its drain.
type WebhooksOutage struct {
	DownSec float64 `json:"down_sec"`
	// Backlog is the events committed before the receiver came back that
	// it had not received by then.
	Backlog int64 `json:"backlog"`
	// CatchUpSec is from the receiver's return until it had every event
	// committed before it.
	CatchUpSec float64 `json:"catch_up_sec"`
	// DrainEventsPerSec and DrainDeliveriesPerSec are the receipts (new
	// events) and 2xx deliveries per second during the catch-up.
	DrainEventsPerSec     float64 `json:"drain_events_per_sec"`
	DrainDeliveriesPerSec float64 `json:"drain_deliveries_per_sec"`
}

// hookReceiver is the bench's webhook receiver: one endpoint per app at
// /hooks/{app}, each delivery verified with that endpoint's secret.
type hookReceiver struct {
	srv *http.Server
	url string

	down atomic.Bool // answer 503

	mu         sync.Mutex
	secrets    map[string]string // app -> secret
	first      map[string]int64  // event id -> first receipt, Unix ms
	seen       map[string]int    // event id -> receipts
	highest    map[string]int64  // room -> highest room_version received
	outOfOrder int64
	unverified int64
	posts      []post // 2xx deliveries
}

// post is one delivery answered 2xx: when, and how many events new to
// the receiver it brought.
type post struct {
	atMs     int64
	newEvent int
}

func startHookReceiver() (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &hookReceiver{url: "http://" + ln.Addr().String(), secrets: map[string]string{}, first: map[string]int64{},
		seen: map[string]int{}, highest: map[string]int64{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *hookReceiver) close() { r.srv.Close() }

// ServeHTTP takes one delivery to /hooks/{app}.
func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	app := strings.TrimPrefix(req.URL.Path, "/hooks/")
	r.mu.Lock()
	secret := r.secrets[app]
	r.mu.Unlock()
	now := time.Now()
	if secret == "" || webhooks.Verify(secret, req.Header, body, now, 5*time.Minute) != nil {
		r.mu.Lock()
		r.unverified++
		r.mu.Unlock()
		http.Error(w, "not signed by this endpoint's secret", http.StatusUnauthorized)
		return
	}
	var payload webhooks.Payload
	if err := json.Unmarshal(body, &payload); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	p := post{atMs: now.UnixMilli()}
	for _, e := range payload.Events {
		if r.seen[e.EventID] == 0 {
			p.newEvent++
			r.first[e.EventID] = p.atMs
			if e.RoomVersion < r.highest[e.RoomID] {
				r.outOfOrder++
			}
			r.highest[e.RoomID] = max(r.highest[e.RoomID], e.RoomVersion)
		}
		r.seen[e.EventID]++
	}
	r.posts = append(r.posts, p)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// register adds an endpoint per app, for every event type, and waits two
// refresh intervals of the sink (it reads the endpoints once a second).
func (b *Bench) registerHooks(ctx context.Context, w *world, r *hookReceiver) error {
	for _, app := range b.cfg.Apps {
		a := b.http.setupCall(ctx, http.MethodPost, "/admin/v1/webhooks", "", w.admins[app], map[string]any{"url": r.url + "/hooks/" + app})
		if a.code != "" {
			return fmt.Errorf("add the webhook endpoint of %s: %s %s (a local receiver needs VOICEROOM_WEBHOOKS_ALLOW_HTTP and VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES on the target)", app, a.code, a.message)
		}
		var created struct {
			Secret string `json:"secret"`
		}
		if err := a.decode(&created); err != nil || created.Secret == "" {
			return fmt.Errorf("add the webhook endpoint of %s: answer without a secret: %v", app, err)
		}
		r.mu.Lock()
		r.secrets[app] = created.Secret
		r.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Second):
	}
	return nil
}

// ceiling posts signed one-event deliveries to the receiver, 16 at a time
// for CeilingDuration, and returns the 2xx per second. The events are the
// ceiling's own (room "ceiling"), never the load's.
func (b *Bench) hooksCeiling(ctx context.Context, r *hookReceiver) (float64, error) {
	key := make([]byte, 32)
	rand.Read(key)
	secret := webhooks.SecretPrefix + base64.StdEncoding.EncodeToString(key)
	r.mu.Lock()
	r.secrets["ceiling"] = secret
	r.mu.Unlock()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	var ok, failed atomic.Int64
	elapsed := b.concurrently(ctx, 16, b.cfg.CeilingDuration, func(ctx context.Context, worker int) {
		for n := 0; ctx.Err() == nil; n++ {
			id := fmt.Sprintf("ceiling-%d-%d", worker, n)
			body := fmt.Appendf(nil, `{"events":[{"event_id":%q,"app_code":"ceiling","room_id":"ceiling%d","room_version":%d,"event_type":"RoomUserJoined","occurred_at_ms":%d}]}`,
				id, worker, n+1, time.Now().UnixMilli())
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/hooks/ceiling", strings.NewReader(string(body)))
			if err != nil {
				failed.Add(1)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if err := webhooks.Sign(req.Header, secret, "msg_"+id, time.Now(), body); err != nil {
				failed.Add(1)
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
				}
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				ok.Add(1)
			} else {
				failed.Add(1)
			}
		}
	})
	r.mu.Lock()
	r.posts = r.posts[:0] // the load's figures start from here
	r.mu.Unlock()
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("webhook receiver ceiling: %d posts failed", f)
	}
	return float64(ok.Load()) / elapsed.Seconds(), nil
}

// outage takes the receiver down from start for d.
func (r *hookReceiver) outage(ctx context.Context, start time.Time, d time.Duration) (down, up time.Time) {
	t := time.NewTimer(time.Until(start))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	r.down.Store(true)
	down = time.Now()
	defer func() { r.down.Store(false); up = time.Now() }()
	t.Reset(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return
}

// hooksFigures waits (up to QuietTimeout) until the receiver has every
// event of commits, then computes the figures. With an outage (down to
// up), the latency is over the events committed before it, and the
// catch-up is measured from up.
func (b *Bench) hooksFigures(ctx context.Context, r *hookReceiver, commits map[string]int64, loadStart, down, up time.Time) (Webhooks, error) {
	res := Webhooks{Endpoints: len(b.cfg.Apps), Committed: int64(len(commits))}
	deadline := time.Now().Add(b.cfg.QuietTimeout)
	var missing int
	for {
		missing = 0
		r.mu.Lock()
		for id := range commits {
			if r.seen[id] == 0 {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Received = res.Committed - int64(missing)
	res.OutOfOrder, res.Unverified = r.outOfOrder, r.unverified
	var lat []time.Duration
	var lastMs int64
	for id, ms := range commits {
		n := r.seen[id]
		if n == 0 {
			continue
		}
		res.Repeats += int64(n - 1)
		got := r.first[id]
		lastMs = max(lastMs, got)
		if down.IsZero() || ms < down.UnixMilli() {
			lat = append(lat, max(0, time.UnixMilli(got).Sub(time.UnixMilli(ms))))
		}
	}
	res.Latency = latencyOf(lat)
	var events int64
	for _, p := range r.posts {
		if p.atMs >= loadStart.UnixMilli() && p.atMs <= lastMs {
			res.Deliveries++
			events += int64(p.newEvent)
		}
	}
	if span := float64(lastMs-loadStart.UnixMilli()) / 1000; span > 0 {
		res.DeliveriesPerSec, res.EventsPerSec = float64(res.Deliveries)/span, float64(events)/span
	}
	if res.Deliveries > 0 {
		res.EventsPerDelivery = float64(events) / float64(res.Deliveries)
	}
	if missing > 0 {
		return res, fmt.Errorf("%d of the load's %d events had not reached the webhook receiver %s after the load", missing, len(commits), b.cfg.QuietTimeout)
	}
	if down.IsZero() || up.IsZero() {
		return res, nil
	}
	o := WebhooksOutage{DownSec: up.Sub(down).Seconds()}
	upMs := up.UnixMilli()
	var caughtMs int64
	for id, ms := range commits {
		if ms >= upMs {
			continue
		}
		got := r.first[id]
		if got >= upMs {
			o.Backlog++
		}
		caughtMs = max(caughtMs, got)
	}
	if caughtMs > upMs {
		o.CatchUpSec = float64(caughtMs-upMs) / 1000
		var posts, fresh int
		for _, p := range r.posts {
			if p.atMs >= upMs && p.atMs <= caughtMs {
				posts++
				fresh += p.newEvent
			}
		}
		o.DrainEventsPerSec, o.DrainDeliveriesPerSec = float64(fresh)/o.CatchUpSec, float64(posts)/o.CatchUpSec
	}
	res.Outage = &o
	return res, nil
}

// table writes the webhook lines of the report.
func (w *Webhooks) table(tw io.Writer, lat func(name string, l *Latency, na, extra string)) {
	lat("commit -> webhook receipt", w.Latency, "", fmt.Sprintf("(%d of %d events received, %d repeats, %d out of order, %d unverified)",
		w.Received, w.Committed, w.Repeats, w.OutOfOrder, w.Unverified))
	fmt.Fprintf(tw, "webhook deliveries\t%.0f/s\t%.0f events/s, %.1f per delivery (%d deliveries)\tceiling: signed POSTs to the receiver %.0f/s\n",
		w.DeliveriesPerSec, w.EventsPerSec, w.EventsPerDelivery, w.Deliveries, w.CeilingPerSec)
	if o := w.Outage; o != nil {
		fmt.Fprintf(tw, "webhook backlog after %.0fs down\t%d events\tcaught up %.1fs after the receiver came back\t%.0f events/s in %.0f deliveries/s\n",
			o.DownSec, o.Backlog, o.CatchUpSec, o.DrainEventsPerSec, o.DrainDeliveriesPerSec)
	}
}
