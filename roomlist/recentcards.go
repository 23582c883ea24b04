package roomlist

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"voiceroom/listprojector"
)

// recentCards keeps the cards the list read from MySQL while Redis is not
// read, each for at most ttl (FreezeEvery) after its read: the pages of a
// frozen order that many callers walk (deep pages included) then read
// MySQL once per room per ttl, not once per request: how old a card shown
// without Redis may be (see Lister.List). Hides never come from here. At
// most max cards are held; when full, it starts over.
type recentCards struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[cardRef]nearEntry[*listprojector.Card]
}

func newRecentCards(ttl time.Duration, max int) *recentCards {
	return &recentCards{ttl: ttl, max: max, m: map[cardRef]nearEntry[*listprojector.Card]{}}
}

// cards returns app's cards ids, read from MySQL at most ttl before now:
// the ones held, the others read now (and held). A room MySQL does not
// list has no card.
func (r *recentCards) cards(ctx context.Context, db *sql.DB, app string, ids []string, now time.Time) (map[string]*listprojector.Card, error) {
	out := make(map[string]*listprojector.Card, len(ids))
	var missing []string
	r.mu.Lock()
	for _, id := range ids {
		if e, ok := r.m[cardRef{app, id}]; ok && now.Sub(e.at) < r.ttl {
			out[id] = e.v
		} else {
			missing = append(missing, id)
		}
	}
	r.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	read, err := readCards(ctx, db, app, missing)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.m)+len(read) > r.max {
		clear(r.m)
	}
	for id, c := range read {
		out[id] = c
		r.m[cardRef{app, id}] = nearEntry[*listprojector.Card]{v: c, at: now}
	}
	r.mu.Unlock()
	return out, nil
}
