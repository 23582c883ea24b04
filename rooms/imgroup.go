package rooms

import "voiceroom/roomevent"

// IMGroupMember reports whether userID is present in the loaded room whose
// IM GroupId is groupID, and that room's app_code (found is false when no
// loaded room has that GroupId). Present means JoinRoom succeeded and the
// user has not left, been kicked or been swept since. A room that is not
// loaded has nobody present: the rooms role loads every room that lists
// users when it starts. It reads memory only (no I/O, no cell token), for
// the join-group callback.
func (s *Service) IMGroupMember(groupID string, userID int64) (appCode string, found, present bool) {
	s.mu.Lock()
	key, ok := s.groups[groupID]
	var c *cell
	if ok {
		c = s.cells[key]
	}
	s.mu.Unlock()
	if c == nil {
		return "", false, false
	}
	if _, err := s.serving(key); err != nil {
		return "", false, false
	}
	st := c.state.Load()
	if st == nil {
		return "", false, false
	}
	return key.AppCode, true, st.isPresent(userID)
}

// indexGroup and unindexGroup keep s.groups in step with s.cells; s.mu is
// held.
func (s *Service) indexGroup(key roomKey) {
	s.groups[roomevent.IMGroupID(key.AppCode, key.RoomID)] = key
}

func (s *Service) unindexGroup(key roomKey) {
	g := roomevent.IMGroupID(key.AppCode, key.RoomID)
	if s.groups[g] == key {
		delete(s.groups, g)
	}
}
