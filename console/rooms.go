package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// searchPage finds rooms by id (GET /admin/v1/rooms/{id}), or by short
// id or title in a region's list (GET /admin/v1/rooms?query=).
func (c *Console) searchPage(k *call) error {
	k.v.Title, k.v.Section = "Rooms", "rooms"
	q := k.r.URL.Query()
	d := map[string]any{"Q": strings.TrimSpace(q.Get("q")), "Region": q.Get("region")}
	if d["Region"] == "" {
		d["Region"] = "0"
	}
	k.v.Data = d
	var regions map[string]any
	if err := k.get("/admin/v1/regions", nil, &regions); err != nil {
		return err
	}
	d["Regions"] = regions["regions"]
	term := d["Q"].(string)
	if term == "" {
		return nil
	}
	var found []map[string]any
	if k.v.App != "" && strings.HasPrefix(term, k.v.App+"_") {
		var room map[string]any
		if err := k.get("/admin/v1/rooms/"+url.PathEscape(term), nil, &room); err == nil {
			found = append(found, room)
		}
	}
	var err error
	if utf8.RuneCountInString(term) <= 32 {
		var page struct {
			Rooms []map[string]any `json:"rooms"`
		}
		err = k.get("/admin/v1/rooms", url.Values{"visible_region_id": {d["Region"].(string)}, "query": {term},
			"limit": {strconv.Itoa(c.cfg.PageSize)}}, &page)
		found = append(found, page.Rooms...)
	}
	d["Found"] = found
	return err
}

// roomPage: a room's live view (GET /admin/v1/rooms/{id}) and a page of
// its audit trail, newest first.
func (c *Console) roomPage(k *call) error {
	id := k.r.PathValue("id")
	k.v.Title, k.v.Section = "Room "+id, "rooms"
	d := map[string]any{"ID": id}
	k.v.Data = d
	var room map[string]any
	if err := k.get("/admin/v1/rooms/"+url.PathEscape(id), nil, &room); err != nil {
		return err
	}
	d["Room"] = room
	var regions map[string]any
	if err := k.get("/admin/v1/regions", nil, &regions); err != nil {
		return err
	}
	d["Regions"] = regions["regions"]
	q := url.Values{"limit": {strconv.Itoa(c.cfg.PageSize)}}
	if cur := k.r.URL.Query().Get("cursor"); cur != "" {
		q.Set("cursor", cur)
		d["Cursor"] = cur
	}
	var audit map[string]any
	err := k.get("/admin/v1/rooms/"+url.PathEscape(id)+"/audit", q, &audit)
	d["Audit"] = audit
	return err
}

// moderation are the operators' room actions and their verbs.
var moderation = map[string]string{"ban": "banned", "restore": "restored", "close": "closed"}

func confirmModeration(k *call) string {
	switch k.r.PathValue("op") {
	case "ban":
		return fmt.Sprintf("Ban room %s? Everyone leaves and it drops out of the lists until restored.", k.r.PathValue("id"))
	case "close":
		return fmt.Sprintf("Close room %s? A closed room cannot be opened again.", k.r.PathValue("id"))
	}
	return ""
}

// moderate bans, restores or closes a room with the form's reason.
func (c *Console) moderate(k *call) (string, error) {
	op, id := k.r.PathValue("op"), k.r.PathValue("id")
	verb, ok := moderation[op]
	if !ok {
		return "", invalid("action", "must be ban, restore or close")
	}
	body := map[string]any{"reason": formText(k.r, "reason")}
	if err := k.send(http.MethodPost, "/admin/v1/rooms/"+url.PathEscape(id)+"/"+op, body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Room %s %s.", id, verb), nil
}
