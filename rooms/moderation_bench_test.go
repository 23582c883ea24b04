package rooms

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
	"voiceroom/roomevent"
)

// BenchmarkBanRoom measures BanRoom through the pipeline on a room with 20
// users present (each removed with its own RoomUserLeft row), and the time
// until the ban is "gone from the list" as banToGone sees it. Here gone is
// the rooms row's status (what a list reading MySQL would see); with the list
// projector on the branch, pass its list read instead to measure ban to gone
// from the list. Setup (restore, joins) is not timed.
//
//	go test ./rooms -run '^$' -bench BanRoom -benchtime 200x
func BenchmarkBanRoom(b *testing.B) {
	e := newTestEnv(b, Config{})
	ctx := context.Background()
	room := e.create(b, "bench", 1).RoomID
	gone := func() (bool, error) {
		var status string
		err := e.db.QueryRowContext(ctx, "SELECT status FROM rooms WHERE app_code = 'bench' AND room_id = ?", room).Scan(&status)
		return status != roomevent.StatusActive, err
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if _, err := e.svc.Execute(ctx, as(benchAdmin(room), KindRestoreRoom, "bench")); err != nil {
			b.Fatal(err)
		}
		for u := int64(100); u < 120; u++ {
			if _, err := e.do(b, "bench", room, KindJoinRoom, u, Args{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		d, err := banToGone(func() error {
			_, err := e.svc.Execute(ctx, as(benchAdmin(room), KindBanRoom, fmt.Sprintf("bench %d", i)))
			return err
		}, gone, time.Millisecond, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func benchAdmin(room string) *Command {
	return &Command{AppCode: "bench", RoomID: room, CommandID: NewCommandID(), Actor: Actor{Admin: true, Operator: "admin:bench"}}
}

// banToGone runs ban and returns the time from its start until gone reports
// true, polling every poll, giving up after limit.
func banToGone(ban func() error, gone func() (bool, error), poll, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := ban(); err != nil {
		return 0, fmt.Errorf("ban: %w", err)
	}
	for {
		ok, err := gone()
		if err != nil {
			return 0, fmt.Errorf("check gone: %w", err)
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("not gone after %v", limit)
		}
		time.Sleep(poll)
	}
}
