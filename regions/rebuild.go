package regions

import (
	"context"
	"database/sql"
)

// rebuiltRegion is the rebuild rule for one user under the current mapping:
//   - a region an operator set stays while it is GLOBAL or an active region;
//     once its region is disabled (or gone) the user goes back to the region
//     of their country;
//   - otherwise the region of the user's country: that of an enabled country
//     whose region is active, else GLOBAL. A country the app no longer offers
//     or has disabled gives GLOBAL too.
func rebuiltRegion(u userRow, m mappingSnapshot) (regionID int64, source string) {
	if u.source == SourceAdmin && (u.regionID == 0 || m.activeRegions[u.regionID]) {
		return u.regionID, SourceAdmin
	}
	region, _ := m.countries[u.country].region()
	return region, SourceCountry
}

// Rebuild recomputes the region of every user of the app from the current
// mapping (POST /admin/v1/users/region-rebuild), in batches of
// Config.RebuildBatch users, one transaction each, and reports how many users
// it read and how many it moved. Each move is audited (source "rebuild",
// with operator) and invalidated in this process's cache.
//
// It is idempotent: a second run over an unchanged mapping changes nothing.
// Each batch reads the mapping again under shared locks, so an operator's
// change that commits during a rebuild applies to the batches after it; run
// the rebuild again after any change. When ctx ends, the batches already
// committed stay, and running again finishes the job.
func (s *Service) Rebuild(ctx context.Context, appCode, operator string) (RebuildResult, error) {
	var res RebuildResult
	if err := validAppCode(appCode); err != nil {
		return res, err
	}
	if err := checkText("operator", operator, 64); err != nil {
		return res, err
	}
	var after int64
	for {
		var (
			scanned int
			last    int64
			moved   []int64
		)
		err := s.update(ctx, "rebuild regions", func(tx *sql.Tx) error {
			// Set only what a retried attempt recomputes.
			scanned, last, moved = 0, after, moved[:0]
			nowMs := s.nowMs()
			m, err := lockMappingSnapshot(ctx, tx, appCode)
			if err != nil {
				return err
			}
			users, err := lockUserBatch(ctx, tx, appCode, after, s.cfg.RebuildBatch)
			if err != nil {
				return err
			}
			scanned = len(users)
			var audit []auditRow
			for _, u := range users {
				region, source := rebuiltRegion(u, m)
				if region == u.regionID && source == u.source {
					continue
				}
				if err := setUserRegion(ctx, tx, appCode, u.userID, region, source, nowMs); err != nil {
					return err
				}
				if region != u.regionID {
					moved = append(moved, u.userID)
					audit = append(audit, auditRow{
						userID: u.userID, oldRegionID: u.regionID, newRegionID: region,
						source: AuditRebuild, operator: operator, reason: rebuildReason(u, source),
					})
				}
			}
			if len(users) > 0 {
				last = users[len(users)-1].userID
			}
			return insertAudit(ctx, tx, appCode, audit, nowMs)
		})
		if err != nil {
			return res, err
		}
		after = last
		s.invalidate(appCode, moved...)
		res.Scanned += scanned
		res.Changed += len(moved)
		if scanned < s.cfg.RebuildBatch {
			break
		}
	}
	s.log.Info("regions rebuilt", "app_code", appCode, "operator", operator, "scanned", res.Scanned, "changed", res.Changed)
	return res, nil
}

func rebuildReason(u userRow, newSource string) string {
	if u.source == SourceAdmin && newSource != SourceAdmin {
		return "pinned region disabled; country " + countryOrNone(u.country)
	}
	return "mapping of country " + countryOrNone(u.country)
}
