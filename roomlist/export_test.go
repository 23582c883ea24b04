package roomlist

// NearCacheUp reports whether l's near cache is in use (tests).
func NearCacheUp(l *Lister) bool { return l.near != nil && l.near.up.Load() }

// NearCacheConnID returns the Redis client id of l's tracking connection.
func NearCacheConnID(l *Lister) int64 { return l.near.connID.Load() }

// NearCacheOn reports whether l has a near cache (it is not turned off).
func NearCacheOn(l *Lister) bool { return l.near != nil }
