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

// BenchmarkRoomMemory reports the heap one loaded room with 50 present users
// holds (its cell, state and the presence tracking), over 1,000 such rooms.
//
//	go test ./rooms -run '^$' -bench RoomMemory -benchtime 1x
func BenchmarkRoomMemory(b *testing.B) {
	const rooms, users = 1000, 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	states := make([]*State, rooms)
	for i := range states {
		c := &Command{AppCode: "bench", RoomID: "bench_" + uuid.NewString(), Actor: Actor{UserID: int64(i + 1)}, NowMs: 1,
			Args: Args{Title: "A room with a title", CoverURL: "https://cdn.example/covers/room.png", Mode: DefaultMode,
				SeatCount: DefaultSeatCount, ShortID: fmt.Sprintf("user%07d", i)}}
		states[i], _ = newRoom(c)
	}
	cells := make([]*cell, rooms)
	for i, st := range states {
		c := newCell(roomKey{AppCode: st.AppCode, RoomID: st.RoomID})
		cur := st
		for u := int64(1); u <= users; u++ {
			next := cur.Clone()
			cmd := &Command{Kind: KindJoinRoom, Actor: Actor{UserID: 1000 + u}, NowMs: 2}
			if _, _, err := apply(next, cmd, limits{}, false); err != nil {
				b.Fatal(err)
			}
			c.touch(cmd, 2)
			if u <= DefaultSeatCount {
				next.Seats[u-1].UserID = 1000 + u
			}
			next.addContribution(1000+u, u*10)
			cur = next
		}
		c.state.Store(cur)
		cells[i] = c
	}
	states = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRoom := float64(after.HeapAlloc-before.HeapAlloc) / rooms
	runtime.KeepAlive(cells)
	b.ReportMetric(perRoom, "bytes/room")
	b.ReportMetric(perRoom/1024, "KiB/room")
}
