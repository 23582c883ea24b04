package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
	"voiceroom/roomranks"
	"voiceroom/rooms"
)

// BenchmarkRanksHTTP measures GET /api/v1/rooms/{room_id}/ranks over real
// HTTP (the day's rank by sender, top 20 and the caller's place) in 16
// rooms where 50 users each sent a gift to one of 10 receivers, the
// requests going round the rooms (so concurrent reads of one rank, which
// share one MySQL read, are rare), next to its ceiling in the same run,
// GET /api/v1/rooms/{room_id} (a room view from memory: the HTTP edge's
// cost). The ranks are read from a redis-server of the benchmark's own
// (mysql-reads/op: the share that went to MySQL all the same, after a
// Redis call slower than RedisTimeout), then with that server stopped
// (every read from MySQL: one statement summing the day's ledger rows of
// the room).
func BenchmarkRanksHTTP(b *testing.B) {
	const roomCount, senders = 16, 50
	db := testenv.NewDB(b)
	redisSrv := testenv.RunRedis(b)
	redis.SetLogger(quietRedis{}) // the pool's complaints about the stopped server
	reg := prometheus.NewRegistry()
	svc, err := rooms.New(db, roomUsers{}, roomUsers{}, nil, rooms.Config{BcryptCost: 4}, testenv.Logger(b), reg, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	m, err := roomranks.NewMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	reader, err := roomranks.NewReader(db, redisSrv.Client(), roomranks.Config{}, testenv.Logger(b), m)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1e6, RateBurst: 1e6}, testenv.Logger(b), reg, reg, nil,
		RoomRoutes(svc), WalletRoutes(svc.Wallet()), RankRoutes(reader))
	if err != nil {
		b.Fatal(err)
	}
	a := &roomAPI{t: b, srv: srv}
	a.mustOK("POST", "/admin/v1/gifts", "admin", `{"gift_id":1,"name":"Rose","price":10,"heat":5}`, nil)
	for u := 100; u < 100+senders; u++ {
		a.mustOK("POST", fmt.Sprintf("/admin/v1/wallets/%d/credit", u), "admin", fmt.Sprintf(`{"amount":100000,"idempotency_key":"bench-%d"}`, u), nil)
	}
	var ranksPaths []string
	var roomPath string
	for owner := 1; owner <= roomCount; owner++ {
		var room rooms.View
		a.mustOK("POST", "/api/v1/rooms/create", fmt.Sprint(owner), `{"room_name":"Evening chat & music","seat_count":10}`, &room)
		roomPath = "/api/v1/rooms/" + room.RoomID
		for u := 20; u < 30; u++ {
			a.mustOK("POST", roomPath+"/join", fmt.Sprint(u), ``, nil)
		}
		for u := 100; u < 100+senders; u++ {
			a.mustOK("POST", roomPath+"/join", fmt.Sprint(u), ``, nil)
			a.mustOK("POST", roomPath+"/gift", fmt.Sprint(u), fmt.Sprintf(`{"gift_id":1,"count":%d,"receiver_user_id":%d}`, 1+(u+owner)%7, 20+u%10), nil)
			a.mustOK("POST", roomPath+"/leave", fmt.Sprint(u), ``, nil)
		}
		ranksPaths = append(ranksPaths, roomPath+"/ranks?by=sender&period=day&limit=20")
		var page roomranks.Page
		a.mustOK("GET", ranksPaths[len(ranksPaths)-1], "100", "", &page)
		if len(page.Items) != 20 || page.Me == nil {
			b.Fatalf("bench rank: %+v", page)
		}
	}
	base, _ := mustServe(b, srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	b.Cleanup(client.CloseIdleConnections)
	reads := func(source string) float64 {
		return testenv.MustMetric(b, reg, "voiceroom_ranks_reads_total", "source", source)
	}
	var turn atomic.Int64
	nextRank := func(int) (string, string, string) {
		return "GET", ranksPaths[int(turn.Add(1))%len(ranksPaths)], ""
	}

	b.Run("ceiling-get-room", func(b *testing.B) {
		benchHTTP(b, base, client, 100, func(int) (string, string, string) { return "GET", roomPath, "" })
	})
	b.Run("ranks-redis", func(b *testing.B) {
		mysql := reads("mysql")
		benchHTTP(b, base, client, 100, nextRank)
		// A Redis call slower than RedisTimeout (100ms: a loaded machine)
		// sends reads to MySQL for a second.
		b.ReportMetric((reads("mysql")-mysql)/float64(b.N), "mysql-reads/op")
	})
	b.Run("ranks-redis-stopped", func(b *testing.B) {
		redisSrv.Stop()
		b.Cleanup(redisSrv.Start) // for the next -count
		fromRedis := reads("redis")
		benchHTTP(b, base, client, 100, nextRank)
		if got := reads("redis") - fromRedis; got != 0 {
			b.Fatalf("%v reads came from a stopped Redis", got)
		}
	})
}

// quietRedis drops go-redis's log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
