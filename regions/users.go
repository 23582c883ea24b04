package regions

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"voiceroom/apperr"
)

// auditLimit is how many audit rows UserRegionInfo returns.
const auditLimit = 50

// Profile returns a user's profile (GET /api/v1/users/me). A user without
// one is ErrUserNotFound.
//
// It is answered from the in-process cache that UserRegion fills, so that
// a profile read costs MySQL nothing on a hit: a change made through this
// process (PutProfile, an operator's) is seen by its next read, one made
// through another process within CacheTTL (see the package documentation).
func (s *Service) Profile(ctx context.Context, appCode string, userID int64) (Profile, error) {
	return s.profile(ctx, appCode, userID)
}

// PutProfile registers a user or changes their display_user_id or country
// (PUT /api/v1/users/me), and returns the profile.
//
// The region is computed here, never taken from the client: an enabled
// country whose region is active gives that region; an enabled country with
// no region or a disabled one gives GLOBAL (0), and so does no country. A
// country the app does not offer, or has disabled, is INVALID_ARGUMENT
// naming "country". A region an operator set (SourceAdmin) is kept (a
// rebuild drops it once its region is disabled). Sending the stored country
// again recomputes nothing: a user's region moves only on the change sources
// (a country change, a rebuild, an operator). A display_user_id another user
// of the app has is ALREADY_EXISTS. Nothing changed writes nothing.
func (s *Service) PutProfile(ctx context.Context, appCode string, userID int64, upd ProfileUpdate) (Profile, error) {
	if err := validAppCode(appCode); err != nil {
		return Profile{}, err
	}
	if err := validUserID("user_id", userID); err != nil {
		return Profile{}, err
	}
	var display, country string
	if upd.DisplayUserID != nil {
		display = strings.TrimSpace(*upd.DisplayUserID)
		if err := checkDisplayUserID(display); err != nil {
			return Profile{}, err
		}
	}
	if upd.Country != nil {
		country = normalizeCountry(*upd.Country)
		if err := checkCountry(country, true); err != nil {
			return Profile{}, err
		}
	}

	// A registration must not lock the absent row first: SELECT ... FOR
	// UPDATE of a missing key takes a gap lock, and concurrent registrations
	// holding gap locks then deadlock on each other's inserts (seen as
	// storms of 1213 at 64 concurrent sign-ups). So the common path locks
	// the existing row; when there is none, a second transaction inserts
	// without a prior lock, and a duplicate key there means a concurrent
	// registration won: the common path runs again.
	var out Profile
	var err error
	register := false
	for attempt := 0; attempt < 4; attempt++ {
		err = s.update(ctx, "put profile", func(tx *sql.Tx) error {
			var err error
			out, err = s.putProfileTx(ctx, tx, appCode, userID, upd, display, country, register)
			return err
		})
		switch {
		case errors.Is(err, errNoProfile):
			register = true
			continue
		case errors.Is(err, errRegisteredMeanwhile):
			register = false
			continue
		}
		break
	}
	if err != nil {
		return Profile{}, err
	}
	// Invalidate even when the region is unchanged: the display id may have
	// changed, and the cache holds it too.
	s.invalidate(appCode, userID)
	return out, nil
}

