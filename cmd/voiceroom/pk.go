package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"voiceroom/gateway"
	"voiceroom/pk"
)

// wirePK adds the PK battles to the api role (package pk): their routes,
// and the clock (pk.Clock) that ends them, named by the node id and pid in
// pk_battles.clock_owner. Every api process runs one; each battle is
// advanced by the one holding its lease, so a battle's end survives the
// process that started it. Rooms are told through rs, the rooms router.
func wirePK(d *deps, rs pk.Rooms) error {
	svc, err := pk.New(d.db, rs, time.Now, d.log)
	if err != nil {
		return fmt.Errorf("pk: %w", err)
	}
	owner := d.cfg.NodeID + ":" + strconv.Itoa(os.Getpid())
	if len(owner) > 64 {
		owner = owner[len(owner)-64:]
	}
	clock, err := pk.NewClock(svc, pk.ClockConfig{Owner: owner})
	if err != nil {
		return fmt.Errorf("pk clock: %w", err)
	}
	d.mounts = append(d.mounts, gateway.PKRoutes(svc))
	d.workers = append(d.workers, worker{name: "pk-clock", run: clock.Run})
	return nil
}
