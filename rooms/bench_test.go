package rooms

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"voiceroom/mysqldb"
)

// BenchmarkPipeline measures durable commands through the pipeline (apply,
// commit, swap) against real MariaDB: each op is a JoinRoom or LeaveRoom of a
// user of its own, alternating, so every op changes the room, writes a
// command-log row and an outbox row, and commits before it returns.
//
//	go test ./rooms -run '^$' -bench Pipeline -benchtime 20000x
func BenchmarkPipeline(b *testing.B) {
	for _, rooms := range []int{1, 1000} {
		for _, conc := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("rooms=%d/conc=%d", rooms, conc), func(b *testing.B) {
				e := newTestEnv(b, Config{CommitWorkers: 4, CommitBatch: 128})
				e.users.mu.Lock()
				e.users.missing = map[int64]bool{}
				e.users.mu.Unlock()
				ids := make([]string, rooms)
				for i := range ids {
					ids[i] = e.create(b, "bench", int64(i+1)).RoomID
				}
				var next atomic.Int64
				run := func(worker int, lat *[]time.Duration) {
					// Each worker has its own user per room; its ops alternate join/leave.
					user := int64(100000 + worker)
					present := map[string]bool{}
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						room := ids[int(i)%rooms]
						kind := KindJoinRoom
						if present[room] {
							kind = KindLeaveRoom
						}
						start := time.Now()
						if _, err := e.do(b, "bench", room, kind, user, Args{}); err != nil {
							b.Error(err)
							return
						}
						*lat = append(*lat, time.Since(start))
						present[room] = !present[room]
					}
				}
				reportConcurrent(b, conc, run)
			})
		}
	}
}

// BenchmarkTwoInsertCeiling is the raw ceiling the pipeline is compared to:
// one transaction of two inserts (a command-log row and an outbox row of the
// pipeline's sizes), nothing else, at the same concurrency.
func BenchmarkTwoInsertCeiling(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			e := newTestEnv(b, Config{})
			db := e.db
			command := []byte(`{"kind":"JoinRoom","actor":{"user_id":100001},"now_ms":1800000000000,"args":{}}`)
			result := []byte(strings.Repeat("r", 900))   // a snapshot answer
			envelope := []byte(strings.Repeat("e", 700)) // an envelope with its card
			var version atomic.Int64
			run := func(worker int, lat *[]time.Duration) {
				for {
					v := version.Add(1)
					if v > int64(b.N) {
						return
					}
					start := time.Now()
					err := mysqldb.Update(context.Background(), db, func(tx *sql.Tx) error {
						if _, err := tx.Exec(`INSERT INTO room_command_log (app_code, room_id, room_version, command_id, command_type,
							actor_user_id, request_id, command, result, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
							"bench", fmt.Sprintf("bench_room_%d", worker), v, uuid.NewString(), "JoinRoom", 1, "", command, result, v); err != nil {
							return err
						}
						_, err := tx.Exec(`INSERT INTO room_outbox (app_code, event_id, room_id, room_version, event_type, envelope,
							status, retry_count, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)`,
							"bench", uuid.NewString(), fmt.Sprintf("bench_room_%d", worker), v, "RoomUserJoined", envelope, v)
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
					*lat = append(*lat, time.Since(start))
				}
			}
			reportConcurrent(b, conc, run)
		})
	}
}

// reportConcurrent runs conc workers until they have done b.N ops between
// them, then reports ops/s and latency percentiles.
func reportConcurrent(b *testing.B, conc int, run func(worker int, lat *[]time.Duration)) {
	lats := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(w, &lats[w])
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "cmds/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRoomMemory reports the heap one loaded room with 50 present
// users holds: its cell, state, presence tracking and whatever else the
// service keeps for it. Each op builds 1,000 rooms through the service, as
// clients would (CreateRoom, 50 JoinRoom, the 10 seats taken, a gift from
// every user), in an app of its own, and measures how much the heap grew;
// bytes/room is the mean over the ops, ns/op the time one op took to build
// its 1,000 rooms (5,000 commands and more, against MySQL).
//
//	go test ./rooms -run '^$' -bench RoomMemory -benchtime 1x
func BenchmarkRoomMemory(b *testing.B) {
	const rooms, users = 1000, 50
	e := newTestEnv(b, Config{})
	e.fast.discard = true // the messages kept would be counted as the rooms'
	// Warm up on rooms of another app, so that the pool's connections and
	// their buffers are there before the first measurement.
	buildRooms(b, e, "warmup", 64, users)
	var grown int64
	b.ResetTimer()
	for op := range b.N {
		b.StopTimer()
		before := heapAlloc()
		b.StartTimer()
		built := buildRooms(b, e, fmt.Sprintf("bench%d", op), rooms, users)
		b.StopTimer()
		grown += int64(heapAlloc() - before)
		runtime.KeepAlive(built)
		b.StartTimer()
	}
	perRoom := float64(grown) / float64(b.N*rooms)
	b.ReportMetric(perRoom, "bytes/room")
	b.ReportMetric(perRoom/1024, "KiB/room")
}

// heapAlloc returns the bytes of live heap objects after a collection.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// buildRooms creates n rooms of app through the service, 64 at a time; in
// each, users users join, the first DefaultSeatCount take the seats, and
// every user sends one gift. It returns the rooms' ids and fails the
// benchmark on any refused command.
func buildRooms(b *testing.B, e *testEnv, app string, n, users int) []string {
	b.Helper()
	ctx := context.Background()
	const price = 10
	if err := e.svc.UpsertGift(ctx, app, Gift{GiftID: 1, Name: "Rose", Price: price, Heat: 5, Enabled: true}); err != nil {
		b.Fatal(err)
	}
	user := func(u int) int64 { return int64(100_000 + u) } // owners are 1..n, below them
	for u := range users {
		if _, err := e.svc.Wallet().Credit(ctx, app, user(u), int64(n*price), fmt.Sprintf("bench-%s-%d", app, user(u)), "bench"); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]string, n)
	work := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range work {
				id, err := buildRoom(ctx, e, app, int64(i+1), users, user)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		})
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return ids
}

// buildRoom is one room of buildRooms.
func buildRoom(ctx context.Context, e *testEnv, app string, owner int64, users int, user func(int) int64) (string, error) {
	res, err := e.svc.Execute(ctx, createCmd(app, owner,
		Args{Title: "A room with a title", CoverURL: "https://cdn.example/covers/room.png", SeatCount: DefaultSeatCount}))
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	room := res.View.RoomID
	do := func(kind Kind, actor int64, args Args) error {
		cmd := &Command{Kind: kind, AppCode: app, RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: actor}, Args: args}
		if kind == KindSendGift {
			cmd.Args.GiftID = 1
		}
		if _, err := e.svc.Execute(ctx, cmd); err != nil {
			return fmt.Errorf("%s by %d in %s: %w", kind, actor, room, err)
		}
		return nil
	}
	for u := range users {
		if err := do(KindJoinRoom, user(u), Args{}); err != nil {
			return "", err
		}
	}
	for u := range min(users, DefaultSeatCount) {
		if err := do(KindMicUp, user(u), Args{SeatIndex: u}); err != nil {
			return "", err
		}
	}
	for u := range users {
		if err := do(KindSendGift, user(u), Args{Count: 1, TargetUserID: user(u)}); err != nil {
			return "", err
		}
	}
	return room, nil
}
