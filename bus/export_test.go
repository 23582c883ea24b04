package bus

// QueuedCount returns how many messages c has fetched and not yet seen
// through take (the one a handler is busy with counts until it is handed
// over): every one but that a shutdown naks.
func QueuedCount(c *Consumer) int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	n := 0
	for _, k := range c.queued {
		n += k
	}
	return n
}
