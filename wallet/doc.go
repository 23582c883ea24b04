// Package wallet keeps users' coin balances and their ledger in MySQL, per
// app_code. Credits are idempotent by key; debits for gifts run inside the
// room command's own transaction (DebitTx), so a gift's coins move if and only
// if the command commits, and a balance can never go below zero: a debit is a
// conditional update that touches nothing when the coins are not there.
// Credits that must commit with other rows (an activity's reward, marked
// paid in the same transaction) go through CreditTx, inside the caller's
// transaction, once per ledger entry key.
package wallet
