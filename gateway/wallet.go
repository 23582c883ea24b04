package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/wallet"
)

// Wallet is what the wallet routes use; *wallet.Store is one.
type Wallet interface {
	Balance(ctx context.Context, appCode string, userID int64) (int64, error)
	Credit(ctx context.Context, appCode string, userID, amount int64, key, operator string) (wallet.CreditResult, error)
}

var _ Wallet = (*wallet.Store)(nil)

// WalletRoutes returns the Mount of the wallet: GET /api/v1/wallet (the
// caller's balance) and POST /admin/v1/wallets/:user_id/credit (coins added
// once per idempotency_key).
func WalletRoutes(w Wallet) Mount {
	h := &walletHandlers{w: w}
	return func(r Routers) {
		r.API.Get("/v1/wallet", h.balance)
		r.Admin.Post("/v1/wallets/:user_id/credit", h.credit)
	}
}

type walletHandlers struct {
	w Wallet
}

func (h *walletHandlers) balance(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	balance, err := h.w.Balance(c.UserContext(), p.AppCode, p.UserID)
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"user_id": p.UserID, "balance": balance})
}

func (h *walletHandlers) credit(c *fiber.Ctx) error {
	userID, err := strconv.ParseInt(c.Params("user_id"), 10, 64)
	if err != nil || userID <= 0 {
		return apperr.Invalid("user_id", "must be a positive number")
	}
	var req struct {
		Amount         int64  `json:"amount"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	res, err := h.w.Credit(c.UserContext(), p.AppCode, userID, req.Amount, req.IdempotencyKey, p.Operator())
	if err != nil {
		return err
	}
	return OK(c, res)
}
