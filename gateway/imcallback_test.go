package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/imbridge"
	"voiceroom/internal/testenv"
)

// presentUsers is a rooms stand-in: group "g<n>" of app demo holds user n.
type presentUsers struct{}

func (presentUsers) IMGroupMember(groupID string, userID int64) (string, bool, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(groupID, "g"), 10, 64)
	if err != nil || !strings.HasPrefix(groupID, "g") {
		return "", false, false
	}
	return "demo", true, n == userID
}

// newCallbackServer serves POST /im/callback on a loopback port for an
// application with callback token "tok".
func newCallbackServer(tb testing.TB) (base string, stop func()) {
	tb.Helper()
	apps := imbridge.Apps{Default: &imbridge.Application{SDKAppID: 1400000001, Admin: "admin", SecretKey: "k", CallbackToken: "tok"}}
	g, err := imbridge.NewGuard(apps, presentUsers{}, imbridge.GuardConfig{}, nil, time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil, IMCallbackRoutes(g))
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	base = "http://" + s.Addr()
	testenv.Eventually(tb, 10*time.Second, func() error {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return base, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-served
	}
}

func callbackURL(base, token string, at int64) string {
	ts := strconv.FormatInt(at, 10)
	return base + "/im/callback?SdkAppid=1400000001&CallbackCommand=Group.CallbackBeforeApplyJoinGroup&contenttype=json&ClientIP=1.2.3.4&OptPlatform=RESTAPI" +
		"&RequestTime=" + ts + "&Sign=" + imbridge.Sign(token, ts)
}

func postCallback(tb testing.TB, client *http.Client, url, body string) imbridge.CallbackReply {
	tb.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var r imbridge.CallbackReply
	if err := json.Unmarshal(raw, &r); err != nil {
		tb.Fatalf("answer %s: %v", raw, err)
	}
	return r
}

func TestIMCallbackHTTP(t *testing.T) {
	base, stop := newCallbackServer(t)
	defer stop()
	now := time.Now().Unix()
	join := func(group, user string) string {
		return fmt.Sprintf(`{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":%q,"Type":"AVChatRoom","Requestor_Account":%q}`, group, user)
	}
	for _, tc := range []struct {
		name, url, body string
		want            int
	}{
		{"present", callbackURL(base, "tok", now), join("g7", "7"), 0},
		{"absent", callbackURL(base, "tok", now), join("g7", "8"), 1},
		{"bad sign", callbackURL(base, "nope", now), join("g7", "7"), 1},
		{"stale", callbackURL(base, "tok", now-3600), join("g7", "7"), 1},
		{"garbage body", callbackURL(base, "tok", now), "\x00{", 1},
		{"no query", base + "/im/callback", join("g7", "7"), 1},
		{"huge body", callbackURL(base, "tok", now), strings.Repeat("x", 20000), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := postCallback(t, http.DefaultClient, tc.url, tc.body); r.ErrorCode != tc.want {
				t.Fatalf("answer %+v, want ErrorCode %d", r, tc.want)
			}
		})
	}
}

// BenchmarkIMCallbackHTTP measures POST /im/callback over real HTTP,
// VOICEROOM_BENCH_CLIENTS_PER_CPU concurrent clients per CPU (default 2),
// each join decided from memory; it reports the latency percentiles
// (Tencent's timeout is 2 s; the target p99 5 ms).
func BenchmarkIMCallbackHTTP(b *testing.B) {
	base, stop := newCallbackServer(b)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	parallelism := 2
	if n, err := strconv.Atoi(os.Getenv("VOICEROOM_BENCH_CLIENTS_PER_CPU")); err == nil && n > 0 {
		parallelism = n
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		next      atomic.Int64
	)
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			u := next.Add(1)
			body := fmt.Sprintf(`{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":"g%d","Requestor_Account":"%d"}`, u, u)
			start := time.Now()
			r := postCallback(b, client, callbackURL(base, "tok", time.Now().Unix()), body)
			mine = append(mine, time.Since(start))
			if r.ErrorCode != 0 {
				b.Errorf("denied: %+v", r)
			}
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(latencies)
	p := func(q float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.Logf("%d callbacks, %d clients: p50 %.3f ms, p99 %.3f ms, max %.3f ms", len(latencies), parallelism*runtime.GOMAXPROCS(0), p(0.5), p(0.99), p(1))
}
