package wallet_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
	"voiceroom/wallet"
)

func TestCreditIsIdempotentByKey(t *testing.T) {
	db := testenv.NewDB(t)
	w := wallet.New(db, time.Now)
	ctx := context.Background()

	res, err := w.Credit(ctx, "app1", 7, 100, "k1", "admin")
	if err != nil || res.Balance != 100 || res.Replayed {
		t.Fatalf("first credit: %+v %v", res, err)
	}
	res, err = w.Credit(ctx, "app1", 7, 100, "k1", "admin")
	if err != nil || res.Balance != 100 || !res.Replayed {
		t.Fatalf("replayed credit: %+v %v", res, err)
	}
	if _, err := w.Credit(ctx, "app1", 7, 50, "k1", "admin"); !apperr.Is(err, apperr.AlreadyExists) {
		t.Fatalf("same key, other amount: %v", err)
	}
	if res, err := w.Credit(ctx, "app1", 7, 5, "k2", "admin"); err != nil || res.Balance != 105 {
		t.Fatalf("second key: %+v %v", res, err)
	}
	// Another app's wallet of the same user id is separate.
	if b, err := w.Balance(ctx, "app2", 7); err != nil || b != 0 {
		t.Fatalf("app2 balance %d, %v", b, err)
	}
	for _, tt := range []struct {
		user, amount int64
		key, field   string
	}{
		{0, 1, "k", "user_id"},
		{1, 0, "k", "amount"},
		{1, wallet.MaxCredit + 1, "k", "amount"},
		{1, 1, "", "idempotency_key"},
	} {
		if _, err := w.Credit(ctx, "app1", tt.user, tt.amount, tt.key, "admin"); apperr.FieldOf(err) != tt.field {
			t.Errorf("credit(%d, %d, %q) = %v, want field %s", tt.user, tt.amount, tt.key, err, tt.field)
		}
	}
}

// TestConcurrentDebitsNeverOverdraw runs many debits of one wallet in
// parallel transactions: exactly balance/amount of them are paid.
func TestConcurrentDebitsNeverOverdraw(t *testing.T) {
	db := testenv.NewDB(t)
	w := wallet.New(db, time.Now)
	ctx := context.Background()
	if _, err := w.Credit(ctx, "app1", 1, 1000, "seed", "admin"); err != nil {
		t.Fatal(err)
	}
	const tries, amount = 40, 70 // 1000/70 = 14 paid
	var wg sync.WaitGroup
	paid := make(chan bool, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ok []bool
			err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
				var err error
				ok, err = wallet.DebitTx(ctx, tx, []wallet.Debit{{AppCode: "app1", UserID: 1, Amount: amount,
					EntryKey: wallet.GiftEntryKey("room", fmt.Sprint(i)), RoomID: "room"}}, time.Now().UnixMilli())
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			paid <- ok[0]
		}()
	}
	wg.Wait()
	close(paid)
	n := 0
	for ok := range paid {
		if ok {
			n++
		}
	}
	balance, err := w.Balance(ctx, "app1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000/amount || balance != 1000-int64(n)*amount {
		t.Fatalf("%d debits paid, balance %d", n, balance)
	}
	if ledgerSum := testenv.Scalar[int64](t, db, "SELECT COALESCE(SUM(delta), 0) FROM wallet_ledger WHERE app_code = 'app1' AND user_id = 1"); ledgerSum != balance {
		t.Fatalf("ledger sums to %d, balance is %d", ledgerSum, balance)
	}
}
