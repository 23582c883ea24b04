package roomevent

// Reasons of RoomUserLeft.
const (
	LeaveReasonLeave  = "leave"
	LeaveReasonStale  = "stale"
	LeaveReasonKicked = "kicked"
	LeaveReasonClosed = "closed"
	LeaveReasonBanned = "banned"
)

// Bodies of the events: a payload is a body's fields plus "room" (a Card).
// RoomCreated has no body.
type (
	// UserJoined is RoomUserJoined.
	UserJoined struct {
		UserID int64 `json:"user_id"`
	}
	// UserLeft is RoomUserLeft; SeatIndex is the seat the user left, -1 if
	// none.
	UserLeft struct {
		UserID    int64  `json:"user_id"`
		Reason    string `json:"reason"`
		SeatIndex int    `json:"seat_index"`
	}
	// MicMoved is RoomMicUp and RoomMicDown.
	MicMoved struct {
		UserID    int64 `json:"user_id"`
		SeatIndex int   `json:"seat_index"`
	}
	// MicChanged is RoomMicChanged.
	MicChanged struct {
		UserID        int64 `json:"user_id"`
		FromSeatIndex int   `json:"from_seat_index"`
		ToSeatIndex   int   `json:"to_seat_index"`
	}
	// SeatLockChanged is RoomSeatLockChanged.
	SeatLockChanged struct {
		SeatIndex int  `json:"seat_index"`
		Locked    bool `json:"locked"`
	}
	// HostTransferred is RoomHostTransferred.
	HostTransferred struct {
		FromUserID int64 `json:"from_user_id"`
		ToUserID   int64 `json:"to_user_id"`
	}
	// GiftSent is RoomGiftSent.
	GiftSent struct {
		SenderUserID   int64  `json:"sender_user_id"`
		ReceiverUserID int64  `json:"receiver_user_id"`
		GiftID         int64  `json:"gift_id"`
		GiftName       string `json:"gift_name"`
		Count          int64  `json:"count"`
		Value          int64  `json:"value"`
		HeatDelta      int64  `json:"heat_delta"`
	}
	// HeatChanged is RoomHeatChanged.
	HeatChanged struct {
		Heat  int64 `json:"heat"`
		Delta int64 `json:"delta"`
	}
	// RankChanged is RoomRankChanged: the room's gift rank, highest first.
	RankChanged struct {
		GiftRank []Contribution `json:"gift_rank"`
	}
	// PasswordChanged is RoomPasswordChanged: only whether the room is
	// locked, never the password.
	PasswordChanged struct {
		Locked bool `json:"locked"`
	}
	// UserKicked is RoomUserKicked; BanUntilMs is 0 without a ban.
	UserKicked struct {
		UserID     int64 `json:"user_id"`
		ByUserID   int64 `json:"by_user_id"`
		BanUntilMs int64 `json:"ban_until_ms"`
	}
	// Closed is RoomClosed; ByUserID is 0 when an operator closed it.
	Closed struct {
		ByUserID int64  `json:"by_user_id"`
		Operator string `json:"operator,omitempty"`
	}
	// VisibleRegionChanged is RoomVisibleRegionChanged.
	VisibleRegionChanged struct {
		OldRegionID int64  `json:"old_region_id"`
		NewRegionID int64  `json:"new_region_id"`
		Reason      string `json:"reason"`
		Operator    string `json:"operator"`
	}
	// Moderated is RoomBanned and RoomRestored.
	Moderated struct {
		Reason   string `json:"reason"`
		Operator string `json:"operator"`
	}
	// AdminChanged is RoomAdminAdded and RoomAdminRemoved.
	AdminChanged struct {
		UserID   int64 `json:"user_id"`
		ByUserID int64 `json:"by_user_id"`
	}
	// SeatMuteChanged is RoomSeatMuteChanged: the host's (or a room
	// admin's) mute of a seat, which stays on the seat until lifted.
	SeatMuteChanged struct {
		SeatIndex int   `json:"seat_index"`
		Muted     bool  `json:"muted"`
		ByUserID  int64 `json:"by_user_id"`
	}
	// SelfMuteChanged is RoomSelfMuteChanged: a speaker's own mute.
	SelfMuteChanged struct {
		UserID    int64 `json:"user_id"`
		SeatIndex int   `json:"seat_index"`
		Muted     bool  `json:"muted"`
	}
	// SeatModeChanged is RoomSeatModeChanged.
	SeatModeChanged struct {
		SeatMode string `json:"seat_mode"`
	}
	// MicRequested is RoomMicRequested; SeatIndex is -1 for any seat.
	MicRequested struct {
		UserID      int64 `json:"user_id"`
		SeatIndex   int   `json:"seat_index"`
		ExpiresAtMs int64 `json:"expires_at_ms"`
	}
	// MicRequestEnded is RoomMicRequestCancelled (by the user: ByUserID is
	// theirs), RoomMicRequestApproved (SeatIndex is the seat taken; a
	// RoomMicUp follows) and RoomMicRequestRejected.
	MicRequestEnded struct {
		UserID    int64 `json:"user_id"`
		ByUserID  int64 `json:"by_user_id"`
		SeatIndex int   `json:"seat_index"`
	}
	// MicInvited is RoomMicInvited; SeatIndex is -1 for any seat.
	MicInvited struct {
		UserID      int64 `json:"user_id"`
		ByUserID    int64 `json:"by_user_id"`
		SeatIndex   int   `json:"seat_index"`
		ExpiresAtMs int64 `json:"expires_at_ms"`
	}
	// MicInvitationEnded is RoomMicInvitationAccepted (SeatIndex is the seat
	// taken; a RoomMicUp follows) and RoomMicInvitationDeclined (-1).
	MicInvitationEnded struct {
		UserID    int64 `json:"user_id"`
		SeatIndex int   `json:"seat_index"`
	}
	// InfoChanged is RoomInfoChanged: the room's information after the
	// change, all of it.
	InfoChanged struct {
		Title       string `json:"title"`
		Notice      string `json:"notice"`
		CoverURL    string `json:"cover_url"`
		Description string `json:"description"`
		ByUserID    int64  `json:"by_user_id"`
	}
	// ChatMuted is RoomChatMuted; UntilMs 0 lifts the mute, Seconds is how
	// long it was set for (0: lifted).
	ChatMuted struct {
		UserID   int64 `json:"user_id"`
		ByUserID int64 `json:"by_user_id"`
		UntilMs  int64 `json:"until_ms"`
		Seconds  int64 `json:"seconds"`
	}
)

