package roomcluster

// Pause stops n's lease work (renewals, membership, balancing) as a
// paused process would, until the returned resume is called.
func (n *Node) Pause() (resume func()) {
	n.step.Lock()
	return n.step.Unlock
}

// PauseNode is Pause for the external tests.
func PauseNode(n *Node) func() { return n.Pause() }

// DesiredOwner is desiredOwner for the external tests.
func DesiredOwner(live []string, p int) string { return desiredOwner(live, p) }
