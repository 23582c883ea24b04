package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// listData is the lists page's: one page of a region's list as its users
// get it (GET /admin/v1/rooms), with the region's pins and hides.
type listData struct {
	Regions  any
	Region   string
	Tab      string
	Query    string
	Cursor   string
	Rooms    []map[string]any
	Next     string
	Pins     []map[string]any
	Hides    []map[string]any
	PinOf    map[string]string // room id -> active pin id
	HideOf   map[string]string // room id -> applying hide id
	Titles   map[string]string // room id -> title, for the pins and hides tables
	PageSize int
}

func (c *Console) listsPage(k *call) error {
	k.v.Title, k.v.Section = "Room lists", "lists"
	q := k.r.URL.Query()
	d := &listData{Region: q.Get("region"), Tab: q.Get("tab"), Query: q.Get("query"), Cursor: q.Get("cursor"),
		PinOf: map[string]string{}, HideOf: map[string]string{}, Titles: map[string]string{}, PageSize: c.cfg.PageSize}
	if d.Region == "" {
		d.Region = "0"
	}
	if d.Tab != "new" {
		d.Tab = "hot"
	}
	k.v.Data = d
	var regions map[string]any
	if err := k.get("/admin/v1/regions", nil, &regions); err != nil {
		return err
	}
	d.Regions = regions["regions"]
	region := url.Values{"visible_region_id": {d.Region}}
	var pins struct {
		Pins []map[string]any `json:"pins"`
	}
	if err := k.get("/admin/v1/pins", region, &pins); err != nil {
		return err
	}
	d.Pins = pins.Pins
	now := c.now().UnixMilli()
	for _, p := range d.Pins {
		if p["status"] == "active" && num(p["expires_at_ms"]) > now {
			d.PinOf[fmt.Sprint(p["room_id"])] = fmt.Sprint(p["pin_id"])
		}
	}
	var hides struct {
		Hides []map[string]any `json:"hides"`
	}
	if err := k.get("/admin/v1/hides", region, &hides); err != nil {
		return err
	}
	d.Hides = hides.Hides
	for _, h := range d.Hides {
		if exp := num(h["expires_at_ms"]); h["status"] == "active" && (exp == 0 || exp > now) {
			d.HideOf[fmt.Sprint(h["room_id"])] = fmt.Sprint(h["hide_id"])
		}
	}
	list := url.Values{"visible_region_id": {d.Region}, "tab": {d.Tab}, "limit": {strconv.Itoa(c.cfg.PageSize)}}
	if d.Cursor != "" {
		list.Set("cursor", d.Cursor)
	}
	if d.Query != "" {
		list.Set("query", d.Query)
	}
	var page struct {
		Rooms      []map[string]any `json:"rooms"`
		NextCursor string           `json:"next_cursor"`
	}
	err := k.get("/admin/v1/rooms", list, &page)
	d.Rooms, d.Next = page.Rooms, page.NextCursor
	c.titles(k, d)
	return err
}

// maxTitleLookups bounds the rooms whose titles the lists page asks for
// one by one: a longer table shows the rest by id.
const maxTitleLookups = 50

// titles fills d.Titles for the rooms of the pins and hides tables: from
// the list's page when it holds them, else from each room (GET
// /admin/v1/rooms/{id}; a hidden room is never in the list). A room it
// cannot read is shown by id.
func (c *Console) titles(k *call, d *listData) {
	for _, r := range d.Rooms {
		d.Titles[fmt.Sprint(r["room_id"])] = fmt.Sprint(r["title"])
	}
	lookups := 0
	for _, rows := range [][]map[string]any{d.Pins, d.Hides} {
		for _, row := range rows {
			id := fmt.Sprint(row["room_id"])
			if _, ok := d.Titles[id]; ok || lookups == maxTitleLookups {
				continue
			}
			lookups++
			var room struct {
				Title string `json:"title"`
			}
			if err := k.get("/admin/v1/rooms/"+url.PathEscape(id), nil, &room); err == nil && room.Title != "" {
				d.Titles[id] = room.Title
			}
		}
	}
}

// num is a JSON number of an answer as an int64; 0 when it is none.
func num(v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	i, _ := n.Int64()
	return i
}

// expiry reads the form's hours field as a time that many hours from
// now; 0 hours or none is 0 (for a hide: until removed).
func (c *Console) expiry(k *call, name string, def int64) (int64, error) {
	hours, err := formInt(k.r, name, def)
	if err != nil || hours == 0 {
		return 0, err
	}
	if hours < 0 || hours > 366*24 {
		return 0, invalid(name, "must be 1 to 8784 hours")
	}
	return c.now().Add(time.Duration(hours) * time.Hour).UnixMilli(), nil
}

func (c *Console) pin(k *call) (string, error) {
	region, err := formInt(k.r, "visible_region_id", 0)
	if err != nil {
		return "", err
	}
	weight, err := formInt(k.r, "weight", 0)
	if err != nil {
		return "", err
	}
	expires, err := c.expiry(k, "hours", 24)
	if err != nil {
		return "", err
	}
	room := formText(k.r, "room_id")
	body := map[string]any{"room_id": room, "visible_region_id": region, "weight": weight, "expires_at_ms": expires}
	if reason := formText(k.r, "reason"); reason != "" {
		body["reason"] = reason
	}
	if err := k.send(http.MethodPost, "/admin/v1/pins", body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Room %s pinned in region %d; the list shows it within seconds.", room, region), nil
}

func (c *Console) unpin(k *call) (string, error) {
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", err
	}
	if err := k.send(http.MethodDelete, fmt.Sprintf("/admin/v1/pins/%d", id), optionalReason(k), nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Pin %d removed.", id), nil
}

func (c *Console) hide(k *call) (string, error) {
	region, err := formInt(k.r, "visible_region_id", 0)
	if err != nil {
		return "", err
	}
	expires, err := c.expiry(k, "hours", 0)
	if err != nil {
		return "", err
	}
	room := formText(k.r, "room_id")
	body := map[string]any{"room_id": room, "visible_region_id": region, "reason": formText(k.r, "reason")}
	if expires > 0 {
		body["expires_at_ms"] = expires
	}
	if err := k.send(http.MethodPost, "/admin/v1/hides", body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Room %s hidden in region %d.", room, region), nil
}

func (c *Console) unhide(k *call) (string, error) {
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", err
	}
	if err := k.send(http.MethodDelete, fmt.Sprintf("/admin/v1/hides/%d", id), optionalReason(k), nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Hide %d removed.", id), nil
}

// optionalReason is the body of an unpin or unhide: the form's reason
// when it gives one.
func optionalReason(k *call) any {
	if r := formText(k.r, "reason"); r != "" {
		return map[string]any{"reason": r}
	}
	return nil
}
