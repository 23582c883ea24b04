package regions

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"voiceroom"
	"voiceroom/apperr"
)

// Limits on what clients and operators send. They follow the column sizes of
// the migrations, and are stricter where a value ends up in URLs, searches or
// logs.
const (
	// DisplayUserIDMin and DisplayUserIDMax bound a display_user_id. It
	// becomes a room's room_short_id (searched, shared in links), so only
	// ASCII letters, digits and '_' are allowed. Uniqueness per app is
	// case-insensitive (the column's collation): "Ana" and "ana" collide.
	DisplayUserIDMin = 3
	DisplayUserIDMax = 20
	// NameMax bounds region and country names, in characters.
	NameMax = 64
	// RegionCodeMax bounds a region_code: 2..16 of [A-Z0-9_], a letter first.
	RegionCodeMax = 16
	// ReasonMax bounds the reason of an audited operator action, in characters.
	ReasonMax = 255
	// MaxRegionsPerApp bounds how many regions an app may create, so that
	// listing them stays one small response.
	MaxRegionsPerApp = 200
)

// GlobalRegionCode is the code of region_id 0, the fallback list bucket. It is
// never stored, and no region may take it.
const GlobalRegionCode = "GLOBAL"

func validAppCode(app string) error {
	if !voiceroom.ValidAppCode(app) {
		return apperr.Invalid("app_code", "want %s", voiceroom.AppCodeRule)
	}
	return nil
}

func validUserID(field string, id int64) error {
	if id <= 0 {
		return apperr.Invalid(field, "must be a positive integer")
	}
	return nil
}

func checkDisplayUserID(s string) error {
	if len(s) < DisplayUserIDMin || len(s) > DisplayUserIDMax {
		return apperr.Invalid("display_user_id", "must be %d to %d characters", DisplayUserIDMin, DisplayUserIDMax)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return apperr.Invalid("display_user_id", "may hold only letters A-Z a-z, digits and '_'")
		}
	}
	return nil
}

// normalizeRegionCode trims and upper-cases a region code; checkRegionCode
// then validates it.
func normalizeRegionCode(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

func checkRegionCode(s string) error {
	if len(s) < 2 || len(s) > RegionCodeMax {
		return apperr.Invalid("region_code", "must be 2 to %d characters", RegionCodeMax)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return apperr.Invalid("region_code", "must be a letter followed by letters, digits or '_'")
		}
	}
	if s == GlobalRegionCode {
		return apperr.Invalid("region_code", "%s is reserved for region_id 0", GlobalRegionCode)
	}
	return nil
}

// checkText validates a trimmed free-text value (a name, a reason): valid
// UTF-8, 1..max characters, no control characters (they break logs and
// admin screens).
func checkText(field, s string, max int) error {
	if s == "" {
		return apperr.Invalid(field, "is required")
	}
	if !utf8.ValidString(s) {
		return apperr.Invalid(field, "must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > max {
		return apperr.Invalid(field, "must be at most %d characters", max)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return apperr.Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// checkCountry validates a normalized country code as a client may send it;
// "" (no country) is allowed when allowEmpty.
func checkCountry(code string, allowEmpty bool) error {
	if code == "" && allowEmpty {
		return nil
	}
	if !validCountry(code) {
		return apperr.Invalid("country", "must be an ISO 3166-1 alpha-2 code")
	}
	return nil
}

func checkRegionID(id int64) error {
	if id < 0 {
		return apperr.Invalid("region_id", "must be 0 (GLOBAL) or a region id")
	}
	return nil
}
