package regions

import (
	_ "embed"
	"strings"
)

// iso3166Tab is the list of officially assigned ISO 3166-1 alpha-2 codes with
// their English names (see the file's header for its source).
//
//go:embed iso3166-1.tab
var iso3166Tab string

// isoNames maps every assigned alpha-2 code to its English name. It is built
// once at start-up from the embedded list and only read afterwards.
var isoNames = parseISO3166(iso3166Tab)

func parseISO3166(tab string) map[string]string {
	names := make(map[string]string, 256)
	for line := range strings.Lines(tab) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		code, name, ok := strings.Cut(line, "\t")
		if !ok || len(code) != 2 {
			// The file is embedded and covered by a test; a bad line is a
			// build mistake, not a runtime condition.
			continue
		}
		names[code] = name
	}
	return names
}

// ISOName returns the English name of an ISO 3166-1 alpha-2 code (upper case)
// and whether the code is officially assigned.
func ISOName(code string) (string, bool) {
	name, ok := isoNames[code]
	return name, ok
}

// normalizeCountry trims and upper-cases a client's country code. It does not
// check it; validCountry does.
func normalizeCountry(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2 {
		return s // too long either way; leave it for the error message to reject
	}
	return strings.ToUpper(s)
}

// validCountry reports whether code is an officially assigned alpha-2 code.
func validCountry(code string) bool {
	_, ok := isoNames[code]
	return ok
}
