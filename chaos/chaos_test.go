//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"
)

// scenario is one fault: inject starts it and returns when it is over
// (the service is back), or returns a reason to skip. It may add to r's
// problems (the fault did not happen as the scenario needs) and note.
//
// The sleeps in the scenarios are the faults' and the load's lengths: a
// service down for m.fault is a length of time, not a wait for a
// condition. What the suite waits for afterwards it polls (until).
type scenario struct {
	name string
	full bool // only in full mode
	// prepare, when set, runs before the scenario's load starts.
	prepare func(t *testing.T, c *cluster)
	inject  func(t *testing.T, c *cluster, r *row) (skip string)
	// afterLoad, when set, runs once the load has stopped, before the
	// accounting waits for the system to be quiet.
	afterLoad func(t *testing.T, c *cluster, r *row)
	// check, when set, runs after the accounting: checks of the
	// scenario's own, adding to r's problems and note.
	check func(t *testing.T, c *cluster, r *row)
}

// row is one line of the report.
type row struct {
	name                       string
	skip                       string
	ok                         int
	committed, inStream        int
	delivered                  string
	hooksDelivered             string // events the webhook receiver accepted, of those committed
	hooksRepeats               int    // deliveries beyond an event's first, dropped by id (whole run)
	lost, dupShown, outOfOrder string
	recover                    time.Duration // longest gap between two 200s
	problems                   []string
	note                       string   // what the fault did, e.g. rows pending at a kill
	hitRooms                   []string // the load's rooms the fault hit, when it hit some only
	listCheck, imCheck         string
	imOutOfOrder               string // events first shown in IM after a higher room_version of their room, this scenario
	dupInStream                int
	quiet                      time.Duration
	failed                     int
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers; skipped with -short")
	}
	m := chaosMode(t)
	// What failed is said again last: on a failure the cluster's cleanup
	// prints every process's log, which pushes the scenarios' own errors
	// far up the output (and out of a CI excerpt of its end).
	var rows []row
	t.Cleanup(func() {
		var failures []string
		for _, r := range rows {
			for _, p := range r.problems {
				failures = append(failures, r.name+": "+p)
			}
		}
		if len(failures) > 0 {
			t.Logf("what failed, again:\n%s", strings.Join(failures, "\n"))
		}
	})
	c := newCluster(t, m)
	d := newDriver(t, c, 12, 48)
	imSkip := c.emuWhy
	listSkip := listMissing(t, d)
	acts := &activitySet{} // scenario 12's activities, settled by 13
	battles := &pkSet{}    // scenario 14's battles

	scenarios := []scenario{
		{name: "1 IM errors then timeouts", inject: func(t *testing.T, c *cluster, _ *row) string {
			if c.emu == nil {
				return imSkip
			}
			c.emu.fault(t, "error", m.fault)
			time.Sleep(m.fault)
			c.emu.fault(t, "timeout", m.fault)
			time.Sleep(m.fault)
			c.emu.clearFaults(t)
			return ""
		}},
		{name: "2 JetStream restarted", inject: func(t *testing.T, c *cluster, _ *row) string {
			c.nats.stop()
			time.Sleep(m.fault)
			c.nats.start(t)
			return ""
		}},
		{name: "3 relay SIGKILLed mid-batch", inject: func(t *testing.T, c *cluster, r *row) string {
			// A backlog for the relay: the relay stopped, and JetStream away
			// long enough for the fast path to leave events to the relay
			// (it then leaves those rooms' later events to it too), then
			// back. The relay starts on the backlog behind a gate that
			// lets part of its publishes' acks through and holds the rest,
			// and is killed while it waits for one (killMidDrain).
			c.relay.signal(t, syscall.SIGTERM)
			c.nats.stop()
			time.Sleep(m.fault)
			c.nats.start(t)
			killMidDrain(t, c, r)
			time.Sleep(m.fault / 2)
			c.relay.start(t)
			return ""
		}},
		{name: "4 rooms process SIGKILLed", inject: func(t *testing.T, c *cluster, _ *row) string {
			c.api.signal(t, syscall.SIGKILL)
			time.Sleep(m.fault / 3)
			c.api.start(t)
			return ""
		}},
		{name: "5 projector process SIGKILLed", inject: func(t *testing.T, c *cluster, _ *row) string {
			c.proj.signal(t, syscall.SIGKILL)
			time.Sleep(m.fault / 3)
			c.proj.start(t)
			return ""
		}},
		{name: "6 Redis stopped and started", inject: func(t *testing.T, c *cluster, _ *row) string {
			c.redis.stop()
			time.Sleep(m.fault)
			c.redis.start(t)
			return ""
		}},
		{name: "7 MySQL connections KILLed", inject: func(t *testing.T, c *cluster, _ *row) string {
			ctx := context.Background()
			for range 3 {
				if _, err := c.killMySQLConnections(ctx); err != nil {
					t.Errorf("kill connections: %v", err)
				}
				time.Sleep(m.fault / 3)
			}
			return ""
		}},
		{name: "8 MySQL restarted", full: true, inject: func(t *testing.T, c *cluster, _ *row) string {
			c.maria.stop()
			time.Sleep(m.fault)
			c.maria.start(t)
			return ""
		}},
		{name: "9 a rooms node SIGKILLed",
			prepare: func(t *testing.T, c *cluster) { c.servesLoad(t, c.rooms2, d.rooms) },
			inject: func(t *testing.T, c *cluster, r *row) string {
				killRoomsNode(t, c, r, c.rooms2, d.rooms)
				return ""
			}},
		{name: "10 a rooms node paused past its lease",
			prepare: func(t *testing.T, c *cluster) { c.servesLoad(t, c.rooms3, d.rooms) },
			inject: func(t *testing.T, c *cluster, r *row) string {
				pauseRoomsNode(t, c, r, c.rooms3, d.rooms)
				return ""
			}},
		{name: "11 webhook receiver down, deliverer SIGKILLed", inject: func(t *testing.T, c *cluster, r *row) string {
			webhooksDown(t, c, r, m.fault)
			return ""
		}},
		{name: "12 activity process SIGKILLed mid-window",
			prepare: func(t *testing.T, c *cluster) { defineActivities(t, c, d, acts) },
			inject: func(t *testing.T, c *cluster, r *row) string {
				killActivity(t, c, r, acts)
				return ""
			},
			check: func(t *testing.T, c *cluster, r *row) {
				problems, note := checkActivities(c, acts)
				r.problems = append(r.problems, problems...)
				r.note = strings.TrimPrefix(r.note+"; "+note, "; ")
			}},
		{name: "13 settlement SIGKILLed half-way through paying",
			prepare: func(t *testing.T, c *cluster) {
				if acts.defined() {
					creditOwners(t, d)
					c.activity2.start(t)
				}
			},
			inject: func(t *testing.T, c *cluster, r *row) string {
				if !acts.defined() {
					return "skipped: scenario 12 defined no activities"
				}
				settleKilled(t, c, d, r, acts)
				return ""
			},
			check: func(t *testing.T, c *cluster, r *row) {
				if !acts.defined() {
					return
				}
				problems, note := checkSettled(c, acts)
				r.problems = append(r.problems, problems...)
				r.note = strings.TrimPrefix(r.note+"; "+note, "; ")
			}},
		{name: "14 PK battles through a rooms-node SIGKILL",
			prepare: func(t *testing.T, c *cluster) { startBattles(t, c, d, c.rooms2, battles) },
			inject: func(t *testing.T, c *cluster, r *row) string {
				killDuringBattles(t, c, d, r, c.rooms2, battles)
				return ""
			},
			afterLoad: func(t *testing.T, c *cluster, r *row) {
				r.problems = append(r.problems, endBattles(context.Background(), c, d, battles)...)
			},
			check: func(t *testing.T, c *cluster, r *row) {
				problems, note := checkBattles(t, c, d, battles)
				r.problems = append(r.problems, problems...)
				r.note = strings.TrimPrefix(r.note+"; "+note, "; ")
			}},
	}

	var all []outcome
	var prev account // the previous scenario's totals, for per-scenario figures
	var prevHooks struct{ outOfOrder, unverified int }
	prevIMOrder := 0 // events first shown in IM out of their room's order, before this scenario
	for _, sc := range scenarios {
		r := row{name: sc.name, delivered: "n/a", hooksDelivered: "n/a", dupShown: "n/a", imOutOfOrder: "n/a", imCheck: imSkip, listCheck: listSkip}
		if sc.full && !m.full {
			r.skip = "full mode only (VOICEROOM_CHAOS=full)"
			rows = append(rows, r)
			continue
		}
		passed := t.Run(sc.name, func(t *testing.T) {
			if sc.prepare != nil {
				sc.prepare(t, c)
			}
			before := len(d.outcomes())
			d.start(8)
			time.Sleep(m.load)
			skip := sc.inject(t, c, &r)
			time.Sleep(m.load)
			d.stop()
			loadEnd := time.Now()
			if sc.afterLoad != nil {
				sc.afterLoad(t, c, &r)
			}
			outs := d.outcomes()
			scen := outs[before:]
			all = outs
			if skip != "" {
				r.skip = skip
			}
			r.recover = longestGap(scen)
			if len(r.hitRooms) > 0 {
				var hit []outcome
				for _, o := range scen {
					if slices.Contains(r.hitRooms, o.room) {
						hit = append(hit, o)
					}
				}
				gap := fmt.Sprintf("longest gap between OKs on its rooms %s", longestGap(hit).Round(10*time.Millisecond))
				r.note = strings.TrimPrefix(r.note+"; "+gap, "; ")
			}
			for _, o := range scen {
				if !o.definite() {
					r.failed++
				}
			}

			var a account
			var waits []string
			wait := func(what string, check func() error) {
				if err := until(m.quiet, check); err != nil {
					waits = append(waits, fmt.Sprintf("%s not reached within %s: %v", what, m.quiet, err))
				}
			}
			wait("quiet", func() error {
				var err error
				a, err = c.check(context.Background(), scen, all)
				if err != nil {
					return err
				}
				if a.pending > 0 || a.lost > 0 {
					return fmt.Errorf("not quiet: %d pending, %d not in the stream yet", a.pending, a.lost)
				}
				return nil
			})
			if c.emu != nil {
				var im imAccount
				wait("IM delivery", func() error {
					var err error
					if im, err = c.checkIM(context.Background(), c.emu); err != nil {
						return err
					}
					if len(im.missing) > 0 {
						return fmt.Errorf("%d client-visible events not shown yet, e.g. %v", len(im.missing), first(im.missing))
					}
					return nil
				})
				r.delivered, r.dupShown = fmt.Sprintf("%d of %d", im.delivered, im.visible), fmt.Sprint(im.shownTwice)
				if im.shownTwice > 0 {
					waits = append(waits, fmt.Sprintf("%d events shown twice in IM", im.shownTwice))
				}
				if im.visible == 0 {
					waits = append(waits, "the emulator showed no event at all")
				}
				r.imOutOfOrder = fmt.Sprint(max(len(im.outOfOrder)-prevIMOrder, 0))
				if n := len(im.outOfOrder) - prevIMOrder; n > 0 {
					waits = append(waits, fmt.Sprintf("%d events reached IM after a higher room_version of their room: %v", n, first(im.outOfOrder[prevIMOrder:])))
				}
				prevIMOrder = max(prevIMOrder, len(im.outOfOrder))
			}
			var hk hooksAccount
			wait("webhook delivery", func() error {
				var err error
				if hk, err = c.hooks.check(context.Background(), c); err != nil {
					return err
				}
				if len(hk.missing) > 0 {
					return fmt.Errorf("%d committed events not at the webhook receiver yet, e.g. %v", len(hk.missing), first(hk.missing))
				}
				return nil
			})
			r.hooksDelivered, r.hooksRepeats = fmt.Sprintf("%d of %d", hk.delivered, hk.committed), hk.repeats
			if n := len(hk.outOfOrder) - prevHooks.outOfOrder; n > 0 {
				waits = append(waits, fmt.Sprintf("%d events reached the webhook receiver after a higher room_version of their room: %v", n, first(hk.outOfOrder[prevHooks.outOfOrder:])))
			}
			prevHooks.outOfOrder = len(hk.outOfOrder)
			if n := len(hk.unverified) - prevHooks.unverified; n > 0 {
				waits = append(waits, fmt.Sprintf("%d webhook deliveries did not verify: %v", n, first(hk.unverified[prevHooks.unverified:])))
			}
			prevHooks.unverified = len(hk.unverified)
			if listSkip == "" {
				wait("list convergence", func() error {
					if bad := d.checkList(context.Background()); len(bad) > 0 {
						return fmt.Errorf("list differs from the rooms: %v", first(bad))
					}
					return nil
				})
			}
			if sc.check != nil {
				sc.check(t, c, &r)
			}
			r.quiet = time.Since(loadEnd)
			r.ok, r.committed, r.inStream = a.okAnswers, a.committed-prev.committed, a.inStream-prev.inStream
			r.lost, r.outOfOrder, r.dupInStream = fmt.Sprint(a.lost), fmt.Sprint(a.outOfOrder-prev.outOfOrder), a.dupInStream
			if n := a.outOfOrder - prev.outOfOrder; n > 0 {
				waits = append(waits, fmt.Sprintf("%d events stored in ROOM_EVENTS after a higher room_version of their room", n))
			}
			prev = a
			r.problems = append(append(r.problems, waits...), a.problems()...)
			for _, p := range r.problems {
				t.Error(p)
			}
		})
		if !passed && len(r.problems) == 0 {
			// It stopped on a t.Fatal: the report and the list above say so.
			r.problems = append(r.problems, "failed (its output above says where)")
		}
		rows = append(rows, r)
	}
	report(t, rows, imSkip, listSkip)
	t.Run("the checks catch a loss", func(t *testing.T) { checksCatchLoss(t, c, d.outcomes()) })
	if acts.defined() {
		t.Run("the activity checks catch a miscount", func(t *testing.T) { activityChecksCatch(t, c, acts) })
	}
	if len(battles.battles) > 0 {
		t.Run("the battle checks catch a miscount", func(t *testing.T) { pkChecksCatch(t, c, d, battles) })
	}
}

