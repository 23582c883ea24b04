package main

import "context"

// wireRoles builds the components of each role serve runs and adds their
// workers, routes and closers to d. The HTTP edge (health, readiness,
// metrics) runs in every process; the api role adds the /api and /admin routes.
func wireRoles(ctx context.Context, d *deps) error {
	return wireOutbox(d)
}
