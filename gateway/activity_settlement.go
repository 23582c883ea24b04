package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/activity"
	"voiceroom/apperr"
)

// ActivitySettlement is what the settlement routes use;
// *activity.Settlements is one.
type ActivitySettlement interface {
	SettleNow(ctx context.Context, app string, id int64) (activity.SettlementProgress, error)
	Rerun(ctx context.Context, app string, id int64) (activity.SettlementProgress, error)
	Progress(ctx context.Context, app string, id int64) (activity.SettlementProgress, error)
	Payouts(ctx context.Context, app string, id int64, cursor string, limit int) (activity.PayoutsPage, error)
}

var _ ActivitySettlement = (*activity.Settlements)(nil)

// defaultPayoutsPage is a page of payouts when the request names no limit.
const defaultPayoutsPage = 50

// ActivitySettlementRoutes returns the Mount of the operators' controls of
// an activity's settlement, within the admin token's app:
//
//   - POST /admin/v1/activities/:activity_id/settle ends a running
//     activity now; it settles as any ended one does;
//   - POST /admin/v1/activities/:activity_id/settlement/rerun frees a
//     settlement that stopped half-way, so that the next round of an
//     activity process pays what is still unpaid (and only that);
//   - GET /admin/v1/activities/:activity_id/payouts?limit=&cursor= answers
//     the settlement's progress and a page of its payouts.
//
// The activity role's settlement loop (activity.Settler) does the work;
// these only change or read the stored state.
func ActivitySettlementRoutes(s ActivitySettlement) Mount {
	return func(r Routers) {
		r.Admin.Post("/v1/activities/:activity_id/settle", func(c *fiber.Ctx) error {
			id, err := settlementActivityID(c)
			if err != nil {
				return err
			}
			p, err := s.SettleNow(c.UserContext(), PrincipalOf(c).AppCode, id)
			if err != nil {
				return err
			}
			return OK(c, p)
		})
		r.Admin.Post("/v1/activities/:activity_id/settlement/rerun", func(c *fiber.Ctx) error {
			id, err := settlementActivityID(c)
			if err != nil {
				return err
			}
			p, err := s.Rerun(c.UserContext(), PrincipalOf(c).AppCode, id)
			if err != nil {
				return err
			}
			return OK(c, p)
		})
		r.Admin.Get("/v1/activities/:activity_id/payouts", func(c *fiber.Ctx) error {
			id, err := settlementActivityID(c)
			if err != nil {
				return err
			}
			limit, err := queryUint(c, "limit", activity.MaxPayoutsPage)
			if err != nil {
				return err
			}
			if limit == 0 {
				limit = defaultPayoutsPage
			}
			app := PrincipalOf(c).AppCode
			page, err := s.Payouts(c.UserContext(), app, id, c.Query("cursor"), int(limit))
			if err != nil {
				return err
			}
			p, err := s.Progress(c.UserContext(), app, id)
			if err != nil {
				return err
			}
			return OK(c, fiber.Map{"settlement": p, "payouts": page.Payouts, "next_cursor": page.Next})
		})
	}
}

// settlementActivityID reads :activity_id, a positive number.
func settlementActivityID(c *fiber.Ctx) (int64, error) {
	id, err := strconv.ParseInt(c.Params("activity_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Invalid("activity_id", "must be a positive number")
	}
	return id, nil
}
