package voiceroom

// Clip cuts s to at most n characters (runes), the width of a VARCHAR(n)
// column, so that an over-long text is stored shortened instead of failing
// its write. The room list's projection (the fields of a card) and its
// operators' controls (who made a pin or hide) both store text this way.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
