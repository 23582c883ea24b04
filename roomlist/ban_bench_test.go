package roomlist_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/roomlist"
	"voiceroom/rooms"
)

// BenchmarkBanToGone measures ban to "gone from the list": from the start
// of BanRoom (five users present) until the region's first hot page, read
// through the Lister (Redis first, as GET /api/v1/rooms does), no longer
// shows the room. The path is the whole product: the room command, its
// events to JetStream at commit, the projector, Redis. Idle, then under
// about 1,000 other room commands/s (joins and leaves over 20 rooms of
// the region). Restores, joins and the wait for the room to be listed
// again are not timed.
//
//	go test ./roomlist -run '^$' -bench BanToGone -benchtime 100x
func BenchmarkBanToGone(b *testing.B) {
	s := newStack(b)
	ctx := context.Background()
	const loadRooms, loadUsers, present = 20, 32, 5
	for u := range loadRooms + loadUsers + present {
		s.user(fmt.Sprintf("demo:%d", 3000+u), fmt.Sprintf("bench_%d", u), "SG")
	}
	target := s.createRoom("demo:1001", "ban target")
	var load []string
	for i := range loadRooms {
		load = append(load, s.createRoom(fmt.Sprintf("demo:%d", 3000+i), fmt.Sprintf("load %d", i)))
	}
	req := roomlist.ListRequest{AppCode: "demo", RegionID: s.ids["SEA"], Limit: roomlist.MaxLimit}
	listed := func() (bool, error) {
		p, err := s.lister.List(ctx, req)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(p.Rooms, func(it roomlist.Item) bool { return it.RoomID == target }), nil
	}
	admin := func(kind rooms.Kind, reason string) *rooms.Command {
		return &rooms.Command{Kind: kind, AppCode: "demo", RoomID: target, CommandID: rooms.NewCommandID(),
			Actor: rooms.Actor{Admin: true, Operator: "admin:bench"}, Args: rooms.Args{Reason: reason}}
	}
	testenv.Eventually(b, 30*time.Second, func() error {
		if ok, err := listed(); err != nil || !ok {
			return fmt.Errorf("target not listed (%v)", err)
		}
		return nil
	})

	for _, rate := range []int{0, 1000} {
		name := "idle"
		if rate > 0 {
			name = fmt.Sprintf("load_%d_per_s", rate)
		}
		b.Run(name, func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var cmds, failed atomic.Int64
			if rate > 0 {
				// Paced: command k is due at start + k/rate, over loadUsers
				// workers, each joining and leaving the load rooms in turn.
				var slot atomic.Int64
				paceStart := time.Now()
				for w := range loadUsers {
					wg.Go(func() {
						user := int64(3000 + loadRooms + w)
						joined := false
						room := load[w%loadRooms]
						for i := 0; ; i++ {
							due := paceStart.Add(time.Duration(slot.Add(1)-1) * time.Second / time.Duration(rate))
							select {
							case <-stop:
								return
							case <-time.After(time.Until(due)):
							}
							cmd := &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: "demo", RoomID: room, CommandID: rooms.NewCommandID(),
								Actor: rooms.Actor{UserID: user}}
							if joined {
								cmd.Kind = rooms.KindLeaveRoom
							}
							_, err := s.rooms.Execute(ctx, cmd)
							if err != nil {
								if !apperr.Is(err, apperr.Unavailable) {
									b.Error(err)
									return
								}
								failed.Add(1)
								continue
							}
							cmds.Add(1)
							if joined = !joined; !joined {
								room = load[(w+i)%loadRooms]
							}
						}
					})
				}
			}
			lat := make([]time.Duration, 0, b.N)
			loadStart := time.Now()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if _, err := s.rooms.Execute(ctx, admin(rooms.KindRestoreRoom, "bench")); err != nil && !apperr.Is(err, apperr.FailedPrecondition) {
					b.Fatal(err)
				}
				for u := range present {
					cmd := &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: "demo", RoomID: target, CommandID: rooms.NewCommandID(),
						Actor: rooms.Actor{UserID: int64(3000 + loadRooms + loadUsers + u)}}
					if _, err := s.rooms.Execute(ctx, cmd); err != nil {
						b.Fatal(err)
					}
				}
				testenv.Eventually(b, 30*time.Second, func() error {
					if ok, err := listed(); err != nil || !ok {
						return fmt.Errorf("target not listed again (%v)", err)
					}
					return nil
				})
				b.StartTimer()
				start := time.Now()
				if _, err := s.rooms.Execute(ctx, admin(rooms.KindBanRoom, fmt.Sprintf("bench %d", i))); err != nil {
					b.Fatal(err)
				}
				for {
					ok, err := listed()
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					if time.Since(start) > 30*time.Second {
						b.Fatal("banned room still listed after 30s")
					}
					// The wait is the measured latency: a 1 ms poll
					// (testenv.Eventually's steps would add to it).
					time.Sleep(time.Millisecond)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			elapsed := time.Since(loadStart)
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(testenv.Millis(testenv.Percentile(lat, 0.5)), "p50_ms")
			b.ReportMetric(testenv.Millis(testenv.Percentile(lat, 0.99)), "p99_ms")
			b.ReportMetric(float64(cmds.Load())/elapsed.Seconds(), "load_cmds/s")
			b.ReportMetric(float64(failed.Load()), "unavailable")
			b.ReportMetric(0, "ns/op")
		})
	}
}
