package rooms

import (
	"context"
	"sync"
	"time"

	"voiceroom/internal/every"
	"voiceroom/roomevent"
)

// Run is the rooms role's background work until ctx ends: first it loads the
// rooms whose stored state still lists users (so users who vanished while
// the process was down are swept too), then every SweepInterval it removes
// users whose heartbeats stopped (SweepStale through the pipeline, emitting
// RoomUserLeft with reason stale) and drops idle cells from memory.
//
// With an Ownership the recovery is the ownership's to start, partition by
// partition as they are taken (Recover), and the sweeper visits only the
// rooms this node serves.
func (s *Service) Run(ctx context.Context) error {
	if s.own == nil {
		s.recoverRooms(ctx, func(ctx context.Context) ([][2]string, error) {
			return s.store.roomsWithUsers(ctx, s.cfg.RecoverLimit)
		}, func(RoomKey) bool { return true })
	}
	every.Tick(ctx, s.cfg.SweepInterval, func() { s.sweep(ctx) })
	return nil
}

// recoverRooms loads the rooms list names that match and may hold users,
// four at a time.
func (s *Service) recoverRooms(ctx context.Context, list func(context.Context) ([][2]string, error), match func(RoomKey) bool) {
	all, err := list(ctx)
	if err != nil {
		s.log.Error("cannot list rooms to recover; their users are swept when the rooms are next used", "error", err)
		return
	}
	var keys [][2]string
	for _, k := range all {
		if match(roomKey{AppCode: k[0], RoomID: k[1]}) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	s.log.Info("recovering rooms with users", "rooms", len(keys))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, k := range keys {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
			defer cancel()
			if _, err := s.current(ctx, roomKey{AppCode: k[0], RoomID: k[1]}); err != nil {
				s.log.Warn("room not recovered", "app_code", k[0], "room_id", k[1], "error", err)
			}
		}()
	}
	wg.Wait()
}

// sweep visits every loaded cell once.
func (s *Service) sweep(ctx context.Context) {
	s.mu.Lock()
	cells := make([]*cell, 0, len(s.cells))
	for _, c := range s.cells {
		cells = append(cells, c)
	}
	s.mu.Unlock()
	for _, c := range cells {
		if ctx.Err() != nil {
			return
		}
		if _, err := s.serving(c.key); err != nil {
			continue // its partition is being handed over: Release drops it
		}
		s.sweepCell(ctx, c)
	}
}

// sweepCell removes c's stale users, or evicts c when it has been idle. Like
// a client's command, it gives up after CommandTimeout, so one stuck room
// does not hold up the sweep of the others.
func (s *Service) sweepCell(ctx context.Context, c *cell) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	now := s.now().UnixMilli()
	st := c.state.Load()
	if st == nil {
		return
	}
	if st.Status == roomevent.StatusActive && len(st.Online) > 0 {
		s.sweepStale(ctx, c, now)
		return
	}
	idleFor := time.Duration(now-c.lastUsedMs.Load()) * time.Millisecond
	if idleFor >= s.cfg.IdleEvict && (st.Status != roomevent.StatusActive || len(st.Online) == 0) {
		s.evict(ctx, c)
	}
}

// sweepStale removes c's users whose heartbeats stopped, all under one hold
// of the token, so a beat cannot slip between the check and the removal.
func (s *Service) sweepStale(ctx context.Context, c *cell, now int64) {
	if err := c.lock(ctx); err != nil {
		return
	}
	defer c.unlock()
	if c.gone {
		return
	}
	st := c.state.Load()
	var stale []int64
	cutoff := now - s.cfg.PresenceTTL.Milliseconds()
	for _, p := range st.Online {
		if c.lastSeen(p.UserID) <= cutoff {
			stale = append(stale, p.UserID)
		}
	}
	for id := range c.seen {
		if !st.isPresent(id) {
			delete(c.seen, id)
		}
	}
	if len(stale) == 0 {
		return
	}
	cmd := &Command{Kind: KindSweepStale, AppCode: c.key.AppCode, RoomID: c.key.RoomID, CommandID: NewCommandID(),
		Actor: Actor{Admin: true, Operator: "presence-sweeper"}, Args: Args{UserIDs: stale}}
	if _, err := s.execLocked(ctx, c, cmd); err != nil {
		s.log.Warn("presence sweep failed; retried next round", "app_code", c.key.AppCode, "room_id", c.key.RoomID, "error", err)
		return
	}
	s.metrics.swept.Add(float64(len(stale)))
	s.log.Info("swept stale users", "app_code", c.key.AppCode, "room_id", c.key.RoomID, "users", stale)
}

// evict writes c's snapshot if the stored one is behind, then drops c. A
// snapshot that cannot be written only makes the next load replay more.
func (s *Service) evict(ctx context.Context, c *cell) {
	if err := c.lock(ctx); err != nil {
		return
	}
	defer c.unlock()
	if c.gone {
		return
	}
	st := c.state.Load()
	if st.Version > c.snapshotVersion {
		if err := s.store.writeSnapshot(ctx, st, s.now().UnixMilli()); err != nil {
			s.log.Warn("snapshot at eviction failed", "room_id", st.RoomID, "error", err)
		}
	}
	s.drop(c)
	s.metrics.evictions.Inc()
}
