package loadgen

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// listProbe measures commit → visible in the list on the probe rooms, which
// only it touches: it joins and leaves its users in turn and polls the list
// (query = the room's short id) until the room's online count shows the
// change. The commit time is the command's outbox row's created_at_ms.
type listProbe struct {
	mu       sync.Mutex
	lat      []time.Duration
	timeouts int64
}

func (p *listProbe) run(ctx context.Context, b *Bench, app string, pr probeRoom) {
	path := "/api/v1/rooms/" + pr.id
	online := 0
	for i := 0; ctx.Err() == nil; i++ {
		u := pr.users[(i/2)%len(pr.users)]
		op, want := "/join", online+1
		if i%2 == 1 {
			op, want = "/leave", online-1
		}
		a := b.http.do(ctx, http.MethodPost, path+op, u.token, map[string]any{})
		if a.code != "" {
			if ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			continue
		}
		online = want
		var commitMs int64
		err := b.db.QueryRowContext(ctx, `SELECT created_at_ms FROM room_outbox WHERE app_code = ? AND room_id = ? ORDER BY id DESC LIMIT 1`,
			app, pr.id).Scan(&commitMs)
		if err != nil {
			continue
		}
		seen, ok := p.poll(ctx, b, u.token, pr, want)
		switch {
		case ok:
			p.mu.Lock()
			p.lat = append(p.lat, seen.Sub(time.UnixMilli(commitMs)))
			p.mu.Unlock()
		case ctx.Err() == nil:
			p.mu.Lock()
			p.timeouts++
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// poll reads the list until the probe room shows want users online, for at
// most 10 s.
func (p *listProbe) poll(ctx context.Context, b *Bench, token string, pr probeRoom, want int) (time.Time, bool) {
	deadline := time.Now().Add(10 * time.Second)
	q := "/api/v1/rooms?tab=hot&limit=20&query=" + url.QueryEscape(pr.shortID)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		a := b.http.do(ctx, http.MethodGet, q, token, nil)
		now := time.Now()
		if a.code == "" {
			var page struct {
				Rooms []struct {
					RoomID      string `json:"room_id"`
					OnlineCount int    `json:"online_count"`
				} `json:"rooms"`
			}
			if a.decode(&page) == nil {
				for _, r := range page.Rooms {
					if r.RoomID == pr.id && r.OnlineCount == want {
						return now, true
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	return time.Time{}, false
}

func (p *listProbe) result() (*Latency, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return latencyOf(append([]time.Duration(nil), p.lat...)), p.timeouts
}
