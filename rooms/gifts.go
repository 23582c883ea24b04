package rooms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"voiceroom/apperr"
)

// Gift is a catalog entry: what a gift costs in coins and the heat it adds.
type Gift struct {
	GiftID  int64  `json:"gift_id"`
	Name    string `json:"name"`
	Price   int64  `json:"price"`
	Heat    int64  `json:"heat"`
	Enabled bool   `json:"enabled"`
}

// Bounds of catalog entries.
const (
	maxGiftName  = 64
	maxGiftPrice = 100_000_000
	maxGiftHeat  = 100_000_000
)

// Validate checks a catalog entry.
func (g Gift) Validate() error {
	switch n := utf8.RuneCountInString(strings.TrimSpace(g.Name)); {
	case g.GiftID <= 0:
		return apperr.Invalid("gift_id", "must be a positive number")
	case n == 0 || n > maxGiftName:
		return apperr.Invalid("name", "must be 1..%d characters", maxGiftName)
	case g.Price < 0 || g.Price > maxGiftPrice:
		return apperr.Invalid("price", "must be 0..%d", maxGiftPrice)
	case g.Heat < 0 || g.Heat > maxGiftHeat:
		return apperr.Invalid("heat", "must be 0..%d", maxGiftHeat)
	}
	return nil
}

// giftCatalog reads gifts from MySQL through a short-lived cache, so a gift
// costs no query in the common case and a catalog change shows within
// giftCacheTTL on every process.
type giftCatalog struct {
	db  *sql.DB
	now func() time.Time

	mu    sync.Mutex
	cache map[giftKey]cachedGift
}

type giftKey struct {
	app string
	id  int64
}

type cachedGift struct {
	gift    Gift
	found   bool
	expires time.Time
}

const (
	giftCacheTTL  = 10 * time.Second
	giftCacheSize = 10000
)

// get returns an enabled gift or an INVALID_ARGUMENT naming gift_id.
func (g *giftCatalog) get(ctx context.Context, appCode string, giftID int64) (Gift, error) {
	key := giftKey{appCode, giftID}
	now := g.now()
	g.mu.Lock()
	c, ok := g.cache[key]
	g.mu.Unlock()
	if !ok || now.After(c.expires) {
		c = cachedGift{expires: now.Add(giftCacheTTL)}
		err := g.db.QueryRowContext(ctx, `SELECT gift_id, name, price, heat, enabled FROM gifts WHERE app_code = ? AND gift_id = ?`,
			appCode, giftID).Scan(&c.gift.GiftID, &c.gift.Name, &c.gift.Price, &c.gift.Heat, &c.gift.Enabled)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return Gift{}, apperr.Wrap(apperr.Unavailable, "gift catalog unavailable", fmt.Errorf("read gift %d: %w", giftID, err))
		default:
			c.found = true
		}
		g.mu.Lock()
		if len(g.cache) >= giftCacheSize {
			clear(g.cache) // crude but bounded; the catalog is small
		}
		g.cache[key] = c
		g.mu.Unlock()
	}
	if !c.found || !c.gift.Enabled {
		return Gift{}, apperr.Invalid("gift_id", "no such gift")
	}
	return c.gift, nil
}

// upsert creates or updates a gift and drops it from this process's cache.
func (g *giftCatalog) upsert(ctx context.Context, appCode string, gift Gift) error {
	if err := gift.Validate(); err != nil {
		return err
	}
	now := g.now().UnixMilli()
	_, err := g.db.ExecContext(ctx, `INSERT INTO gifts (app_code, gift_id, name, price, heat, enabled, created_at_ms, updated_at_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE name = VALUES(name), price = VALUES(price),
		heat = VALUES(heat), enabled = VALUES(enabled), updated_at_ms = VALUES(updated_at_ms)`,
		appCode, gift.GiftID, strings.TrimSpace(gift.Name), gift.Price, gift.Heat, gift.Enabled, now, now)
	if err != nil {
		return apperr.Wrap(apperr.Unavailable, "gift catalog unavailable", fmt.Errorf("write gift %d: %w", gift.GiftID, err))
	}
	g.mu.Lock()
	delete(g.cache, giftKey{appCode, gift.GiftID})
	g.mu.Unlock()
	return nil
}
