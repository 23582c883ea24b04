package voiceroom

// AppCodeMax is the longest app_code, the size of the app_code columns.
const AppCodeMax = 32

// AppCodeRule says in words what ValidAppCode accepts, for error messages.
const AppCodeRule = "1-32 of [A-Za-z0-9_-]"

// ValidAppCode reports whether s may be an app_code: 1 to AppCodeMax ASCII
// letters, digits, '_' or '-'. An app_code is part of row keys, cache keys
// and NATS subjects, so it never holds dots, wildcards or spaces.
func ValidAppCode(s string) bool {
	if len(s) == 0 || len(s) > AppCodeMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
