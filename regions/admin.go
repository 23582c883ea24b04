package regions

import (
	"context"
	"database/sql"
	"strings"

	"voiceroom/apperr"
)

// Operators' control of an app's regions and countries (docs/openapi.yaml,
// tag admin regions). None of these moves a user: users keep their region_id until a
// rebuild (Rebuild) recomputes it, and rooms keep their visible_region_id
// always.

// CreateRegion creates an active region. code is trimmed and upper-cased. A
// code the app already has is ALREADY_EXISTS naming "region_code"; bad input
// is INVALID_ARGUMENT naming its field; an app at MaxRegionsPerApp is
// FAILED_PRECONDITION.
func (s *Service) CreateRegion(ctx context.Context, appCode, code, name string) (Region, error) {
	if err := validAppCode(appCode); err != nil {
		return Region{}, err
	}
	code = normalizeRegionCode(code)
	if err := checkRegionCode(code); err != nil {
		return Region{}, err
	}
	name = strings.TrimSpace(name)
	if err := checkText("name", name, NameMax); err != nil {
		return Region{}, err
	}
	var out Region
	err := s.update(ctx, "create region", func(tx *sql.Tx) error {
		nowMs := s.nowMs()
		var n int
		// The locking count serialises region creation per app, so the bound
		// holds under concurrent creates.
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM regions WHERE app_code = ? FOR UPDATE", appCode).Scan(&n); err != nil {
			return unavailable("count regions", err)
		}
		if n >= MaxRegionsPerApp {
			return apperr.New(apperr.FailedPrecondition, "the app has the maximum of %d regions", MaxRegionsPerApp)
		}
		res, err := tx.ExecContext(ctx, `
			INSERT INTO regions (app_code, region_code, name, status, created_at_ms, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?)`, appCode, code, name, StatusActive, nowMs, nowMs)
		if isDuplicateKey(err, "uk_regions_code") {
			return alreadyExists("region_code", code+" exists")
		}
		if err != nil {
			return unavailable("insert region", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return unavailable("insert region", err)
		}
		out = Region{ID: id, Code: code, Name: name, Status: StatusActive, CreatedAtMs: nowMs, UpdatedAtMs: nowMs}
		return nil
	})
	return out, err
}

// UpdateRegion enables, disables or renames a region. Disabling it does not
// move its users: run Rebuild, which gives them GLOBAL (or their pinned or
// country's region). A region of another app is ErrRegionNotFound.
func (s *Service) UpdateRegion(ctx context.Context, appCode string, regionID int64, patch RegionPatch) (Region, error) {
	if err := validAppCode(appCode); err != nil {
		return Region{}, err
	}
	if regionID <= 0 {
		return Region{}, ErrRegionNotFound
	}
	if patch.Status == nil && patch.Name == nil {
		return Region{}, apperr.New(apperr.InvalidArgument, "nothing to change: give status or name")
	}
	if patch.Status != nil && !patch.Status.Valid() {
		return Region{}, apperr.Invalid("status", "must be active or disabled")
	}
	var name string
	if patch.Name != nil {
		name = strings.TrimSpace(*patch.Name)
		if err := checkText("name", name, NameMax); err != nil {
			return Region{}, err
		}
	}
	var out Region
	err := s.update(ctx, "update region", func(tx *sql.Tx) error {
		r, err := readRegion(ctx, tx, appCode, regionID, true)
		if err != nil {
			return err
		}
		if patch.Status != nil {
			r.Status = *patch.Status
		}
		if patch.Name != nil {
			r.Name = name
		}
		r.UpdatedAtMs = s.nowMs()
		if _, err := tx.ExecContext(ctx,
			"UPDATE regions SET status = ?, name = ?, updated_at_ms = ? WHERE app_code = ? AND region_id = ?",
			r.Status, r.Name, r.UpdatedAtMs, appCode, regionID); err != nil {
			return unavailable("update region", err)
		}
		out = r
		return nil
	})
	return out, err
}

