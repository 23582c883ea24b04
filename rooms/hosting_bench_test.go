package rooms

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// BenchmarkHostsCommands measures each hosts' command through the
// pipeline against MariaDB next to today's seat commands: 1,000 rooms, 64
// concurrent, each room owned by one worker, which walks the room through
// a cycle of commands that leaves it as it found it (a member takes seat 1
// and leaves it; mutes itself and unmutes; the host mutes its seat and
// unmutes it; ...). Every op is one durable command. Besides cmds/s and
// latency it reports this process's CPU per 1,000 commands (rooms, the
// committer and the MySQL driver; not MariaDB's) and MariaDB's InnoDB redo
// and bytes received per command (global counters: run it alone).
//
//	go test ./rooms -run '^$' -bench HostsCommands -benchtime 20000x
func BenchmarkHostsCommands(b *testing.B) {
	const member = 100_000 // + the room's index: each room's member
	// A step is one command of a cycle: by the room's member, or by its
	// owner (the host) when host is set, with args for room i.
	type step struct {
		kind Kind
		host bool
		args func(i int) Args
	}
	none := func(int) Args { return Args{} }
	fixed := func(a Args) func(int) Args { return func(int) Args { return a } }
	toMember := func(a Args) func(int) Args {
		return func(i int) Args {
			c := a // a is every room's: change a copy
			c.TargetUserID = member + int64(i)
			return c
		}
	}
	info := func(title, notice *string) func(int) Args {
		return func(int) Args { return Args{Info: &RoomInfo{Title: title, Notice: notice}} }
	}
	seated := []step{{KindMicUp, false, fixed(Args{SeatIndex: 1})}}
	cycles := []struct {
		name  string
		setup []step // after the member's join, before the cycle
		steps []step
	}{
		{name: "seat (MicUp, MicDown)", steps: []step{{KindMicUp, false, fixed(Args{SeatIndex: 1})}, {KindMicDown, false, none}}},
		{name: "SelfMute", setup: seated, steps: []step{{KindSelfMute, false, fixed(Args{Muted: true})}, {KindSelfMute, false, none}}},
		{name: "MuteSeat", setup: seated, steps: []step{
			{KindMuteSeat, true, fixed(Args{SeatIndex: 1, Muted: true})}, {KindMuteSeat, true, fixed(Args{SeatIndex: 1})}}},
		{name: "RequestMic, ApproveMicRequest, MicDown", steps: []step{
			{KindRequestMic, false, fixed(Args{SeatIndex: AnySeat})},
			{KindApproveMicRequest, true, toMember(Args{SeatIndex: AnySeat})},
			{KindMicDown, false, none}}},
		{name: "RequestMic, RejectMicRequest", steps: []step{
			{KindRequestMic, false, fixed(Args{SeatIndex: AnySeat})}, {KindRejectMicRequest, true, toMember(Args{})}}},
		{name: "RequestMic, CancelMicRequest", steps: []step{
			{KindRequestMic, false, fixed(Args{SeatIndex: 2})}, {KindCancelMicRequest, false, none}}},
		{name: "InviteToMic, AcceptMicInvitation, MicDown", steps: []step{
			{KindInviteToMic, true, toMember(Args{SeatIndex: AnySeat})}, {KindAcceptMicInvitation, false, none}, {KindMicDown, false, none}}},
		{name: "InviteToMic, DeclineMicInvitation", steps: []step{
			{KindInviteToMic, true, toMember(Args{SeatIndex: 3})}, {KindDeclineMicInvitation, false, none}}},
		{name: "UpdateRoomInfo", steps: []step{
			{KindUpdateRoomInfo, true, info(nil, new("Welcome to the late show: be kind"))},
			{KindUpdateRoomInfo, true, info(new("A room with a title"), new(""))}}},
		{name: "MuteChat", steps: []step{{KindMuteChat, true, toMember(Args{MuteSeconds: 600})}, {KindMuteChat, true, toMember(Args{})}}},
		{name: "AddRoomAdmin, RemoveRoomAdmin", steps: []step{
			{KindAddRoomAdmin, true, toMember(Args{})}, {KindRemoveRoomAdmin, true, toMember(Args{})}}},
		{name: "SetSeatMode", steps: []step{
			{KindSetSeatMode, true, fixed(Args{SeatMode: roomevent.SeatModeApply})},
			{KindSetSeatMode, true, fixed(Args{SeatMode: roomevent.SeatModeFree})}}},
	}
	const rooms, conc = 1000, 64
	for ci, cy := range cycles {
		b.Run(cy.name, func(b *testing.B) {
			e := newTestEnv(b, Config{})
			app := fmt.Sprintf("bench%d", ci)
			ids := make([]string, rooms)
			var next atomic.Int64
			do := func(i int, st step) error {
				actor := member + int64(i)
				if st.host {
					actor = int64(i + 1)
				}
				if _, err := e.do(b, app, ids[i], st.kind, actor, st.args(i)); err != nil {
					return fmt.Errorf("%s by %d: %w", st.kind, actor, err)
				}
				return nil
			}
			var wg sync.WaitGroup
			for w := range conc {
				wg.Go(func() {
					for i := w; i < rooms; i += conc {
						res, err := e.svc.Execute(context.Background(), createCmd(app, int64(i+1), Args{Title: "Room", SeatCount: 5}))
						if err != nil {
							b.Error(err)
							return
						}
						ids[i] = res.View.RoomID
						for _, st := range append([]step{{KindJoinRoom, false, none}}, cy.setup...) {
							if err := do(i, st); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			if b.Failed() {
				return
			}
			run := func(worker int, lat *[]time.Duration) {
				var mine []int // the rooms this worker walks, in turn
				for i := worker; i < rooms; i += conc {
					mine = append(mine, i)
				}
				pos := make([]int, rooms) // each room's next step
				for k := 0; next.Add(1) <= int64(b.N); k++ {
					i := mine[k%len(mine)]
					st := cy.steps[pos[i]]
					pos[i] = (pos[i] + 1) % len(cy.steps)
					start := time.Now()
					if err := do(i, st); err != nil {
						b.Error(err)
						return
					}
					*lat = append(*lat, time.Since(start))
				}
			}
			redo0, in0, cpu0 := mysqlCounter(b, e, "INNODB_OS_LOG_WRITTEN"), mysqlCounter(b, e, "BYTES_RECEIVED"), testenv.ProcessCPU(b).Seconds()
			reportConcurrent(b, conc, run)
			cpu, n := testenv.ProcessCPU(b).Seconds()-cpu0, float64(b.N)
			b.ReportMetric(cpu*1000/n, "cpu-s/1000cmds")
			b.ReportMetric(float64(mysqlCounter(b, e, "INNODB_OS_LOG_WRITTEN")-redo0)/n, "redo-B/cmd")
			b.ReportMetric(float64(mysqlCounter(b, e, "BYTES_RECEIVED")-in0)/n, "mysql-in-B/cmd")
		})
	}
}

// mysqlCounter reads one of MariaDB's global status counters.
func mysqlCounter(tb testing.TB, e *testEnv, name string) int64 {
	tb.Helper()
	return testenv.Scalar[int64](tb, e.db, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name)
}
