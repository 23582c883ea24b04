package wallet

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
)

// Limits on what a caller controls.
const (
	// MaxCredit is the largest single credit.
	MaxCredit = 1_000_000_000
	// MaxKeyLen bounds an idempotency key.
	MaxKeyLen = 128
)

// Store reads and changes balances.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// New returns a Store on db. now is the clock (time.Now in production).
func New(db *sql.DB, now func() time.Time) *Store {
	return &Store{db: db, now: now}
}

// CreditResult is the outcome of a credit.
type CreditResult struct {
	UserID  int64 `json:"user_id"`
	Balance int64 `json:"balance"`
	// Replayed is true when the key had been used before: nothing moved.
	Replayed bool `json:"replayed"`
}

// Credit adds amount coins to a user's balance once per key. A repeated key
// with the same user and amount changes nothing and reports Replayed; with a
// different user or amount it is ALREADY_EXISTS.
func (s *Store) Credit(ctx context.Context, appCode string, userID, amount int64, key, operator string) (CreditResult, error) {
	switch {
	case userID <= 0:
		return CreditResult{}, apperr.Invalid("user_id", "must be a positive number")
	case amount <= 0 || amount > MaxCredit:
		return CreditResult{}, apperr.Invalid("amount", "must be 1..%d", MaxCredit)
	case strings.TrimSpace(key) == "" || len(key) > MaxKeyLen:
		return CreditResult{}, apperr.Invalid("idempotency_key", "must be 1..%d characters", MaxKeyLen)
	}
	entry := "credit:" + key
	res := CreditResult{UserID: userID}
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		res.Replayed = false
		now := s.now().UnixMilli()
		_, err := tx.ExecContext(ctx, `INSERT INTO wallet_ledger (app_code, entry_key, user_id, delta, kind, operator, created_at_ms)
			VALUES (?, ?, ?, ?, 'credit', ?, ?)`, appCode, entry, userID, amount, operator, now)
		if mysqldb.IsDuplicate(err) {
			var prevUser, prevDelta int64
			if err := tx.QueryRowContext(ctx, `SELECT user_id, delta FROM wallet_ledger WHERE app_code = ? AND entry_key = ?`,
				appCode, entry).Scan(&prevUser, &prevDelta); err != nil {
				return err
			}
			if prevUser != userID || prevDelta != amount {
				return apperr.New(apperr.AlreadyExists, "idempotency_key was used for another credit")
			}
			res.Replayed = true
			return tx.QueryRowContext(ctx, `SELECT balance FROM wallets WHERE app_code = ? AND user_id = ?`, appCode, userID).Scan(&res.Balance)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO wallets (app_code, user_id, balance, updated_at_ms) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), updated_at_ms = VALUES(updated_at_ms)`,
			appCode, userID, amount, now); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT balance FROM wallets WHERE app_code = ? AND user_id = ?`, appCode, userID).Scan(&res.Balance)
	})
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return CreditResult{}, err
	}
	if err != nil {
		return CreditResult{}, apperr.Wrap(apperr.Unavailable, "wallet unavailable", fmt.Errorf("credit %s/%d: %w", appCode, userID, err))
	}
	return res, nil
}

// Balance returns a user's coins; a user who never had any has 0.
func (s *Store) Balance(ctx context.Context, appCode string, userID int64) (int64, error) {
	var balance int64
	err := s.db.QueryRowContext(ctx, `SELECT balance FROM wallets WHERE app_code = ? AND user_id = ?`, appCode, userID).Scan(&balance)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, apperr.Wrap(apperr.Unavailable, "wallet unavailable", fmt.Errorf("balance %s/%d: %w", appCode, userID, err))
	}
	return balance, nil
}

// Debit takes coins from a user for a gift sent in a room.
type Debit struct {
	AppCode string
	UserID  int64
	Amount  int64
	// EntryKey identifies the ledger row: "gift:<room_id>:<command_id>".
	EntryKey string
	RoomID   string
	// ReceiverUserID is who got the gift (the row's peer_user_id).
	ReceiverUserID int64
	// AtMs is the gift command's time, the ledger row's created_at_ms, so
	// the row falls in the same day and week as the command's event
	// (package roomranks); 0 takes the transaction's time.
	AtMs int64
}

