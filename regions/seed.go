package regions

import (
	"context"
	"fmt"

	"voiceroom/apperr"
)

// SeedRegion is a region to create with the countries mapped to it.
type SeedRegion struct {
	Code, Name string
	Countries  []string
}

// SeedUser is a user to register.
type SeedUser struct {
	UserID        int64
	DisplayUserID string
	Country       string // "" for none
}

// SeedData is what Seed creates in an app.
type SeedData struct {
	Regions []SeedRegion
	// Unassigned countries are offered but mapped to no region: GLOBAL.
	Unassigned []string
	// Disabled countries are created disabled: users cannot pick them.
	Disabled []string
	Users    []SeedUser
}

// SeedReport counts what Seed created.
type SeedReport struct {
	Regions   int `json:"regions_created"`
	Countries int `json:"countries_created"`
	Users     int `json:"users_created"`
}

// DemoData is the development app of the demo (docs/api.md, "The demo app"): SEA, MENA, South Asia and
// Latin America, two countries with no region (GLOBAL), one disabled
// country, and a user in each case.
func DemoData() SeedData {
	return SeedData{
		Regions: []SeedRegion{
			{Code: "SEA", Name: "Southeast Asia", Countries: []string{"SG", "MY", "ID", "TH", "PH", "VN"}},
			{Code: "MENA", Name: "Middle East and North Africa", Countries: []string{"SA", "AE", "EG", "KW", "QA", "BH", "OM", "JO"}},
			{Code: "SAS", Name: "South Asia", Countries: []string{"IN", "PK", "BD", "LK", "NP"}},
			{Code: "LATAM", Name: "Latin America", Countries: []string{"BR", "MX", "AR", "CO", "CL", "PE"}},
		},
		Unassigned: []string{"US", "GB"},
		Disabled:   []string{"AQ"},
		Users: []SeedUser{
			{UserID: 1001, DisplayUserID: "demo_sg", Country: "SG"},
			{UserID: 1002, DisplayUserID: "demo_my", Country: "MY"},
			{UserID: 1003, DisplayUserID: "demo_sa", Country: "SA"},
			{UserID: 1004, DisplayUserID: "demo_in", Country: "IN"},
			{UserID: 1005, DisplayUserID: "demo_us", Country: "US"},
			{UserID: 1006, DisplayUserID: "demo_nocountry"},
		},
	}
}

// Seed creates in the app whatever of data is missing, through the same rules
// as the admin and user routes. It never changes what exists (an operator's
// later edits survive a re-run), so running it again is a no-op.
func (s *Service) Seed(ctx context.Context, appCode string, data SeedData) (SeedReport, error) {
	var rep SeedReport
	if err := validAppCode(appCode); err != nil {
		return rep, err
	}
	existing, err := readRegions(ctx, s.db, appCode)
	if err != nil {
		return rep, err
	}
	regionIDs := map[string]int64{}
	for _, r := range existing {
		regionIDs[r.Code] = r.ID
	}
	countries, err := readCountries(ctx, s.db, appCode)
	if err != nil {
		return rep, err
	}
	haveCountry := map[string]bool{}
	for _, c := range countries {
		haveCountry[c.Code] = true
	}
	addCountry := func(code string, regionID int64, enabled bool) error {
		if haveCountry[code] {
			return nil
		}
		if _, err := s.CreateCountry(ctx, appCode, code, "", regionID); err != nil && !apperr.Is(err, apperr.AlreadyExists) {
			return fmt.Errorf("seed country %s: %w", code, err)
		} else if err == nil {
			rep.Countries++
			if !enabled {
				if _, err := s.UpdateCountry(ctx, appCode, code, CountryPatch{Enabled: &enabled}); err != nil {
					return fmt.Errorf("seed country %s: %w", code, err)
				}
			}
		}
		haveCountry[code] = true
		return nil
	}

	for _, sr := range data.Regions {
		id, ok := regionIDs[sr.Code]
		if !ok {
			r, err := s.CreateRegion(ctx, appCode, sr.Code, sr.Name)
			if err != nil {
				return rep, fmt.Errorf("seed region %s: %w", sr.Code, err)
			}
			id = r.ID
			rep.Regions++
		}
		for _, c := range sr.Countries {
			if err := addCountry(c, id, true); err != nil {
				return rep, err
			}
		}
	}
	for _, c := range data.Unassigned {
		if err := addCountry(c, 0, true); err != nil {
			return rep, err
		}
	}
	for _, c := range data.Disabled {
		if err := addCountry(c, 0, false); err != nil {
			return rep, err
		}
	}
	for _, u := range data.Users {
		if _, err := s.Profile(ctx, appCode, u.UserID); err == nil {
			continue
		} else if !apperr.Is(err, apperr.NotFound) {
			return rep, fmt.Errorf("seed user %d: %w", u.UserID, err)
		}
		display, country := u.DisplayUserID, u.Country
		if _, err := s.PutProfile(ctx, appCode, u.UserID, ProfileUpdate{DisplayUserID: &display, Country: &country}); err != nil {
			return rep, fmt.Errorf("seed user %d: %w", u.UserID, err)
		}
		rep.Users++
	}
	return rep, nil
}
