//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// emulator is the IM emulator process (voiceroom imemu), when the build
// has one.
type emulator struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// The emulator's identity, passed to it and to the bridge.
const (
	emuSDKAppID = "1400000001"
	emuAdmin    = "administrator"
	emuKey      = "chaos-emulator-secret-key"
)

// startEmulator runs voiceroom imemu on a free port, or returns nil and why
// not when the build lacks it.
func startEmulator(t *testing.T, bin, dir string) (*emulator, string) {
	t.Helper()
	out, _ := exec.Command(bin, "imemu", "--help").CombinedOutput()
	if strings.Contains(string(out), "unknown command") {
		return nil, "skipped: this build has no IM emulator (voiceroom imemu)"
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	logf, err := os.Create(filepath.Join(dir, "imemu.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "imemu", "--listen", addr, "--sdkappid", emuSDKAppID, "--admin", emuAdmin, "--secret-key", emuKey)
	dieWithTest(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start imemu: %v", err)
	}
	e := &emulator{url: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(e.done) }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); <-e.done })
	waitAnswers(t, "imemu", e.url+"/_emu/stats", e.done, func() string { return fileTail(filepath.Join(dir, "imemu.log")) })
	return e, ""
}

// env is what the processes need to reach the emulator as Tencent IM.
func (e *emulator) env() []string {
	return []string{
		"VOICEROOM_TIM_DOMAIN=" + e.url,
		"VOICEROOM_TIM_SDKAPPID=" + emuSDKAppID,
		"VOICEROOM_TIM_ADMIN=" + emuAdmin,
		"VOICEROOM_TIM_SECRET_KEY=" + emuKey,
		// Redeliveries within the faults' length, and enough of them to
		// outlast 20 s of failures, so a fault tests recovery, not the DLQ.
		"VOICEROOM_IMBRIDGE_BACKOFF=200ms,500ms,1s",
		"VOICEROOM_IMBRIDGE_MAX_DELIVER=200",
		"VOICEROOM_IMBRIDGE_ACK_WAIT=5s",
	}
}

// fault sets the emulator's failure mode for d ("error", "timeout").
func (e *emulator) fault(t *testing.T, mode string, d time.Duration) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"mode": mode, "error_code": 70001, "duration_ms": d.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(e.url+"/_emu/faults", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("emulator fault: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("emulator fault %s: %d", mode, resp.StatusCode)
	}
}

func (e *emulator) clearFaults(t *testing.T) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, e.url+"/_emu/faults", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("clear emulator faults: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("clear emulator faults: %d", resp.StatusCode)
	}
}

// imAccount is what reached the emulator.
type imAccount struct {
	visible    int // committed events of the types the emulator shows
	delivered  int
	missing    []string
	shownTwice int
	outOfOrder []string // events first shown after a higher room_version of their room (whole run)
}