// checksCatchLoss breaks the record on purpose and expects the accounting to
// say so: an event committed (and marked published) that the stream never
// got, and a wallet that differs from its ledger. Both are undone after.
func checksCatchLoss(t *testing.T, c *cluster, all []outcome) {
	ctx := context.Background()
	var room string
	var version int64
	if err := c.db.QueryRow("SELECT room_id, MAX(room_version) FROM room_command_log WHERE app_code = ? GROUP BY room_id LIMIT 1", app).Scan(&room, &version); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(`INSERT INTO room_outbox (app_code, event_id, room_id, room_version, event_type, envelope, status, retry_count, created_at_ms, published_at_ms)
		VALUES (?, 'chaos-lost-event', ?, ?, 'RoomUserJoined', '{}', 'published', 0, 1, 1)`, app, room, version); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec("UPDATE wallets SET balance = balance + 1 WHERE app_code = ? LIMIT 1", app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.db.Exec("DELETE FROM room_outbox WHERE event_id = 'chaos-lost-event'"); err != nil {
			t.Errorf("undo the lost event: %v", err)
		}
	})
	a, err := c.check(ctx, nil, all)
	if err != nil {
		t.Fatal(err)
	}
	if a.lost != 1 {
		t.Errorf("lost = %d, want the 1 event the stream never got", a.lost)
	}
	if len(a.walletBad) != 1 {
		t.Errorf("wallets differing from their ledger = %v, want 1", a.walletBad)
	}
	if len(a.problems()) < 2 {
		t.Errorf("problems = %v, want the loss and the wallet", a.problems())
	}
}

