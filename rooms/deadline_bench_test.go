package rooms

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStuckRoom is the hand test as a measurement: while
// another MySQL session holds a lock, one join of room A answers (metric
// stuck-ms: how long it took), and room B's commands run back to back
// meanwhile (other-ok, other-failed, other-cmds/s). lock=table holds
// LOCK TABLES room_command_log WRITE, which every room's write needs;
// lock=row holds room A's rooms row FOR UPDATE, which only room A's writes
// need. The command timeout is the default, 5s.
//
//	go test ./rooms -run '^$' -bench StuckRoom -benchtime 1x
func BenchmarkStuckRoom(b *testing.B) {
	for _, lock := range []string{"table", "row"} {
		b.Run("lock="+lock, func(b *testing.B) {
			e := newTestEnv(b, Config{})
			a := e.create(b, "app1", 1).RoomID
			other := e.create(b, "app1", 2).RoomID
			ctx := context.Background()
			var stuck time.Duration
			var ok, failed int
			var otherTime time.Duration
			b.ResetTimer()
			for i := range b.N {
				var release func()
				switch lock {
				case "table":
					conn, err := e.db.Conn(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := conn.ExecContext(ctx, "LOCK TABLES room_command_log WRITE"); err != nil {
						b.Fatal(err)
					}
					release = func() {
						conn.ExecContext(ctx, "UNLOCK TABLES")
						conn.Close()
					}
				case "row":
					release = lockRoomRows(b, e.db, "app1", a)
				}
				start := time.Now()
				done := e.goDo(ctx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: a, CommandID: NewCommandID(),
					Actor: Actor{UserID: int64(100 + i)}})
				kind := KindJoinRoom
			meanwhile:
				for {
					select {
					case got := <-done:
						if got.err == nil {
							b.Fatal("the join of the locked room succeeded")
						}
						stuck += got.elapsed
						otherTime += time.Since(start)
						break meanwhile
					default:
					}
					if _, err := e.do(b, "app1", other, kind, 200, Args{}); err != nil {
						failed++
					} else {
						ok++
						if kind == KindJoinRoom {
							kind = KindLeaveRoom
						} else {
							kind = KindJoinRoom
						}
					}
				}
				release()
			}
			b.StopTimer()
			b.ReportMetric(float64(stuck.Milliseconds())/float64(b.N), "stuck-ms")
			b.ReportMetric(float64(ok)/float64(b.N), "other-ok")
			b.ReportMetric(float64(failed)/float64(b.N), "other-failed")
			b.ReportMetric(float64(ok)/otherTime.Seconds(), "other-cmds/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