// putProfileTx is one attempt of PutProfile. With register false it locks and
// updates an existing user (errNoProfile when there is none); with register
// true it inserts one (errRegisteredMeanwhile when the user id exists).
func (s *Service) putProfileTx(ctx context.Context, tx *sql.Tx, appCode string, userID int64, upd ProfileUpdate, display, country string, register bool) (Profile, error) {
	nowMs := s.nowMs()
	q := s.stmts.on(tx)
	// The mapping is read (and share-locked) before the user row: the
	// locking order of store_mysql.go.
	var m countryMapping
	if upd.Country != nil && country != "" {
		var err error
		if m, err = lockCountryMapping(ctx, q, appCode, country); err != nil {
			return Profile{}, err
		}
	}
	if s.afterMappingRead != nil {
		s.afterMappingRead()
	}
	var old userRow
	if register {
		if upd.DisplayUserID == nil {
			return Profile{}, apperr.Invalid("display_user_id", "is required to register")
		}
		old = userRow{userID: userID, source: SourceCountry}
	} else {
		var exists bool
		var err error
		if old, exists, err = lockUser(ctx, q, appCode, userID); err != nil {
			return Profile{}, err
		}
		if !exists {
			return Profile{}, errNoProfile
		}
	}
	next := old
	if upd.DisplayUserID != nil {
		next.display = display
	}
	regionCode := ""
	if upd.Country != nil && (register || country != old.country) {
		if country != "" {
			if !m.found {
				return Profile{}, apperr.Invalid("country", "%s is not offered", country)
			}
			if !m.enabled {
				return Profile{}, apperr.Invalid("country", "%s is disabled", country)
			}
		}
		next.country = country
		if next.source != SourceAdmin {
			next.regionID, regionCode = m.region()
		}
	}
	if !register && next == old {
		// Nothing changed: no write, no new updated_at.
		p, _, err := readProfile(ctx, q, appCode, userID)
		return p, err
	}
	if regionCode == "" {
		var err error
		if regionCode, err = regionCodeOf(ctx, q, appCode, next.regionID); err != nil {
			return Profile{}, err
		}
	}
	out := Profile{UserID: userID, DisplayUserID: next.display, Country: next.country,
		RegionID: next.regionID, RegionCode: regionCode, UpdatedAtMs: nowMs}
	if register {
		err := insertUser(ctx, q, appCode, next, nowMs)
		if isDuplicateKey(err, "PRIMARY") {
			return Profile{}, errRegisteredMeanwhile
		}
		return out, err
	}
	if err := updateUser(ctx, q, appCode, next, nowMs); err != nil {
		return Profile{}, err
	}
	if next.regionID == old.regionID {
		return out, nil
	}
	return out, insertAudit(ctx, q, appCode, []auditRow{{
		userID: userID, oldRegionID: old.regionID, newRegionID: next.regionID,
		source: AuditUser, operator: "user:" + strconv.FormatInt(userID, 10),
		reason: "country changed from " + countryOrNone(old.country) + " to " + countryOrNone(next.country),
	}}, nowMs)
}

