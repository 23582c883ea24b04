package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"voiceroom/apperr"
)

// cell owns one loaded room. Its token serialises the room's commands: a
// command holds it from apply through commit to the swap of the state, so
// commands of one room apply one at a time and each sees the last committed
// state. Readers need no token: state is the last committed State, swapped
// whole and never changed in place.
//
// A cell has no goroutine of its own: an idle room costs only its state.
type cell struct {
	key   roomKey
	token chan struct{} // capacity 1: held while a command runs
	state atomic.Pointer[State]

	// Guarded by token:
	gone            bool            // evicted or fenced: get a new cell from the service
	snapshotVersion int64           // version of the stored snapshot
	seen            map[int64]int64 // user → when last heard from (ms): heartbeats are soft state
	loadedAtMs      int64

	lastUsedMs atomic.Int64
}

func newCell(key roomKey) *cell {
	return &cell{key: key, token: make(chan struct{}, 1)}
}

// lock takes the cell's token, or fails when ctx ends first.
func (c *cell) lock(ctx context.Context) error {
	select {
	case c.token <- struct{}{}:
		return nil
	case <-ctx.Done():
		return apperr.Wrap(apperr.Unavailable, "room busy, try again", ctx.Err())
	}
}

func (c *cell) unlock() { <-c.token }

// touch records that the actor of a presence command was heard from.
func (c *cell) touch(cmd *Command, nowMs int64) {
	c.lastUsedMs.Store(nowMs)
	switch cmd.Kind {
	case KindJoinRoom, KindHeartbeat:
		if c.seen == nil {
			c.seen = map[int64]int64{}
		}
		c.seen[cmd.Actor.UserID] = nowMs
	}
}

// committed swaps in the state a command committed.
func (c *cell) committed(next *State, wroteSnapshot bool, cmd *Command, nowMs int64) {
	c.state.Store(next)
	if wroteSnapshot {
		c.snapshotVersion = next.Version
	}
	c.lastUsedMs.Store(nowMs)
	if cmd.Kind == KindCreateRoom {
		c.loadedAtMs = nowMs
	}
}

// lastSeen returns when userID was last heard from: a heartbeat or join
// since the cell loaded, else the load itself (after a restart every present
// user gets one full TTL to beat again).
func (c *cell) lastSeen(userID int64) int64 {
	if t, ok := c.seen[userID]; ok {
		return t
	}
	return c.loadedAtMs
}

// loadedCell returns the room's cell if it is in memory.
func (s *Service) loadedCell(key roomKey) *cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cells[key]
}

// lockCell returns the room's cell with its token held, loading the room
// from storage first if needed. With create set, a room that does not exist
// yet gets an empty cell for CreateRoom to fill.
func (s *Service) lockCell(ctx context.Context, key roomKey, create bool) (*cell, error) {
	for {
		s.mu.Lock()
		c := s.cells[key]
		if c == nil {
			c = newCell(key)
			s.cells[key] = c
			s.indexGroup(key)
		}
		s.mu.Unlock()
		if err := c.lock(ctx); err != nil {
			return nil, err
		}
		if c.gone {
			c.unlock()
			continue
		}
		if _, err := s.serving(key); err != nil {
			// Handed over while this command waited for the token.
			if c.state.Load() == nil {
				s.drop(c)
			}
			c.unlock()
			return nil, err
		}
		if c.state.Load() != nil {
			return c, nil
		}
		err := s.load(ctx, c)
		if err == nil || (create && errors.Is(err, errRoomNotFound)) {
			return c, nil
		}
		s.drop(c)
		c.unlock()
		return nil, err
	}
}

// current returns the room's last committed state, loading it if needed.
func (s *Service) current(ctx context.Context, key roomKey) (*State, error) {
	if c := s.loadedCell(key); c != nil {
		if st := c.state.Load(); st != nil {
			return st, nil
		}
	}
	c, err := s.lockCell(ctx, key, false)
	if err != nil {
		return nil, err
	}
	defer c.unlock()
	return c.state.Load(), nil
}

// drop forgets a cell; the caller holds its token. The next command of the
// room loads a fresh one from storage.
func (s *Service) drop(c *cell) {
	c.gone = true
	s.mu.Lock()
	if s.cells[c.key] == c {
		delete(s.cells, c.key)
		s.unindexGroup(c.key)
	}
	s.mu.Unlock()
}

// load recovers a room into c (token held): the stored snapshot, then every
// logged command after it, applied exactly as the first time. Replay has no
// side effects: nothing is written, no event is published again (the outbox
// rows of those commands were committed with them).
func (s *Service) load(ctx context.Context, c *cell) error {
	sr, err := s.store.load(ctx, c.key.AppCode, c.key.RoomID)
	if errors.Is(err, errRoomNotFound) {
		return err
	}
	if err != nil {
		s.metrics.loads.WithLabelValues("error").Inc()
		return storageErr(err)
	}
	st, err := replay(sr)
	if err != nil {
		s.metrics.loads.WithLabelValues("corrupt").Inc()
		s.log.Error("room cannot be recovered", "app_code", c.key.AppCode, "room_id", c.key.RoomID, "error", err)
		return apperr.Wrap(apperr.Unavailable, "room cannot be loaded", err)
	}
	if s.fast != nil {
		// Events of the room another process committed and the relay has
		// not published yet must reach the stream before this node's.
		if err := s.store.rependInFlight(ctx, c.key.AppCode, c.key.RoomID, st.Version-pendingLookback); err != nil {
			s.log.Warn("in-flight outbox rows not set back to pending at load; the room's next events may overtake them in the stream",
				"app_code", c.key.AppCode, "room_id", c.key.RoomID, "error", err)
		}
		// Unread, the room's next events could overtake them: the load
		// fails instead (the command answers UNAVAILABLE, and the next
		// one loads again).
		id, err := s.store.newestPending(ctx, c.key.AppCode, c.key.RoomID, st.Version-pendingLookback)
		if err != nil {
			s.metrics.loads.WithLabelValues("error").Inc()
			s.log.Warn("pending outbox rows not read at load; the room is not loaded, so that its next events cannot overtake them in the stream",
				"app_code", c.key.AppCode, "room_id", c.key.RoomID, "error", err)
			return storageErr(err)
		}
		if id != "" {
			s.fast.Behind(c.key, id)
		}
	}
	now := s.now().UnixMilli()
	c.snapshotVersion = sr.snapshot.Version
	c.loadedAtMs = now
	c.seen = nil
	c.lastUsedMs.Store(now)
	c.state.Store(st)
	s.metrics.loads.WithLabelValues("ok").Inc()
	return nil
}

// pendingLookback bounds how far back (in room versions) a load looks for
// events still pending in the outbox: the relay publishes within seconds,
// so older pending rows mean a long outage, after which consumers order a
// room's events by room_version.
const pendingLookback = 100

// replay applies a stored room's command log to its snapshot.
func replay(sr *storedRoom) (*State, error) {
	st := sr.snapshot
	for _, lc := range sr.log {
		if lc.version != st.Version+1 {
			return nil, fmt.Errorf("command log jumps from version %d to %d", st.Version, lc.version)
		}
		cmd := lc.cmd
		next := st.Clone()
		_, changed, err := apply(next, &cmd, limits{}, true)
		if err != nil || !changed {
			return nil, fmt.Errorf("replay of version %d (%s) does not apply: changed=%v err=%v", lc.version, cmd.Kind, changed, err)
		}
		next.Version = lc.version
		next.UpdatedAtMs = cmd.NowMs
		st = next
	}
	return st, nil
}