// ListRegions returns every region of the app with its countries, and the
// countries mapped to no region.
func (s *Service) ListRegions(ctx context.Context, appCode string) (RegionList, error) {
	if err := validAppCode(appCode); err != nil {
		return RegionList{}, err
	}
	regions, err := readRegions(ctx, s.db, appCode)
	if err != nil {
		return RegionList{}, err
	}
	countries, err := readCountries(ctx, s.db, appCode)
	if err != nil {
		return RegionList{}, err
	}
	out := RegionList{Regions: make([]RegionWithCountries, len(regions)), Unassigned: []Country{}}
	index := make(map[int64]int, len(regions))
	for i, r := range regions {
		out.Regions[i] = RegionWithCountries{Region: r, Countries: []Country{}}
		index[r.ID] = i
	}
	for _, c := range countries {
		if i, ok := index[c.RegionID]; ok {
			out.Regions[i].Countries = append(out.Regions[i].Countries, c)
		} else {
			out.Unassigned = append(out.Unassigned, c)
		}
	}
	return out, nil
}

// CreateCountry offers an ISO 3166-1 alpha-2 country to the app's users,
// enabled, in region regionID (0: none, its users get GLOBAL). An empty name
// takes the ISO English name. A code that is not assigned by ISO is
// INVALID_ARGUMENT naming "country_code"; one the app has is ALREADY_EXISTS;
// a region of another app is ErrRegionNotFound.
func (s *Service) CreateCountry(ctx context.Context, appCode, code, name string, regionID int64) (Country, error) {
	if err := validAppCode(appCode); err != nil {
		return Country{}, err
	}
	code = normalizeCountry(code)
	isoName, ok := ISOName(code)
	if !ok {
		return Country{}, apperr.Invalid("country_code", "must be an ISO 3166-1 alpha-2 code")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = isoName
	}
	if err := checkText("name", name, NameMax); err != nil {
		return Country{}, err
	}
	if err := checkRegionID(regionID); err != nil {
		return Country{}, err
	}
	var out Country
	err := s.update(ctx, "create country", func(tx *sql.Tx) error {
		nowMs := s.nowMs()
		if regionID != 0 {
			if _, err := lockRegion(ctx, tx, appCode, regionID); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO countries (app_code, country_code, name, enabled, region_id, created_at_ms, updated_at_ms)
			VALUES (?, ?, ?, TRUE, ?, ?, ?)`, appCode, code, name, regionID, nowMs, nowMs)
		if isDuplicateKey(err, "PRIMARY") {
			return alreadyExists("country_code", code+" exists")
		}
		if err != nil {
			return unavailable("insert country", err)
		}
		out = Country{Code: code, Name: name, Enabled: true, RegionID: regionID, CreatedAtMs: nowMs, UpdatedAtMs: nowMs}
		return nil
	})
	return out, err
}

// UpdateCountry enables, disables, renames or moves a country to another
// region (0: none). Users keep their region until Rebuild; a user may not
// pick a disabled country from now on. A country or region of another app is
// NOT_FOUND.
func (s *Service) UpdateCountry(ctx context.Context, appCode, code string, patch CountryPatch) (Country, error) {
	if err := validAppCode(appCode); err != nil {
		return Country{}, err
	}
	code = normalizeCountry(code)
	if !validCountry(code) {
		return Country{}, ErrCountryNotFound
	}
	if patch.Enabled == nil && patch.RegionID == nil && patch.Name == nil {
		return Country{}, apperr.New(apperr.InvalidArgument, "nothing to change: give enabled, region_id or name")
	}
	if patch.RegionID != nil {
		if err := checkRegionID(*patch.RegionID); err != nil {
			return Country{}, err
		}
	}
	var name string
	if patch.Name != nil {
		name = strings.TrimSpace(*patch.Name)
		if err := checkText("name", name, NameMax); err != nil {
			return Country{}, err
		}
	}
	var out Country
	err := s.update(ctx, "update country", func(tx *sql.Tx) error {
		if patch.RegionID != nil && *patch.RegionID != 0 {
			if _, err := lockRegion(ctx, tx, appCode, *patch.RegionID); err != nil {
				return err
			}
		}
		c, err := readCountry(ctx, tx, appCode, code, true)
		if err != nil {
			return err
		}
		if patch.Enabled != nil {
			c.Enabled = *patch.Enabled
		}
		if patch.RegionID != nil {
			c.RegionID = *patch.RegionID
		}
		if patch.Name != nil {
			c.Name = name
		}
		c.UpdatedAtMs = s.nowMs()
		if _, err := tx.ExecContext(ctx,
			"UPDATE countries SET enabled = ?, region_id = ?, name = ?, updated_at_ms = ? WHERE app_code = ? AND country_code = ?",
			c.Enabled, c.RegionID, c.Name, c.UpdatedAtMs, appCode, code); err != nil {
			return unavailable("update country", err)
		}
		out = c
		return nil
	})
	return out, err
}
