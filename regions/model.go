package regions

// RegionStatus is whether a region takes users: only an active region's
// countries give their users that region.
type RegionStatus string

// The statuses of a region.
const (
	StatusActive   RegionStatus = "active"
	StatusDisabled RegionStatus = "disabled"
)

// Valid reports whether s is a known status.
func (s RegionStatus) Valid() bool { return s == StatusActive || s == StatusDisabled }

// Region is a list bucket of an app. Its ID is > 0: region_id 0 is GLOBAL and
// is never a Region.
type Region struct {
	ID          int64        `json:"region_id"`
	Code        string       `json:"region_code"`
	Name        string       `json:"name"`
	Status      RegionStatus `json:"status"`
	CreatedAtMs int64        `json:"created_at_ms"`
	UpdatedAtMs int64        `json:"updated_at_ms"`
}

// Country is an ISO 3166-1 alpha-2 country an app offers its users, mapped to
// one of its regions (RegionID 0: none, its users get GLOBAL).
type Country struct {
	Code        string `json:"country_code"`
	Name        string `json:"name"`
	Enabled     bool   `json:"enabled"`
	RegionID    int64  `json:"region_id"`
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// RegionWithCountries is a region and the countries mapped to it.
type RegionWithCountries struct {
	Region
	Countries []Country `json:"countries"`
}

// RegionList is every region of an app with its countries, plus the countries
// mapped to no region.
type RegionList struct {
	Regions    []RegionWithCountries `json:"regions"`
	Unassigned []Country             `json:"unassigned_countries"`
}

// Profile is what a user sees of themself. RegionID 0 is GLOBAL, and then
// RegionCode is "GLOBAL".
type Profile struct {
	UserID        int64  `json:"user_id"`
	DisplayUserID string `json:"display_user_id"`
	Country       string `json:"country"`
	RegionID      int64  `json:"region_id"`
	RegionCode    string `json:"region_code"`
	UpdatedAtMs   int64  `json:"updated_at_ms"`
}

// Sources of a user's region (users.region_source).
const (
	// SourceCountry: computed from the user's country.
	SourceCountry = "country"
	// SourceAdmin: set by an operator; kept by rebuilds and country changes
	// while its region is active.
	SourceAdmin = "admin"
)

// Audit sources (user_region_audit.source): what changed the region.
const (
	AuditUser    = "user"
	AuditRebuild = "rebuild"
	AuditAdmin   = "admin"
)

// AuditEntry is one row of a user's region history.
type AuditEntry struct {
	ID          int64  `json:"id"`
	OldRegionID int64  `json:"old_region_id"`
	NewRegionID int64  `json:"new_region_id"`
	Source      string `json:"source"`
	Operator    string `json:"operator"`
	Reason      string `json:"reason"`
	CreatedAtMs int64  `json:"created_at_ms"`
}

// UserRegionInfo is the operators' view of a user's region: the profile,
// where its region came from, and the latest audit rows, newest first.
type UserRegionInfo struct {
	Profile
	RegionSource string       `json:"region_source"`
	Audit        []AuditEntry `json:"audit"`
}

// ProfileUpdate is a PUT of a user's own profile. A nil field keeps the
// stored value; on registration DisplayUserID is required and a nil Country
// means none. There is deliberately no region field: the server computes it.
type ProfileUpdate struct {
	DisplayUserID *string
	Country       *string
}

// RegionPatch changes a region; nil fields are kept.
type RegionPatch struct {
	Status *RegionStatus
	Name   *string
}

// CountryPatch changes a country; nil fields are kept.
type CountryPatch struct {
	Enabled  *bool
	RegionID *int64
	Name     *string
}

// RebuildResult reports a region rebuild of one app.
type RebuildResult struct {
	// Scanned is how many users were read.
	Scanned int `json:"scanned"`
	// Changed is how many got another region_id.
	Changed int `json:"changed"`
}