// GiftEntryKey is the ledger key of a gift command.
func GiftEntryKey(roomID, commandID string) string { return "gift:" + roomID + ":" + commandID }

// DebitTx applies debits inside tx, the caller's transaction (a *sql.Tx,
// or mysqldb.UpdateBatch's Querier), and reports which could not be
// paid: ok[i] is false when debits[i]'s user had fewer coins than its
// amount (or no wallet), in which case nothing of it was
// written. Debits are applied in (app_code, user_id) order.
//
// It costs one round trip: the payers' wallet rows are read and locked
// (FOR UPDATE, in primary-key order, so that concurrent transactions lock
// them in one order) and the debits decided here. The new balances (one
// UPDATE) and the paid ones' ledger rows (one INSERT) are added to rest,
// which the caller runs in tx with its own statements; with rest nil they
// are run at once. An error means tx must be rolled back.
func DebitTx(ctx context.Context, tx mysqldb.Querier, debits []Debit, nowMs int64, rest *mysqldb.Batch) (ok []bool, err error) {
	ok = make([]bool, len(debits))
	if len(debits) == 0 {
		return ok, nil
	}
	order := make([]int, len(debits))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareWallet(debits[a].walletKey(), debits[b].walletKey()) })
	var keys []walletKey
	for _, i := range order {
		if k := debits[i].walletKey(); len(keys) == 0 || keys[len(keys)-1] != k {
			keys = append(keys, k)
		}
	}
	balances, err := lockWallets(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	var ledger mysqldb.Rows
	var paying []walletKey // the wallets debited, sorted and distinct as keys
	for _, i := range order {
		d := debits[i]
		k := d.walletKey()
		balance, found := balances[k]
		if !found || balance < d.Amount {
			continue
		}
		balances[k] = balance - d.Amount
		if n := len(paying); n == 0 || paying[n-1] != k {
			paying = append(paying, k)
		}
		ok[i] = true
		at := d.AtMs
		if at == 0 {
			at = nowMs
		}
		ledger.Add("(?, ?, ?, ?, ?, 'gift', ?, ?)", d.AppCode, d.EntryKey, d.UserID, d.ReceiverUserID, -d.Amount, d.RoomID, at)
	}
	if ledger.Len() == 0 {
		return ok, nil
	}
	var set strings.Builder
	args := make([]any, 0, 5*len(paying)+1)
	for _, k := range paying {
		set.WriteString(" WHEN app_code = ? AND user_id = ? THEN ?")
		args = append(args, k.appCode, k.userID, balances[k])
	}
	where, whereArgs := matchWallets(paying)
	b := rest
	if b == nil {
		b = &mysqldb.Batch{}
	}
	b.Add(`UPDATE wallets SET balance = CASE`+set.String()+` ELSE balance END, updated_at_ms = ? WHERE `+where,
		append(append(args, nowMs), whereArgs...)...)
	b.AddRows(`INSERT INTO wallet_ledger (app_code, entry_key, user_id, peer_user_id, delta, kind, room_id, created_at_ms) VALUES `, &ledger, ``)
	if rest == nil {
		if _, err := b.Exec(ctx, tx); err != nil {
			return nil, fmt.Errorf("write gift debits: %w", err)
		}
	}
	return ok, nil
}

// walletKey is a wallet row's primary key.
type walletKey struct {
	appCode string
	userID  int64
}

func (d Debit) walletKey() walletKey { return walletKey{d.AppCode, d.UserID} }

func compareWallet(a, b walletKey) int {
	if c := strings.Compare(a.appCode, b.appCode); c != 0 {
		return c
	}
	return cmp.Compare(a.userID, b.userID)
}

// matchWallets is the condition that picks the wallet rows of keys, a
// primary-key range read each, and its arguments.
func matchWallets(keys []walletKey) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(app_code = ? AND user_id = ?)")
		args = append(args, k.appCode, k.userID)
	}
	return q.String(), args
}

