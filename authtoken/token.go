package authtoken

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom"
)

// The role claims voiceroom gives meaning to.
const (
	// RoleAdmin is the role of an app's operators: they act within the
	// token's app_code only.
	RoleAdmin = "admin"
	// RolePlatform is the role of platform operators: they register apps
	// and manage their keys, and act on no app's rooms or users.
	RolePlatform = "platform"
)

// Leeway is the clock skew a Verifier allows on exp and nbf.
const Leeway = 5 * time.Second

// KeyIDMax is the longest id of a voiceroom signing key.
const KeyIDMax = 64

// KeyIDRule says in words what ValidKeyID accepts, for error messages.
const KeyIDRule = "1-64 of [A-Za-z0-9._-]"

// ValidKeyID reports whether s may be the id of a voiceroom signing key
// (an app's or the platform operators'): 1 to KeyIDMax ASCII letters,
// digits, '.', '_' or '-'.
func ValidKeyID(s string) bool {
	if len(s) == 0 || len(s) > KeyIDMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// MinSecret is the shortest HS256 secret voiceroom accepts.
const MinSecret = 16

// Claims are the JWT claims of a voiceroom token: app_code, role, and the
// registered sub (a decimal user id; optional for admin and platform
// tokens), iat and exp.
type Claims struct {
	AppCode string `json:"app_code,omitempty"`
	Role    string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// Key is an HS256 signing key: its id, written in the header's kid, and
// its secret. A Key without an ID is the single secret
// (VOICEROOM_JWT_SECRET), whose tokens carry no kid.
type Key struct {
	ID     string
	Secret []byte
}

// Issue signs a token for userID of appCode with role, valid for ttl from
// now. userID 0 leaves sub out, which only an admin token may. It returns
// an error for an app code that breaks the app_code rule, a negative or
// missing user id, a role of platform operators, a ttl that is not
// positive, or a key id that breaks KeyIDRule.
func (k Key) Issue(appCode string, userID int64, role string, ttl time.Duration, now time.Time) (string, error) {
	if !voiceroom.ValidAppCode(appCode) {
		return "", fmt.Errorf("app code %q: want %s", appCode, voiceroom.AppCodeRule)
	}
	if userID < 0 || (userID == 0 && role != RoleAdmin) {
		return "", errors.New("user id must be a positive number")
	}
	if role == RolePlatform {
		return "", errors.New("a platform operator's token names no app: use IssuePlatform")
	}
	return k.sign(Claims{AppCode: appCode, Role: role}, userID, ttl, now)
}

// IssuePlatform signs a platform operator's token, valid for ttl from
// now; operatorID, when positive, is its sub (audit trails name it). The
// errors are Issue's.
func (k Key) IssuePlatform(operatorID int64, ttl time.Duration, now time.Time) (string, error) {
	if operatorID < 0 {
		return "", errors.New("operator id must not be negative")
	}
	return k.sign(Claims{Role: RolePlatform}, operatorID, ttl, now)
}

func (k Key) sign(claims Claims, sub int64, ttl time.Duration, now time.Time) (string, error) {
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	if k.ID != "" && !ValidKeyID(k.ID) {
		return "", fmt.Errorf("key id %q: want %s", k.ID, KeyIDRule)
	}
	claims.RegisteredClaims = jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	if sub > 0 {
		claims.Subject = strconv.FormatInt(sub, 10)
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	if k.ID != "" {
		t.Header["kid"] = k.ID
	}
	return t.SignedString(k.Secret)
}

// Issue signs a token with the single secret (no kid): Key{Secret:
// secret}.Issue. Servers accept such tokens only in development or during
// an upgrade window (see Keys.AppKey).
func Issue(secret []byte, appCode string, userID int64, role string, ttl time.Duration, now time.Time) (string, error) {
	return Key{Secret: secret}.Issue(appCode, userID, role, ttl, now)
}

// Source says what verified a token.
type Source string

// The sources of a verified token.
const (
	SourceKey      Source = "key"      // an app's HS256 key, by kid
	SourceSecret   Source = "secret"   // the single secret, no kid
	SourcePlatform Source = "platform" // the platform operators' key
	SourceJWKS     Source = "jwks"     // the app's identity provider
)

// Token is what a verified token says.
type Token struct {
	// AppCode is the token's app; empty for a platform operator.
	AppCode string
	// UserID is the token's sub; 0 when it has none.
	UserID int64
	// Role is the role claim: RoleAdmin, RolePlatform or empty.
	Role string
	// ExpiresAt is the token's exp.
	ExpiresAt time.Time
	// KeyID is the kid the token named; empty for the single secret.
	KeyID string
	// Source is what verified it.
	Source Source
	// Until is when this verdict ends: exp plus Leeway, or sooner when the
	// key stops verifying first (a key in its grace period).
	Until time.Time
}

// Admin reports whether the token carries an app's admin role.
func (t Token) Admin() bool { return t.Role == RoleAdmin && t.AppCode != "" }

// Platform reports whether the token is a platform operator's.
func (t Token) Platform() bool { return t.Source == SourcePlatform }
