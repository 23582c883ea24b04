package rooms

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"voiceroom/apperr"
)

// Ownership tells a Service which rooms it may serve: on several nodes a
// room belongs to one partition, and a node serves a partition only while
// it holds that partition's lease (package roomcluster). Without one (nil,
// the single-process default) the service serves every room.
type Ownership interface {
	// Serving reports whether this node may serve key's room now, and
	// the epoch (the lease's revision) under which it does. It is called
	// before and after every command, so it must be cheap (no I/O).
	Serving(key RoomKey) (epoch uint64, ok bool)
	// Fenced reports that a write of key's room failed on the command
	// log's key: another writer took the room's next version, so this
	// node may have lost the partition. It must return quickly.
	Fenced(key RoomKey)
}

// RoomKey is a room's identity, app_code and room_id.
type RoomKey = roomKey

// ErrNotServing is a command or live read of a room whose partition this
// node does not serve (never held, handed over, or its lease is about to
// lapse): nothing was done, and the caller may send it to the owner.
var ErrNotServing = apperr.New(apperr.Unavailable, "this node does not serve the room's partition, try again")

// IsNotServing reports whether err is ErrNotServing: the command was not
// run, so sending it elsewhere cannot apply it twice.
func IsNotServing(err error) bool { return errors.Is(err, ErrNotServing) }

// SetOwnership makes the service serve only the rooms o says it may. Call
// it before the first command.
func (s *Service) SetOwnership(o Ownership) { s.own = o }

// serving returns the epoch under which key's room is served, or
// ErrNotServing.
func (s *Service) serving(key roomKey) (uint64, error) {
	if s.own == nil {
		return 0, nil
	}
	epoch, ok := s.own.Serving(key)
	if !ok {
		return 0, ErrNotServing
	}
	return epoch, nil
}

// fenced drops nothing itself (the caller drops the cell) and tells the
// ownership that the room's log moved under this node.
func (s *Service) fenced(key roomKey) {
	if s.own != nil {
		s.own.Fenced(key)
	}
}

// Release waits for the commands in flight on the loaded rooms that match
// (each cell's token) and drops them from memory, for a partition this
// node stops serving. A room whose command does not finish within ctx is
// dropped all the same once its command returns: its cell is marked gone,
// and the command fails its post-commit ownership check. It returns how
// many cells it dropped.
func (s *Service) Release(ctx context.Context, match func(RoomKey) bool) int {
	s.mu.Lock()
	var cells []*cell
	for k, c := range s.cells {
		if match(k) {
			cells = append(cells, c)
		}
	}
	s.mu.Unlock()
	var work errgroup.Group
	work.SetLimit(16)
	for _, c := range cells {
		work.Go(func() error {
			if err := c.lock(ctx); err != nil {
				// Unlocked drop: the command in flight finds the cell gone.
				s.forget(c)
				return nil
			}
			s.drop(c)
			c.unlock()
			return nil
		})
	}
	_ = work.Wait()
	return len(cells)
}

// forget removes c from the service's maps without its token: the holder
// of the token finds c.gone unset but the cell no longer served (its
// partition's ownership check fails after commit).
func (s *Service) forget(c *cell) {
	s.mu.Lock()
	if s.cells[c.key] == c {
		delete(s.cells, c.key)
		s.unindexGroup(c.key)
	}
	s.mu.Unlock()
}

// Recover loads the rooms of partitions ps among n whose stored state
// lists users, so users who vanished while nobody served them are swept,
// on a partition's takeover. It lists them by the rooms rows' group_hash
// (whose remainder modulo n is a room's partition), from an index, and
// loads those that match. Each loaded room's users start a fresh presence
// window.
func (s *Service) Recover(ctx context.Context, n int, ps []int, match func(RoomKey) bool) {
	s.recoverRooms(ctx, func(ctx context.Context) ([][2]string, error) {
		return s.store.roomsOfPartitions(ctx, n, ps, s.cfg.RecoverLimit)
	}, match)
}

// Loaded returns how many rooms are in memory.
func (s *Service) Loaded() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cells)
}
