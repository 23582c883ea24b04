package wallet_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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
					EntryKey: wallet.GiftEntryKey("room", fmt.Sprint(i)), RoomID: "room"}}, time.Now().UnixMilli(), nil)
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

// TestDebitsOfOneGroup pays a group's debits in (app, user) order, each
// against what the ones before it left: a payer's second gift is refused
// when the first took too much, a payer without a wallet is refused, and
// with a batch nothing is written until the caller runs it.
func TestDebitsOfOneGroup(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			db := testenv.NewDB(t)
			w := wallet.New(db, time.Now)
			ctx := context.Background()
			for user, coins := range map[int64]int64{1: 1000, 3: 50} {
				if _, err := w.Credit(ctx, "app1", user, coins, fmt.Sprint("seed", user), "admin"); err != nil {
					t.Fatal(err)
				}
			}
			gift := func(user, amount int64, cmd string) wallet.Debit {
				return wallet.Debit{AppCode: "app1", UserID: user, Amount: amount, EntryKey: wallet.GiftEntryKey("room", cmd), RoomID: "room", ReceiverUserID: 9}
			}
			debits := []wallet.Debit{gift(3, 60, "a"), gift(1, 600, "b"), gift(2, 10, "c"), gift(1, 300, "d"), gift(1, 200, "e"), gift(3, 50, "f")}
			var ok []bool
			err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
				var b *mysqldb.Batch
				if batched {
					b = &mysqldb.Batch{}
				}
				var err error
				if ok, err = wallet.DebitTx(ctx, tx, debits, time.Now().UnixMilli(), b); err != nil || b == nil {
					return err
				}
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM wallet_ledger WHERE kind = 'gift'").Scan(&n); err != nil || n != 0 {
					t.Errorf("%d ledger rows (%v) in the transaction before the batch ran", n, err)
				}
				_, err = b.Exec(ctx, tx)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := []bool{false, true, false, true, false, true}; !slices.Equal(ok, want) {
				t.Fatalf("paid %v, want %v", ok, want)
			}
			for user, want := range map[int64]int64{1: 100, 3: 0} {
				if got, err := w.Balance(ctx, "app1", user); err != nil || got != want {
					t.Errorf("user %d: balance %d (%v), want %d", user, got, err, want)
				}
			}
			if got := testenv.Scalar[string](t, db, "SELECT GROUP_CONCAT(entry_key ORDER BY entry_key) FROM wallet_ledger WHERE kind = 'gift'"); got != "gift:room:b,gift:room:d,gift:room:f" {
				t.Errorf("gift ledger rows %s", got)
			}
		})
	}
}

// TestCreditTxOncePerKeyAndOnlyOnCommit: a credit inside a caller's
// transaction moves coins once per entry key, and nothing when the
// transaction rolls back.
func TestCreditTxOncePerKeyAndOnlyOnCommit(t *testing.T) {
	db := testenv.NewDB(t)
	w := wallet.New(db, time.Now)
	ctx := context.Background()
	e := wallet.Entry{AppCode: "app1", UserID: 9, Amount: 40, EntryKey: "activity:1:rank:0:9", Kind: "activity", Operator: "activity:1", AtMs: 1}
	credit := func(e wallet.Entry, commit bool) (bool, error) {
		t.Helper()
		var replayed bool
		errRollback := fmt.Errorf("roll back")
		err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
			var err error
			replayed, err = wallet.CreditTx(ctx, tx, e)
			if err == nil && !commit {
				return errRollback
			}
			return err
		})
		if err == errRollback {
			err = nil
		}
		return replayed, err
	}
	if _, err := credit(e, false); err != nil {
		t.Fatal(err)
	}
	if b, err := w.Balance(ctx, "app1", 9); err != nil || b != 0 {
		t.Fatalf("after a rolled back credit: balance %d, %v", b, err)
	}
	if replayed, err := credit(e, true); err != nil || replayed {
		t.Fatalf("first credit: replayed %v, %v", replayed, err)
	}
	if replayed, err := credit(e, true); err != nil || !replayed {
		t.Fatalf("second credit: replayed %v, %v", replayed, err)
	}
	if b, err := w.Balance(ctx, "app1", 9); err != nil || b != 40 {
		t.Fatalf("balance %d, %v; want 40", b, err)
	}
	other := e
	other.Amount = 41
	if _, err := credit(other, true); !apperr.Is(err, apperr.AlreadyExists) {
		t.Fatalf("same key, other amount: %v", err)
	}
	var kind, operator string
	if err := db.QueryRowContext(ctx, `SELECT kind, operator FROM wallet_ledger WHERE app_code = 'app1' AND entry_key = ?`, e.EntryKey).
		Scan(&kind, &operator); err != nil || kind != "activity" || operator != "activity:1" {
		t.Fatalf("ledger row kind %q operator %q, %v", kind, operator, err)
	}
	bad := e
	bad.Kind = ""
	if _, err := credit(bad, true); apperr.FieldOf(err) != "kind" {
		t.Fatalf("empty kind: %v", err)
	}
}