func countryOrNone(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

// SetUserRegion sets a user's region directly (PUT
// /admin/v1/users/:user_id/region, e.g. a BD leader) and writes an audit row
// with operator and reason, even when the region stays the same. The region
// is pinned (SourceAdmin): rebuilds and country changes keep it while it is
// active. regionID 0 pins GLOBAL. A user or region of another app is
// NOT_FOUND; a disabled region is INVALID_ARGUMENT naming "region_id".
func (s *Service) SetUserRegion(ctx context.Context, appCode string, userID, regionID int64, operator, reason string) (Profile, error) {
	if err := checkRegionID(regionID); err != nil {
		return Profile{}, err
	}
	return s.operatorChange(ctx, "set user region", appCode, userID, operator, reason, func(tx *sql.Tx) (userRow, int64, string, string, error) {
		code := GlobalRegionCode
		if regionID != 0 {
			r, err := lockRegion(ctx, tx, appCode, regionID)
			if err != nil {
				return userRow{}, 0, "", "", err
			}
			if err := activeRegion(r); err != nil {
				return userRow{}, 0, "", "", err
			}
			code = r.Code
		}
		u, exists, err := lockUser(ctx, tx, appCode, userID)
		if err != nil {
			return userRow{}, 0, "", "", err
		}
		if !exists {
			return userRow{}, 0, "", "", ErrUserNotFound
		}
		return u, regionID, code, SourceAdmin, nil
	})
}

// ClearUserRegion removes an operator's region pin (DELETE
// /admin/v1/users/:user_id/region): the user's region is computed from their
// country again, now, and the action is audited like SetUserRegion.
func (s *Service) ClearUserRegion(ctx context.Context, appCode string, userID int64, operator, reason string) (Profile, error) {
	return s.operatorChange(ctx, "clear user region", appCode, userID, operator, reason, func(tx *sql.Tx) (userRow, int64, string, string, error) {
		// Keep the locking order (mapping, then user): learn the country
		// without a lock, lock its mapping, then lock the user. A country
		// that changed in between is read again under the user's lock; that
		// rare path may deadlock, and the transaction is then retried.
		cur, _, err := readProfile(ctx, tx, appCode, userID)
		if err != nil {
			return userRow{}, 0, "", "", err
		}
		var m countryMapping
		if cur.Country != "" {
			if m, err = lockCountryMapping(ctx, tx, appCode, cur.Country); err != nil {
				return userRow{}, 0, "", "", err
			}
		}
		u, exists, err := lockUser(ctx, tx, appCode, userID)
		if err != nil {
			return userRow{}, 0, "", "", err
		}
		if !exists {
			return userRow{}, 0, "", "", ErrUserNotFound
		}
		if u.country != cur.Country {
			m = countryMapping{}
			if u.country != "" {
				if m, err = lockCountryMapping(ctx, tx, appCode, u.country); err != nil {
					return userRow{}, 0, "", "", err
				}
			}
		}
		region, code := m.region()
		return u, region, code, SourceCountry, nil
	})
}

// operatorChange is an operator's change of one user's region: it checks
// the inputs, then in one transaction lets decide lock what it needs and
// name the user's new region (and the source to record), writes the user
// row and an audit row with operator and reason, and after the commit drops
// the user from this process's cache.
func (s *Service) operatorChange(ctx context.Context, op, appCode string, userID int64, operator, reason string,
	decide func(tx *sql.Tx) (u userRow, regionID int64, code, source string, err error)) (Profile, error) {
	if err := validAppCode(appCode); err != nil {
		return Profile{}, err
	}
	if err := validUserID("user_id", userID); err != nil {
		return Profile{}, err
	}
	reason = strings.TrimSpace(reason)
	if err := checkText("reason", reason, ReasonMax); err != nil {
		return Profile{}, err
	}
	if err := checkText("operator", operator, 64); err != nil {
		return Profile{}, err
	}
	var out Profile
	err := s.update(ctx, op, func(tx *sql.Tx) error {
		nowMs := s.nowMs()
		u, regionID, code, source, err := decide(tx)
		if err != nil {
			return err
		}
		if err := setUserRegion(ctx, tx, appCode, userID, regionID, source, nowMs); err != nil {
			return err
		}
		out = Profile{UserID: userID, DisplayUserID: u.display, Country: u.country, RegionID: regionID, RegionCode: code, UpdatedAtMs: nowMs}
		return insertAudit(ctx, tx, appCode, []auditRow{{
			userID: userID, oldRegionID: u.regionID, newRegionID: regionID,
			source: AuditAdmin, operator: operator, reason: reason,
		}}, nowMs)
	})
	if err != nil {
		return Profile{}, err
	}
	s.invalidate(appCode, userID)
	return out, nil
}

// UserRegionInfo returns the operators' view of a user's region: profile,
// source and the latest audit rows.
func (s *Service) UserRegionInfo(ctx context.Context, appCode string, userID int64) (UserRegionInfo, error) {
	if err := validAppCode(appCode); err != nil {
		return UserRegionInfo{}, err
	}
	if err := validUserID("user_id", userID); err != nil {
		return UserRegionInfo{}, err
	}
	p, source, err := readProfile(ctx, s.db, appCode, userID)
	if err != nil {
		return UserRegionInfo{}, err
	}
	audit, err := readAudit(ctx, s.db, appCode, userID, auditLimit)
	if err != nil {
		return UserRegionInfo{}, err
	}
	return UserRegionInfo{Profile: p, RegionSource: source, Audit: audit}, nil
}
