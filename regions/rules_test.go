package regions

import (
	"strings"
	"testing"

	"voiceroom/apperr"
)

func TestISOList(t *testing.T) {
	if len(isoNames) != 249 {
		t.Fatalf("%d codes in the embedded list, ISO 3166-1 assigns 249", len(isoNames))
	}
	tests := []struct {
		in   string
		want bool
	}{
		{"SG", true}, {"MY", true}, {"SA", true}, {"AE", true}, {"GB", true}, {"AQ", true}, {"ZW", true},
		{"sg", true}, {" my ", true}, // normalized
		{"UK", false}, {"EU", false}, {"XK", false}, {"ZZ", false}, {"AA", false},
		{"", false}, {"S", false}, {"SGP", false}, {"S1", false}, {"ßG", false},
	}
	for _, tt := range tests {
		if got := validCountry(normalizeCountry(tt.in)); got != tt.want {
			t.Errorf("validCountry(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if name, _ := ISOName("SG"); name != "Singapore" {
		t.Errorf("ISOName(SG) = %q", name)
	}
}

func TestInputRules(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantField string // "" = valid
	}{
		{"display ok", checkDisplayUserID("ana_88"), ""},
		{"display min", checkDisplayUserID("abc"), ""},
		{"display max", checkDisplayUserID(strings.Repeat("a", DisplayUserIDMax)), ""},
		{"display too short", checkDisplayUserID("ab"), "display_user_id"},
		{"display too long", checkDisplayUserID(strings.Repeat("a", DisplayUserIDMax+1)), "display_user_id"},
		{"display space", checkDisplayUserID("ana 88"), "display_user_id"},
		{"display dash", checkDisplayUserID("ana-88"), "display_user_id"},
		{"display non-ascii", checkDisplayUserID("anä88"), "display_user_id"},
		{"display emoji", checkDisplayUserID("ana😀"), "display_user_id"},
		{"display empty", checkDisplayUserID(""), "display_user_id"},

		{"code ok", checkRegionCode("SEA"), ""},
		{"code digits", checkRegionCode("EU_2"), ""},
		{"code max", checkRegionCode(strings.Repeat("A", RegionCodeMax)), ""},
		{"code too long", checkRegionCode(strings.Repeat("A", RegionCodeMax+1)), "region_code"},
		{"code too short", checkRegionCode("A"), "region_code"},
		{"code digit first", checkRegionCode("1SEA"), "region_code"},
		{"code lower", checkRegionCode("sea"), "region_code"}, // callers normalize first
		{"code dash", checkRegionCode("SE-A"), "region_code"},
		{"code reserved", checkRegionCode("GLOBAL"), "region_code"},

		{"name ok", checkText("name", "Middle East & North Africa", NameMax), ""},
		{"name unicode at max", checkText("name", strings.Repeat("東", NameMax), NameMax), ""},
		{"name too long", checkText("name", strings.Repeat("東", NameMax+1), NameMax), "name"},
		{"name empty", checkText("name", "", NameMax), "name"},
		{"name control", checkText("name", "a\nb", NameMax), "name"},
		{"name bad utf8", checkText("name", "a\xffb", NameMax), "name"},
		{"reason too long", checkText("reason", strings.Repeat("r", ReasonMax+1), ReasonMax), "reason"},

		{"region id 0", checkRegionID(0), ""},
		{"region id negative", checkRegionID(-1), "region_id"},
		{"country empty allowed", checkCountry("", true), ""},
		{"country empty refused", checkCountry("", false), "country"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantField == "" {
				if tt.err != nil {
					t.Fatalf("refused: %v", tt.err)
				}
				return
			}
			if !apperr.Is(tt.err, apperr.InvalidArgument) || apperr.FieldOf(tt.err) != tt.wantField {
				t.Fatalf("got %v (field %q), want INVALID_ARGUMENT naming %q", tt.err, apperr.FieldOf(tt.err), tt.wantField)
			}
			if !strings.HasPrefix(apperr.MessageOf(tt.err), tt.wantField+":") {
				t.Fatalf("message %q does not name %s", apperr.MessageOf(tt.err), tt.wantField)
			}
		})
	}
}

func TestCountryMappingRegion(t *testing.T) {
	tests := []struct {
		name     string
		m        countryMapping
		wantID   int64
		wantCode string
	}{
		{"not offered", countryMapping{}, 0, GlobalRegionCode},
		{"enabled, active region", countryMapping{found: true, enabled: true, regionID: 5, regionActive: true, regionCode: "SEA"}, 5, "SEA"},
		{"enabled, no region", countryMapping{found: true, enabled: true}, 0, GlobalRegionCode},
		{"enabled, disabled region", countryMapping{found: true, enabled: true, regionID: 5, regionCode: "SEA"}, 0, GlobalRegionCode},
		{"disabled country", countryMapping{found: true, regionID: 5, regionActive: true, regionCode: "SEA"}, 0, GlobalRegionCode},
	}
	for _, tt := range tests {
		id, code := tt.m.region()
		if id != tt.wantID || code != tt.wantCode {
			t.Errorf("%s: got %d %s, want %d %s", tt.name, id, code, tt.wantID, tt.wantCode)
		}
	}
}

func TestRebuiltRegion(t *testing.T) {
	m := mappingSnapshot{
		countries: map[string]countryMapping{
			"SG": {found: true, enabled: true, regionID: 1, regionActive: true},
			"SA": {found: true, enabled: true, regionID: 2, regionActive: false},
			"US": {found: true, enabled: true},
			"AQ": {found: true, enabled: false, regionID: 1, regionActive: true},
		},
		activeRegions: map[int64]bool{1: true, 2: false, 3: true},
	}
	tests := []struct {
		name       string
		u          userRow
		wantRegion int64
		wantSource string
	}{
		{"country in active region", userRow{country: "SG", regionID: 0, source: SourceCountry}, 1, SourceCountry},
		{"country in disabled region", userRow{country: "SA", regionID: 2, source: SourceCountry}, 0, SourceCountry},
		{"unmapped country", userRow{country: "US", regionID: 1, source: SourceCountry}, 0, SourceCountry},
		{"disabled country", userRow{country: "AQ", regionID: 1, source: SourceCountry}, 0, SourceCountry},
		{"country no longer offered", userRow{country: "FR", regionID: 1, source: SourceCountry}, 0, SourceCountry},
		{"no country", userRow{regionID: 1, source: SourceCountry}, 0, SourceCountry},
		{"pin to active region kept", userRow{country: "SG", regionID: 3, source: SourceAdmin}, 3, SourceAdmin},
		{"pin to GLOBAL kept", userRow{country: "SG", regionID: 0, source: SourceAdmin}, 0, SourceAdmin},
		{"pin to disabled region dropped", userRow{country: "SG", regionID: 2, source: SourceAdmin}, 1, SourceCountry},
		{"pin to deleted region dropped", userRow{country: "US", regionID: 9, source: SourceAdmin}, 0, SourceCountry},
	}
	for _, tt := range tests {
		region, source := rebuiltRegion(tt.u, m)
		if region != tt.wantRegion || source != tt.wantSource {
			t.Errorf("%s: got %d %s, want %d %s", tt.name, region, source, tt.wantRegion, tt.wantSource)
		}
	}
}
