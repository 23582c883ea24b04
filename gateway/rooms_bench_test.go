package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// benchRoomClientsPerCPU is the number of concurrent HTTP clients per CPU
// of the room benchmarks, each a user of its own on a keep-alive connection.
const benchRoomClientsPerCPU = 8

// newBenchRoom serves a room API on a real listener and fills one room the
// size of a busy one: 10 seats, 9 of them taken, 30 users present and a gift
// rank of 5. It returns the base URL, the room's path and a client.
func newBenchRoom(b *testing.B) (base, roomPath string, client *http.Client) {
	b.Helper()
	a := newRoomAPI(b)
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"Evening chat & music","seat_count":10,"room_description":"Late-night talk, everyone welcome"}`, &room)
	roomPath = "/api/v1/rooms/" + room.RoomID
	a.mustOK("POST", "/admin/v1/gifts", "admin", `{"gift_id":1,"name":"Rose","price":10,"heat":5}`, nil)
	for u := 1; u <= 30; u++ {
		a.mustOK("POST", roomPath+"/join", fmt.Sprint(u), ``, nil)
		if u >= 2 && u <= 10 {
			a.mustOK("POST", roomPath+"/mic/up", fmt.Sprint(u), fmt.Sprintf(`{"seat_index":%d}`, u-1), nil)
		}
		if u >= 2 && u <= 6 {
			a.mustOK("POST", fmt.Sprintf("/admin/v1/wallets/%d/credit", u), "admin", fmt.Sprintf(`{"amount":100,"idempotency_key":"bench-%d"}`, u), nil)
			a.mustOK("POST", roomPath+"/gift", fmt.Sprint(u), fmt.Sprintf(`{"gift_id":1,"count":%d,"receiver_user_id":1}`, u), nil)
		}
	}
	a.mustOK("GET", roomPath, "1", "", &room)
	if room.OnlineCount < 30 || len(room.GiftRank) != 5 {
		b.Fatalf("bench room: %d online, rank %d", room.OnlineCount, len(room.GiftRank))
	}
	public, _ := mustServe(b, a.srv)
	client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	b.Cleanup(client.CloseIdleConnections)
	return public, roomPath, client
}

// benchHTTP runs next (which returns the method, path and body of the n-th
// request of one client) from benchRoomClientsPerCPU clients per CPU, each
// user (firstUser + its index). It reports requests/s, the latency
// percentiles and the process's CPU time per request (server and the
// in-process clients together: comparable between runs, not a server cost).
func benchHTTP(b *testing.B, base string, client *http.Client, firstUser int, next func(n int) (method, path, body string)) {
	clients := benchRoomClientsPerCPU * runtime.GOMAXPROCS(0)
	tokens := make([]string, clients)
	for i := range tokens {
		tokens[i] = mustToken(b, "app1", int64(firstUser+i), "", time.Hour)
	}
	var (
		idx       atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
	)
	cpu0, writes0 := testenv.ProcessCPU(b), processWrites(b)
	b.SetParallelism(benchRoomClientsPerCPU)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(idx.Add(1) - 1)
		if i >= clients {
			b.Errorf("more goroutines than the %d clients", clients)
			return
		}
		var mine []time.Duration
		for n := 0; pb.Next(); n++ {
			method, path, body := next(n)
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequest(method, base+path, rd)
			if err != nil {
				b.Error(err)
				return
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(start))
			if err != nil || resp.StatusCode != 200 {
				b.Errorf("%s %s: status %d, read %v", method, path, resp.StatusCode, err)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportProcess(b, cpu0, writes0)
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

// reportProcess reports requests/s and, per request, the CPU time and the
// write system calls of the whole process since cpu0 and writes0 (server
// and in-process clients together: comparable between runs, not a server
// cost).
func reportProcess(b *testing.B, cpu0 time.Duration, writes0 int64) {
	b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	if writes0 >= 0 {
		b.ReportMetric(float64(processWrites(b)-writes0)/float64(b.N), "writes/op")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// processWrites is the number of write system calls the process has made
// (syscw of /proc/self/io), or -1 where that file cannot be read.
func processWrites(tb testing.TB) int64 {
	tb.Helper()
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatalf("/proc/self/io: %v", err)
			}
			return n
		}
	}
	return -1
}

// BenchmarkGetRoomHTTP measures GET /api/v1/rooms/{room_id} over real HTTP:
// the room is loaded, so each answer is the room view (about 2.6 KB of
// JSON) read from memory, and the cost is the HTTP edge's: parsing,
// authentication, rate limit, metrics and encoding.
func BenchmarkGetRoomHTTP(b *testing.B) {
	base, roomPath, client := newBenchRoom(b)
	benchHTTP(b, base, client, 100, func(int) (string, string, string) { return "GET", roomPath, "" })
}

// BenchmarkGetRoomHTTPPipelined is BenchmarkGetRoomHTTP with HTTP/1.1
// pipelining: each client writes depth requests at once, then reads the
// depth answers. The server flushes its answers only when no further request
// is waiting in its read buffer, so the answers to a batch leave in fewer
// writes (as many as its write buffer needs).
func BenchmarkGetRoomHTTPPipelined(b *testing.B) {
	base, roomPath, _ := newBenchRoom(b)
	addr := strings.TrimPrefix(base, "http://")
	for _, depth := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("depth-%d", depth), func(b *testing.B) {
			clients := benchRoomClientsPerCPU * runtime.GOMAXPROCS(0)
			reqs := make([][]byte, clients)
			for i := range reqs {
				tok := mustToken(b, "app1", int64(100+i), "", time.Hour)
				reqs[i] = []byte("GET " + roomPath + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\n\r\n")
			}
			var idx atomic.Int64
			cpu0, writes0 := testenv.ProcessCPU(b), processWrites(b)
			b.SetParallelism(benchRoomClientsPerCPU)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(idx.Add(1) - 1)
				if i >= clients {
					b.Errorf("more goroutines than the %d clients", clients)
					return
				}
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				br := bufio.NewReader(conn)
				batch := make([]byte, 0, depth*len(reqs[i]))
				for {
					n := 0
					for n < depth && pb.Next() {
						n++
					}
					if n == 0 {
						return
					}
					batch = batch[:0]
					for range n {
						batch = append(batch, reqs[i]...)
					}
					if _, err := conn.Write(batch); err != nil {
						b.Error(err)
						return
					}
					for range n {
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							b.Error(err)
							return
						}
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 {
							b.Errorf("status %d, read %v", resp.StatusCode, err)
							return
						}
					}
				}
			})
			b.StopTimer()
			reportProcess(b, cpu0, writes0)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkJoinLeaveHTTP measures room commands over real HTTP: each client
// (a user of its own) joins the busy room and leaves it in turn, so every
// request is a durable command on the one room (a MySQL transaction); a
// join answers the room view, a leave null data.
func BenchmarkJoinLeaveHTTP(b *testing.B) {
	base, roomPath, client := newBenchRoom(b)
	benchHTTP(b, base, client, 100, func(n int) (string, string, string) {
		if n%2 == 0 {
			return "POST", roomPath + "/join", `{"password":""}`
		}
		return "POST", roomPath + "/leave", ""
	})
}

// benchView is the envelope of a busy room's view, the size of the one
// BenchmarkGetRoomHTTP's room answers: 10 seats (9 taken), 30 users
// present, a gift rank of 5.
func benchView() Envelope {
	v := rooms.View{
		RoomID: "app1_0f8fad5b-d9cb-469f-a165-70867728950e", RoomShortID: "app1123456", IMGroupID: "app1_0f8fad5b-d9cb-469f-a165-70867728950e",
		OwnerUserID: 1001, HostUserID: 1001, VisibleRegionID: 3, Title: "Evening chat & music", CoverURL: "https://cdn.example.com/covers/1001.jpg?v=3&s=2",
		Description: "Late-night talk, everyone welcome", Mode: "chat", Status: "open", Heat: 12345, RoomVersion: 987,
		SeatCount: 10, CreatedAtMs: 1_800_000_000_000, UpdatedAtMs: 1_800_000_123_456,
	}
	for i := range 10 {
		v.Seats = append(v.Seats, rooms.SeatView{Index: i, UserID: int64(1001 + i), Locked: i == 9})
	}
	v.Seats[9].UserID = 0
	for i := range 30 {
		v.OnlineUsers = append(v.OnlineUsers, rooms.OnlineUser{UserID: int64(1001 + i), JoinedAtMs: 1_800_000_000_000 + int64(i)*1234})
	}
	v.OnlineCount = len(v.OnlineUsers)
	for i := range 5 {
		v.GiftRank = append(v.GiftRank, roomevent.Contribution{UserID: int64(1002 + i), Value: int64(1000 - i*37)})
	}
	return Envelope{Code: "OK", Message: "ok", RequestID: "req_db166fa4de0e60bf495e2c64", Data: v}
}

// BenchmarkEncodeRoomView encodes benchView's envelope as an answer does,
// with encoding/json (goccy/go-json v0.10.5, tried in its place, wrote
// the same bytes 15-35 % faster here but saved only 2-3 % of a GET's CPU
// and nothing measurable on commands, so it was not kept). Besides ns/op it
// reports the CPU time of the benchmark's thread per encoding (cpu-ns/op),
// which time spent waiting for a CPU on a busy machine does not inflate.
func BenchmarkEncodeRoomView(b *testing.B) {
	v := benchView()
	for _, enc := range []struct {
		name string
		fn   func(any) ([]byte, error)
	}{{"encoding-json", json.Marshal}} {
		b.Run(enc.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			cpu0 := testenv.ThreadCPU(b)
			for b.Loop() {
				if _, err := enc.fn(v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testenv.ThreadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