// lockWallets reads and locks (FOR UPDATE) the wallet rows of keys, which
// are sorted and distinct, and returns their balances; a key without a
// row is missing from the map.
func lockWallets(ctx context.Context, tx mysqldb.Querier, keys []walletKey) (map[walletKey]int64, error) {
	where, args := matchWallets(keys)
	rows, err := tx.QueryContext(ctx, "SELECT app_code, user_id, balance FROM wallets WHERE "+where+
		" ORDER BY app_code, user_id FOR UPDATE", args...)
	if err != nil {
		return nil, fmt.Errorf("lock wallets: %w", err)
	}
	defer rows.Close()
	balances := make(map[walletKey]int64, len(keys))
	for rows.Next() {
		var k walletKey
		var balance int64
		if err := rows.Scan(&k.appCode, &k.userID, &balance); err != nil {
			return nil, fmt.Errorf("lock wallets: %w", err)
		}
		balances[k] = balance
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock wallets: %w", err)
	}
	return balances, nil
}

// Entry is one credit written by CreditTx: a ledger row and the balance
// change it makes.
type Entry struct {
	AppCode string
	UserID  int64
	Amount  int64
	// EntryKey is the ledger row's key as it is stored (no prefix added),
	// unique per app: "activity:<id>:<reason>:<period>:<user>" for an
	// activity's reward.
	EntryKey string
	// Kind is the ledger row's kind ("activity"); at most 16 characters.
	Kind string
	// Operator says why the coins were paid ("activity:<id>"); at most 64
	// characters.
	Operator string
	// AtMs is the row's created_at_ms.
	AtMs int64
}

// CreditTx credits e inside tx, the caller's transaction, once per
// EntryKey: the ledger row first, then the balance. A key written before
// with the same user and amount moves nothing and reports replayed; with
// another user or amount it is ALREADY_EXISTS. Any error means tx must be
// rolled back.
func CreditTx(ctx context.Context, tx mysqldb.Querier, e Entry) (replayed bool, err error) {
	switch {
	case e.UserID <= 0:
		return false, apperr.Invalid("user_id", "must be a positive number")
	case e.Amount <= 0 || e.Amount > MaxCredit:
		return false, apperr.Invalid("amount", "must be 1..%d", MaxCredit)
	case strings.TrimSpace(e.EntryKey) == "" || len(e.EntryKey) > 160:
		return false, apperr.Invalid("entry_key", "must be 1..160 characters")
	case e.Kind == "" || len(e.Kind) > 16:
		return false, apperr.Invalid("kind", "must be 1..16 characters")
	case len(e.Operator) > 64:
		return false, apperr.Invalid("operator", "at most 64 characters")
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO wallet_ledger (app_code, entry_key, user_id, delta, kind, operator, created_at_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.AppCode, e.EntryKey, e.UserID, e.Amount, e.Kind, e.Operator, e.AtMs)
	if mysqldb.IsDuplicate(err) {
		rows, err := tx.QueryContext(ctx, `SELECT user_id, delta FROM wallet_ledger WHERE app_code = ? AND entry_key = ?`, e.AppCode, e.EntryKey)
		if err != nil {
			return false, fmt.Errorf("credit %s: %w", e.EntryKey, err)
		}
		defer rows.Close()
		var prevUser, prevDelta int64
		if !rows.Next() {
			return false, fmt.Errorf("credit %s: ledger row vanished: %w", e.EntryKey, rows.Err())
		}
		if err := rows.Scan(&prevUser, &prevDelta); err != nil {
			return false, fmt.Errorf("credit %s: %w", e.EntryKey, err)
		}
		if prevUser != e.UserID || prevDelta != e.Amount {
			return false, apperr.New(apperr.AlreadyExists, "entry_key %s was used for another credit", e.EntryKey)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("credit %s: %w", e.EntryKey, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO wallets (app_code, user_id, balance, updated_at_ms) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), updated_at_ms = VALUES(updated_at_ms)`,
		e.AppCode, e.UserID, e.Amount, e.AtMs); err != nil {
		return false, fmt.Errorf("credit %s: %w", e.EntryKey, err)
	}
	return false, nil
}
