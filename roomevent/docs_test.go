package roomevent_test

import (
	"os"
	"strings"
	"testing"

	"voiceroom/roomevent"
)

// TestEventsTableMatchesSpecs keeps the events page's table of event types
// (docs/events.md, "Room events") true: every type is in it once, and its Tencent IM column
// says what the Spec does.
func TestEventsTableMatchesSpecs(t *testing.T) {
	raw, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Room events\n")
	if !ok {
		t.Fatal(`docs/events.md has no "## Room events" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	rowOf := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, name := range strings.Split(cells[1], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			if _, ok := roomevent.Lookup(name); ok {
				if _, dup := rowOf[name]; dup {
					t.Errorf("%s is in the table twice", name)
				}
				rowOf[name] = cells[2]
			}
		}
	}
	for _, typ := range roomevent.Types() {
		im, ok := rowOf[typ]
		if !ok {
			t.Errorf("%s is not in the events table", typ)
			continue
		}
		s, _ := roomevent.Lookup(typ)
		var want string
		switch s.IM {
		case roomevent.IMSkip:
			want = "none"
		case roomevent.IMCreateGroup:
			want = "creates the group"
		case roomevent.IMMessage:
			want = "message (Normal)"
			if s.IMHigh {
				want = "message (High)"
			}
		case roomevent.IMCloseGroup:
			want = "destroyed"
		case roomevent.IMMuteChat:
			want = "forbid_send_msg"
		}
		if !strings.Contains(im, want) {
			t.Errorf("%s: the events page says %q, the spec %q", typ, strings.TrimSpace(im), want)
		}
	}
}