// Seat modes.
const (
	// SeatModeFree: anyone present takes a free seat.
	SeatModeFree = "free"
	// SeatModeApply: a seat needs an approved request or an accepted
	// invitation (the owner, the host and room admins take seats freely).
	SeatModeApply = "apply"
)

// Contribution is a user's gift value in a room.
type Contribution struct {
	UserID int64 `json:"user_id"`
	Value  int64 `json:"value"`
}

// Rewarded is ActivityRewarded: one reward of an activity paid into a
// user's wallet (ledger entry EntryKey). Reason is "rank" (a leaderboard's
// rank, Rank and Score set; Subject is the user, or the room whose owner
// is paid) or "task" (a task's target reached in the period that starts at
// PeriodStartMs).
type Rewarded struct {
	ActivityID    int64  `json:"activity_id"`
	Name          string `json:"name"`
	Reason        string `json:"reason"`
	PeriodStartMs int64  `json:"period_start_ms"`
	UserID        int64  `json:"user_id"`
	Subject       string `json:"subject"`
	Rank          int    `json:"rank"`
	Score         int64  `json:"score"`
	Coins         int64  `json:"coins"`
	EntryKey      string `json:"entry_key"`
	PaidAtMs      int64  `json:"paid_at_ms"`
}

// ActivityResult is ActivitySettled: an activity's settlement is done,
// every reward paid. Winners are the ranks paid (a leaderboard's), in rank
// order; Payouts and Coins count every reward, ranks and tasks.
type ActivityResult struct {
	ActivityID  int64    `json:"activity_id"`
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Metric      string   `json:"metric"`
	StartsAtMs  int64    `json:"starts_at_ms"`
	EndsAtMs    int64    `json:"ends_at_ms"`
	SettledAtMs int64    `json:"settled_at_ms"`
	Payouts     int64    `json:"payouts"`
	Coins       int64    `json:"coins"`
	Winners     []Winner `json:"winners"`
}

// Winner is one rank paid by a leaderboard: Subject is the user id, or the
// room (room_gift_value) whose owner UserID was paid.
type Winner struct {
	Rank    int    `json:"rank"`
	Subject string `json:"subject"`
	UserID  int64  `json:"user_id"`
	Score   int64  `json:"score"`
	Coins   int64  `json:"coins"`
}

// PKStarted is RoomPKStarted: the room's battle against OpponentRoomID
// runs from StartsAtMs to EndsAtMs; gifts received in that window score.
type PKStarted struct {
	BattleID       string `json:"battle_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	StartsAtMs     int64  `json:"starts_at_ms"`
	EndsAtMs       int64  `json:"ends_at_ms"`
}

// PKScore is RoomPKScoreChanged: the battle's totals now, as this room
// sees them (MyScore is its own). Seq grows with every gift scored: a
// client keeps the highest, so a lost or repeated message corrects itself.
type PKScore struct {
	BattleID       string `json:"battle_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	MyScore        int64  `json:"my_score"`
	OpponentScore  int64  `json:"opponent_score"`
	Seq            int64  `json:"seq"`
}

// PKEnded is RoomPKEnded: the room's battle is over, for Reason (time_up,
// forfeit, room_closed), with the final scores as this room sees them
// (MyScore is its own) and its Result (win, lose, draw); WinnerRoomID is
// "" on a draw.
type PKEnded struct {
	BattleID       string `json:"battle_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	Reason         string `json:"reason"`
	MyScore        int64  `json:"my_score"`
	OpponentScore  int64  `json:"opponent_score"`
	Result         string `json:"result"`
	WinnerRoomID   string `json:"winner_room_id"`
}

// PKResult is PKSettled: a battle's result, settled once, for the app's
// backend. RoomID invited OpponentRoomID; WinnerRoomID is "" on a draw.
type PKResult struct {
	BattleID       string `json:"battle_id"`
	RoomID         string `json:"room_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	Reason         string `json:"reason"`
	RoomScore      int64  `json:"room_score"`
	OpponentScore  int64  `json:"opponent_score"`
	WinnerRoomID   string `json:"winner_room_id"`
	StartsAtMs     int64  `json:"starts_at_ms"`
	EndsAtMs       int64  `json:"ends_at_ms"`
	EndedAtMs      int64  `json:"ended_at_ms"`
}
