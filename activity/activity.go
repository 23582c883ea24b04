package activity

import "strconv"

// Kind is what an activity is: a leaderboard or a task.
type Kind string

// The kinds.
const (
	Leaderboard Kind = "leaderboard"
	Task        Kind = "task"
)

// Metric is what an activity scores.
type Metric string

// The metrics.
const (
	GiftValueSent     Metric = "gift_value_sent"     // coins spent, by sender
	GiftValueReceived Metric = "gift_value_received" // coins, by receiver
	RoomGiftValue     Metric = "room_gift_value"     // coins, by room
	GiftCount         Metric = "gift_count"          // gifts sent, by sender
	MicSeconds        Metric = "mic_seconds"         // time on a seat, by speaker
)

// Period is how long a task's target counts: the app's day or week, or the
// whole window.
type Period string

// The periods.
const (
	Day    Period = "day"
	Week   Period = "week"
	Window Period = "window"
)

// Status is an activity's status as the API answers it.
type Status string

// The statuses.
const (
	Scheduled Status = "scheduled"
	Running   Status = "running"
	Settling  Status = "settling"
	Settled   Status = "settled"
	Cancelled Status = "cancelled"
)

// SettleState is the stored settlement state (activities.settle_state).
type SettleState string

// The settlement states, in order.
const (
	StateOpen      SettleState = "open"
	StateFrozen    SettleState = "frozen"
	StatePaying    SettleState = "paying"
	StateSettled   SettleState = "settled"
	StateCancelled SettleState = "cancelled"
)

// Band rewards the ranks FromRank..ToRank (1-based, inclusive) with Coins
// each.
type Band struct {
	FromRank int   `json:"from_rank"`
	ToRank   int   `json:"to_rank"`
	Coins    int64 `json:"coins"`
}

// Activity is one campaign of one app.
type Activity struct {
	AppCode     string  `json:"app_code"`
	ID          int64   `json:"activity_id"`
	Name        string  `json:"name"`
	Kind        Kind    `json:"kind"`
	Metric      Metric  `json:"metric"`
	GiftIDs     []int64 `json:"gift_ids,omitempty"`   // nil: every gift
	RegionIDs   []int64 `json:"region_ids,omitempty"` // nil: every region of the app
	StartsAtMs  int64   `json:"starts_at_ms"`
	EndsAtMs    int64   `json:"ends_at_ms"`
	Rewards     []Band  `json:"rewards,omitempty"` // leaderboard
	Target      int64   `json:"target,omitempty"`  // task
	Period      Period  `json:"period,omitempty"`  // task
	RewardCoins int64   `json:"reward_coins,omitempty"`

	Status      Status      `json:"status"`
	SettleState SettleState `json:"-"`
	CreatedBy   string      `json:"created_by"`
	CreatedAtMs int64       `json:"created_at_ms"`
	UpdatedAtMs int64       `json:"updated_at_ms"`
	// Catchup is a retroactive start's read back (catchup.go); state
	// none for an activity defined before its start.
	Catchup Catchup `json:"catchup"`
}

// CatchupState is where a retroactive activity's read back of
// ROOM_EVENTS is (activities.catchup_state): none (not retroactive) or
// reading -> joining -> joined.
type CatchupState string

// The read back's states, in order.
const (
	// CatchupNone: the activity began after its creation; the live
	// durable scores every event for it.
	CatchupNone CatchupState = "none"
	// CatchupReading: the read back scores it alone; the live durable
	// skips it.
	CatchupReading CatchupState = "reading"
	// CatchupJoining: the read back reached the stream's end at
	// LiveFromSeq; the live durable scores the events above it, and the
	// read back goes on until every live list knows it.
	CatchupJoining CatchupState = "joining"
	// CatchupJoined: the live durable alone scores it.
	CatchupJoined CatchupState = "joined"
)

// Catchup is a retroactive activity's read back: its state, the last
// stream sequence it read (Seq: its resume point) and, from joining on,
// LiveFromSeq: the live durable scores the events above it. Incomplete:
// the read back found events deleted from the stream before it read them
// (retention), sequences LostFromSeq..LostToSeq at most; its scores are
// then a lower bound.
type Catchup struct {
	State       CatchupState `json:"state"`
	Seq         uint64       `json:"seq"`
	LiveFromSeq uint64       `json:"live_from_seq"`
	Incomplete  bool         `json:"incomplete"`
	LostFromSeq uint64       `json:"lost_from_seq,omitempty"`
	LostToSeq   uint64       `json:"lost_to_seq,omitempty"`
}

// liveScores reports whether the live durable scores an event of stream
// sequence seq for a: always for an activity not read back, never while
// it is read back, and above LiveFromSeq once it joins.
func (a Activity) liveScores(seq uint64) bool {
	switch a.Catchup.State {
	case CatchupNone, "":
		return true
	case CatchupJoining, CatchupJoined:
		return seq > a.Catchup.LiveFromSeq
	}
	return false
}

// ByRoom reports whether a's subjects are rooms (room_gift_value) rather
// than users.
func (a Activity) ByRoom() bool { return a.Metric == RoomGiftValue }

// Payout reasons (activity_payouts.reason).
const (
	ReasonRank = "rank"
	ReasonTask = "task"
)

// EntryKey is the wallet ledger key of one payout: one per activity,
// reason, period and user, so that no payout moves coins twice.
func EntryKey(activityID int64, reason string, periodStartMs, userID int64) string {
	return "activity:" + itoa(activityID) + ":" + reason + ":" + itoa(periodStartMs) + ":" + itoa(userID)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
