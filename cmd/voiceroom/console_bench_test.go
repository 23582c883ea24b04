package main

import (
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// pageTimings are what the browser measured of one load of a console page
// (Navigation and Resource Timing, and the console script's mark).
type pageTimings struct {
	// Shown is when the page's content was in the document, ms after the
	// navigation started: its first render.
	Shown float64 `json:"shown"`
	// Paint is the shell's first contentful paint, ms.
	Paint float64 `json:"paint"`
	// Transfer and Body are the bytes of the document and every resource,
	// on the wire and decoded.
	Transfer float64 `json:"transfer"`
	Body     float64 `json:"body"`
	// Requests are the resources fetched after the document.
	Requests float64 `json:"requests"`
}

const pageTimingsJS = `(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const shown = performance.getEntriesByName('console:shown');
  const paint = performance.getEntriesByName('first-contentful-paint');
  return {
    shown: shown.length ? shown[shown.length - 1].startTime : -1,
    paint: paint.length ? paint[0].startTime : -1,
    transfer: nav.transferSize + res.reduce((s, r) => s + r.transferSize, 0),
    body: nav.decodedBodySize + res.reduce((s, r) => s + r.decodedBodySize, 0),
    requests: res.length,
  };
})()`

// BenchmarkConsoleListPage measures the console's region list page in a
// headless Chromium against a serve whose region holds
// VOICEROOM_BENCH_ROOMS rooms (100,000), written straight into
// room_list_entries, with Redis off (the list's MySQL path, its slower
// one): the time from navigation to the first page of cards shown, and
// the bytes the browser downloads for it, over VOICEROOM_BENCH_RUNS loads
// (5). The ceiling in the same run is the plain JSON API call the page
// makes for its list (GET /admin/v1/rooms), from Go; the page's content
// alone (the four API calls and the template, fetched as its script
// does) is reported too. Run with -benchtime 1x.
func BenchmarkConsoleListPage(b *testing.B) {
	findBrowser(b)
	n, runs := testenv.EnvInt("VOICEROOM_BENCH_ROOMS", 100000), testenv.EnvInt("VOICEROOM_BENCH_RUNS", 5)
	p, vars := startServe(b, "VOICEROOM_REDIS_ADDR=")
	base := p.waitServing(b, vars)
	waitReady(b, p, base)
	secret := []byte(vars["VOICEROOM_JWT_SECRET"])
	admin := issue(b, secret, "e2e", 0)
	var region struct {
		RegionID int64 `json:"region_id"`
	}
	if status := adminOf(b, base, secret, "e2e", "POST", "/admin/v1/regions", `{"region_code":"BIG","name":"Big region"}`, &region); status != 200 {
		b.Fatalf("create region: %d", status)
	}
	db, err := sql.Open("mysql", vars["VOICEROOM_MYSQL_DSN"])
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	seedListEntries(b, db, "e2e", region.RegionID, n)
	b.Logf("seeded %d rooms in region %d in %v", n, region.RegionID, time.Since(start).Round(time.Millisecond))

	br := newTestBrowser(b, base)
	br.open("/console/")
	br.signIn(admin)
	br.waitText("main h1", "Regions and countries")
	page := "/console/lists?region=" + strconv.FormatInt(region.RegionID, 10)
	api := "/admin/v1/rooms?tab=hot&limit=20&visible_region_id=" + strconv.FormatInt(region.RegionID, 10)

	var shown, paint, apiMs, contentMs []float64
	var last pageTimings
	b.ResetTimer()
	for range b.N {
		for range runs {
			br.open(page)
			br.waitFor(`document.querySelectorAll('#rooms .card').length === 20`)
			last = eval[pageTimings](br, pageTimingsJS)
			shown, paint = append(shown, last.Shown), append(paint, last.Paint)
			t0 := time.Now()
			if status := adminOf(b, base, secret, "e2e", "GET", api, "", nil); status != 200 {
				b.Fatalf("GET %s: %d", api, status)
			}
			apiMs = append(apiMs, testenv.Millis(time.Since(t0)))
			t0 = time.Now()
			if status, body := fragment(b, base, admin, "GET", page, nil); status != 200 || strings.Count(body, `<article class="card`) != 20 {
				b.Fatalf("GET %s content: %d, %d cards", page, status, strings.Count(body, `<article class="card`))
			}
			contentMs = append(contentMs, testenv.Millis(time.Since(t0)))
		}
	}
	b.StopTimer()
	b.ReportMetric(median(shown), "first-render-ms")
	b.ReportMetric(median(paint), "shell-paint-ms")
	b.ReportMetric(median(contentMs), "content-ms")
	b.ReportMetric(median(apiMs), "json-api-ms")
	b.ReportMetric(last.Transfer, "transfer-bytes")
	b.ReportMetric(last.Body, "decoded-bytes")
	b.ReportMetric(last.Requests, "requests")
	b.Logf("first render %v ms, shell paint %v ms, content %v ms, JSON API %v ms; %v bytes transferred (%v decoded) in %v requests after the document",
		shown, paint, contentMs, apiMs, last.Transfer, last.Body, last.Requests)
}

// median of xs; it sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// seedListEntries writes n active rooms of app into region's list, 1,000
// rows a statement.
func seedListEntries(tb testing.TB, db *sql.DB, app string, region int64, n int) {
	tb.Helper()
	const chunk = 1000
	for first := 0; first < n; first += chunk {
		var q strings.Builder
		q.WriteString(`INSERT INTO room_list_entries (app_code, room_id, room_short_id, visible_region_id, owner_user_id, host_user_id,
			title, mode, status, heat, online_count, seat_count, occupied_seat_count, sort_score, room_version, created_at_ms, updated_at_ms) VALUES `)
		args := make([]any, 0, chunk*14)
		for i := first; i < min(first+chunk, n); i++ {
			if i > first {
				q.WriteByte(',')
			}
			heat := int64(i * 7919 % 5000)
			q.WriteString("(?,?,?,?,?,?,?,'voice','active',?,?,10,?,?,1,?,?)")
			args = append(args, app, fmt.Sprintf("%s_bench%08d", app, i), fmt.Sprintf("b%d", i), region, 500000+i, 500000+i,
				fmt.Sprintf("Room %d", i), heat, i%50, i%10, heat*1000+int64(i%1000), 1_700_000_000_000+int64(i), 1_700_000_000_000+int64(i))
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			tb.Fatal(err)
		}
	}
}