// until calls check every 100 ms until it returns nil or timeout passes,
// and returns check's last error: a scenario that does not converge is a
// row of the report, not the end of the suite.
func until(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// longestGap is the longest time between two consecutive 200s of the
// scenario: how long clients saw the service unavailable.
func longestGap(outs []outcome) time.Duration {
	var times []time.Time
	for _, o := range outs {
		if o.status == http.StatusOK {
			times = append(times, o.at)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for i := 1; i < len(times); i++ {
		gap = max(gap, times[i].Sub(times[i-1]))
	}
	return gap
}

// listMissing returns why the list checks cannot run: "" when the room list
// answers, a reason to skip them when this build has no room list (the
// route is not found, or not allowed). Any other answer fails the suite: a
// list that cannot be read is a failure, not a skip.
func listMissing(t *testing.T, d *driver) string {
	var st int
	var code string
	err := until(30*time.Second, func() error {
		st, code, _ = d.send(context.Background(), "GET", "/api/v1/rooms?tab=hot&limit=1", d.users[0].token, "", nil)
		switch {
		case st == http.StatusOK, st == http.StatusMethodNotAllowed:
			return nil
		case st == http.StatusNotFound && strings.Contains(code, "route not found"):
			return nil
		}
		return fmt.Errorf("GET /api/v1/rooms answers %d %s", st, code)
	})
	if err != nil {
		t.Fatalf("%v: the room list cannot be read", err)
	}
	if st != http.StatusOK {
		return fmt.Sprintf("skipped: this build has no room list (GET /api/v1/rooms answers %d %s)", st, code)
	}
	return ""
}

func report(t *testing.T, rows []row, imSkip, listSkip string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tOK answers\tfailed answers\tevents committed\tin stream\tdelivered (IM)\tdelivered (webhooks)\tlost\tduplicates shown\twebhook repeats\tstream dups\tout of order\tIM out of order\tlongest gap between OKs\tquiet after\tresult")
	for _, r := range rows {
		if r.skip != "" && r.committed == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", r.name, r.skip)
			continue
		}
		res := "ok"
		if len(r.problems) > 0 {
			res = "FAIL: " + strings.Join(r.problems, "; ")
		} else if r.skip != "" {
			res = "load only (" + r.skip + ")"
		}
		if r.note != "" {
			res += " (" + r.note + ")"
		}
		rec := "-"
		if r.recover >= 0 {
			rec = r.recover.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.name, r.ok, r.failed, r.committed, r.inStream, r.delivered, r.hooksDelivered,
			r.lost, r.dupShown, r.hooksRepeats, r.dupInStream, r.outOfOrder, r.imOutOfOrder, rec, r.quiet.Round(10*time.Millisecond), res)
	}
	tw.Flush()
	if imSkip == "" {
		imSkip = "every committed event of a type the emulator shows was shown exactly once, each room's events first shown in room_version order (IM out of order counts the scenario's others; each fails it)"
	}
	if listSkip == "" {
		listSkip = "every room's list item matched its online count and heat"
	}
	fmt.Fprintf(&b, "failed answers: no definite answer after 15 s of retries with the same key (may or may not have committed; checked either way).\n"+
		"events committed, in stream and out of order are the scenario's; lost, stream dups and both delivered columns count the whole run; quiet after counts from the load's end.\n"+
		"webhook checks: every committed event accepted by the receiver (signature verified), each room's events first arriving in room_version order; out of order counts ROOM_EVENTS's own messages stored after a higher room_version of their room (each fails the scenario); repeats are allowed (the receiver drops them by id).\n"+
		"IM checks: %s; list checks: %s\n", imSkip, listSkip)
	t.Log("\n" + b.String())
	fmt.Fprint(os.Stdout, b.String())
}
