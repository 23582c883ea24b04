package regions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestCountryChangeRacingOperator replays the race the shared locks of
// lockCountryMapping exist for: a user's country change has read the mapping
// (MY in SEA) when an operator moves MY to MENA and rebuilds. The operator's
// change must wait for the user's transaction, so that the rebuild sees the
// user in MY and moves them; without the lock the rebuild runs first, and the
// user is left in SEA with a country of MENA until some later rebuild.
func TestCountryChangeRacingOperator(t *testing.T) {
	db := testenv.NewDB(t)
	svc, err := New(context.Background(), db, testenv.Logger(t), nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := context.Background()
	sea, err := svc.CreateRegion(ctx, "app1", "SEA", "Southeast Asia")
	if err != nil {
		t.Fatal(err)
	}
	mena, err := svc.CreateRegion(ctx, "app1", "MENA", "Middle East")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateCountry(ctx, "app1", "MY", "", sea.ID); err != nil {
		t.Fatal(err)
	}
	display, country := "ana", ""
	if _, err := svc.PutProfile(ctx, "app1", 1, ProfileUpdate{DisplayUserID: &display, Country: &country}); err != nil {
		t.Fatal(err)
	}

	operator := make(chan error, 1)
	var once sync.Once
	svc.afterMappingRead = func() {
		once.Do(func() {
			go func() {
				_, err := svc.UpdateCountry(ctx, "app1", "MY", CountryPatch{RegionID: &mena.ID})
				if err == nil {
					_, err = svc.Rebuild(ctx, "app1", "admin")
				}
				operator <- err
			}()
			// Go on once the operator is either blocked on our lock (the
			// correct outcome) or finished (the race was lost).
			testenv.Eventually(t, 10*time.Second, func() error {
				if len(operator) > 0 {
					return nil
				}
				var waiting int
				if err := db.QueryRow(`
					SELECT COUNT(*) FROM information_schema.INNODB_TRX t
					JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
					WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`).Scan(&waiting); err != nil {
					return err
				}
				if waiting == 0 {
					return errors.New("operator neither waiting nor done")
				}
				return nil
			})
		})
	}
	country = "MY"
	if _, err := svc.PutProfile(ctx, "app1", 1, ProfileUpdate{Country: &country}); err != nil {
		t.Fatal(err)
	}
	if err := <-operator; err != nil {
		t.Fatal(err)
	}
	_, region, err := svc.UserRegion(ctx, "app1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if region != mena.ID {
		t.Fatalf("user in MY has region %d after MY moved to MENA (%d) and a rebuild", region, mena.ID)
	}
}
