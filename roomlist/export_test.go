package roomlist

// NearCacheUp reports whether l's near cache is in use (tests).
func NearCacheUp(l *Lister) bool { return l.near != nil && l.near.up.Load() }

// NearCacheConnIDs returns the Redis client ids of l's tracking
// connections, by server address.
func NearCacheConnIDs(l *Lister) map[string]int64 {
	l.near.lmu.Lock()
	defer l.near.lmu.Unlock()
	out := map[string]int64{}
	for addr, link := range l.near.links {
		out[addr] = link.connID.Load()
	}
	return out
}

// NearCacheOn reports whether l has a near cache (it is not turned off).
func NearCacheOn(l *Lister) bool { return l.near != nil }
