package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// BenchmarkPutUsersMeHTTP measures PUT /api/v1/users/me over real HTTP to a
// listening server: 32 concurrent clients per CPU (64 on this 2-CPU machine), each a
// user of its own who alternates between SG and SA, so every request changes
// the country and the region: a durable MySQL transaction with the user's
// row and an audit row. It reports requests/s and the latency percentiles.
func BenchmarkPutUsersMeHTTP(b *testing.B) {
	e := newRegionEnv(b)
	e.fixture("bench")
	if err := e.srv.Listen(); err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve() }()
	base := "http://" + e.srv.Addr()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	testenv.Eventually(b, 10*time.Second, func() error {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})

	// Stop this round's server and connections before the next round
	// starts: left idle, the server would time them out mid-benchmark.
	defer func() {
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.srv.Shutdown(ctx)
		<-served
	}()

	const parallelism = 32
	clients := parallelism * runtime.GOMAXPROCS(0)
	tokens := make([]string, clients)
	for i := range tokens {
		tokens[i] = e.user("bench", int64(i+1))
		e.putMe("bench", int64(i+1), fmt.Sprintf(`{"display_user_id":"bench_%d","country":"SG"}`, i+1))
	}

	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
	)
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		if i >= clients {
			b.Errorf("more goroutines than the %d registered users", clients)
			return
		}
		tok := tokens[i]
		var mine []time.Duration
		countries := [2]string{"SA", "SG"}
		for n := 0; pb.Next(); n++ {
			body := `{"country":"` + countries[n%2] + `"}`
			req, _ := http.NewRequest("PUT", base+"/api/v1/users/me", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(start))
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if len(latencies) > 0 {
		slices.Sort(latencies)
		pct := func(p float64) float64 {
			return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50_ms")
		b.ReportMetric(pct(0.99), "p99_ms")
	}
	b.ReportMetric(0, "ns/op") // per-op time of a concurrent run is not a latency
}