// checkIM asks the emulator about every committed event. Which event types
// are client-visible is the bridge's business: a type counts as visible
// once the emulator has shown at least one event of it, and then every
// committed event of that type must have been shown exactly once.
func (c *cluster) checkIM(ctx context.Context, e *emulator) (imAccount, error) {
	var a imAccount
	rows, err := c.db.QueryContext(ctx, "SELECT event_id, event_type FROM room_outbox WHERE app_code = ?", app)
	if err != nil {
		return a, err
	}
	type ev struct{ id, typ string }
	var evs []ev
	for rows.Next() {
		var x ev
		if err := rows.Scan(&x.id, &x.typ); err != nil {
			rows.Close()
			return a, err
		}
		evs = append(evs, x)
	}
	if err := closeRows(rows); err != nil {
		return a, err
	}
	shown := map[string]int64{}
	typeSeen := map[string]bool{}
	for _, x := range evs {
		var got struct {
			Shown int64 `json:"shown"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/_emu/events/"+url.PathEscape(x.id), nil)
		if err != nil {
			return a, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return a, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			err = json.NewDecoder(resp.Body).Decode(&got)
		case http.StatusNotFound: // never shown
		default:
			err = fmt.Errorf("emulator: event %s: %d", x.id, resp.StatusCode)
		}
		resp.Body.Close()
		if err != nil {
			return a, fmt.Errorf("emulator: event %s: %w", x.id, err)
		}
		shown[x.id] = got.Shown
		if got.Shown > 0 {
			typeSeen[x.typ] = true
		}
	}
	if a.outOfOrder, err = imOrder(ctx, e); err != nil {
		return a, err
	}
	for _, x := range evs {
		if !typeSeen[x.typ] {
			continue
		}
		a.visible++
		switch n := shown[x.id]; {
		case n == 0:
			a.missing = append(a.missing, x.typ+" "+x.id)
		case n > 1:
			a.shownTwice++
			a.delivered++
		default:
			a.delivered++
		}
	}
	return a, nil
}

// checkList compares every room's list item with its committed state.
func (d *driver) checkList(ctx context.Context) []string {
	var bad []string
	for i, room := range d.rooms {
		tok := d.owners[i] // the list is the region's: the owner's region is the room's
		st, code, data := d.send(ctx, "GET", "/api/v1/rooms/"+room, tok, "", nil)
		if st != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s: GET %d %s", room, st, code))
			continue
		}
		var snap struct {
			OnlineCount int   `json:"online_count"`
			Heat        int64 `json:"heat"`
		}
		if err := json.Unmarshal(data, &snap); err != nil {
			bad = append(bad, fmt.Sprintf("%s: GET answer %s: %v", room, data, err))
			continue
		}
		st, code, data = d.send(ctx, "GET", "/api/v1/rooms?tab=hot&limit=20&query="+url.QueryEscape(d.shortIDs[i]), tok, "", nil)
		if st != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s: list %d %s", room, st, code))
			continue
		}
		var page struct {
			Rooms []struct {
				RoomID      string `json:"room_id"`
				OnlineCount int    `json:"online_count"`
				Heat        int64  `json:"heat"`
			} `json:"rooms"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			bad = append(bad, fmt.Sprintf("%s: list answer %s: %v", room, data, err))
			continue
		}
		found := false
		for _, it := range page.Rooms {
			if it.RoomID != room {
				continue
			}
			found = true
			if it.OnlineCount != snap.OnlineCount || it.Heat != snap.Heat {
				bad = append(bad, fmt.Sprintf("%s: list online %d heat %d, room online %d heat %d", room, it.OnlineCount, it.Heat, snap.OnlineCount, snap.Heat))
			}
		}
		if !found {
			bad = append(bad, room+": not in the list")
		}
	}
	return bad
}

// imOrder reads every message the emulator showed, in the order it
// showed them, and returns the events first shown after an event of their
// room with a higher room_version: a room's events must reach IM in
// room order (a repeat of an event shown before is not an order
// question; checkIM counts it). A message carries one event, or a batch
// {"events":[...]} in room order.
func imOrder(ctx context.Context, e *emulator) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/_emu/messages?limit=200000", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("emulator: messages: %d", resp.StatusCode)
	}
	var list struct {
		Messages []struct {
			GroupID string `json:"group_id"`
			MsgSeq  int64  `json:"msg_seq"`
			Data    string `json:"data"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("emulator: messages: %w", err)
	}
	type event struct {
		EventID     string `json:"event_id"`
		RoomID      string `json:"room_id"`
		RoomVersion int64  `json:"room_version"`
	}
	var out []string
	newest := map[string]int64{}
	shown := map[string]bool{}
	for _, m := range list.Messages {
		var data struct {
			event
			Events []event `json:"events"`
		}
		if err := json.Unmarshal([]byte(m.Data), &data); err != nil {
			return nil, fmt.Errorf("emulator: message %s/%d: data %.200q: %w", m.GroupID, m.MsgSeq, m.Data, err)
		}
		evs := data.Events
		if len(evs) == 0 {
			evs = []event{data.event}
		}
		for _, ev := range evs {
			if ev.EventID == "" || shown[ev.EventID] {
				continue
			}
			shown[ev.EventID] = true
			if n := newest[ev.RoomID]; ev.RoomVersion < n {
				out = append(out, fmt.Sprintf("%s: %s v%d after v%d", ev.RoomID, ev.EventID, ev.RoomVersion, n))
			}
			newest[ev.RoomID] = max(newest[ev.RoomID], ev.RoomVersion)
		}
	}
	return out, nil
}
