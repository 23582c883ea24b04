package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// deliveryPage: each sink's backlog (GET /admin/v1/sinks), the outbox of
// the app (GET /admin/v1/outbox) and one page of a sink's dead letters
// (GET /admin/v1/dlq), with the replay form.
func (c *Console) deliveryPage(k *call) error {
	k.v.Title, k.v.Section = "Delivery", "delivery"
	q := k.r.URL.Query()
	d := map[string]any{"Sink": q.Get("sink"), "After": q.Get("after")}
	k.v.Data = d
	var sinks struct {
		Sinks []map[string]any `json:"sinks"`
	}
	if err := k.get("/admin/v1/sinks", nil, &sinks); err != nil {
		return err
	}
	d["Sinks"] = sinks.Sinks
	if d["Sink"] == "" && len(sinks.Sinks) > 0 {
		d["Sink"] = fmt.Sprint(sinks.Sinks[0]["sink"])
	}
	var outbox map[string]any
	if err := k.get("/admin/v1/outbox", nil, &outbox); err != nil {
		return err
	}
	d["Outbox"] = outbox
	if d["Sink"] == "" {
		return nil
	}
	dq := url.Values{"sink": {d["Sink"].(string)}, "limit": {strconv.Itoa(c.cfg.PageSize)}}
	if a := d["After"].(string); a != "" {
		dq.Set("after", a)
	}
	var letters map[string]any
	err := k.get("/admin/v1/dlq", dq, &letters)
	d["Letters"] = letters
	return err
}

func confirmReplay(k *call) string {
	n := len(k.r.PostForm["seq"])
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("Replay %d dead letter(s) to sink %s? The sink handles each event again.", n, formText(k.r, "sink"))
}

// replay re-delivers the chosen letters to their sink alone.
func (c *Console) replay(k *call) (string, error) {
	var seqs []uint64
	for _, s := range k.r.PostForm["seq"] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return "", invalid("seqs", "must be letters' sequence numbers")
		}
		seqs = append(seqs, n)
	}
	if len(seqs) == 0 {
		return "", invalid("seqs", "choose the letters to replay")
	}
	var res struct {
		Replayed int `json:"replayed"`
		Skipped  int `json:"skipped"`
	}
	body := map[string]any{"sink": formText(k.r, "sink"), "seqs": seqs}
	if err := k.send(http.MethodPost, "/admin/v1/dlq/replay", body, &res); err != nil {
		return "", err
	}
	return fmt.Sprintf("Replayed %d letter(s), skipped %d.", res.Replayed, res.Skipped), nil
}
