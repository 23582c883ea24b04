package roomcluster

import "voiceroom/rooms"

// Version 1 of the micro service (voiceroom 1.x's api processes) sent
// every command to <node>.command, with the inputs that version 2 carries
// in the command (a gift, a region, a reason, a new room's arguments)
// beside it. A version 2 node still answers it, so that an upgrade may
// replace the rooms nodes first and the api processes after (the reads'
// endpoints and every reply are unchanged). Drop it, and opCommand, once
// no version 1 api process runs.

// v1Command is a command as a version 1 router sends it: the command's
// fields, which version 2 kept under the same names, and the inputs
// version 1 carried beside them.
type v1Command struct {
	rooms.Command
	GiftID   int64     `json:"gift,omitempty"`
	RegionID int64     `json:"region,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Create   *v1Create `json:"create,omitempty"`
	// TimeoutMs is what was left of the caller's deadline.
	TimeoutMs int64 `json:"t"`
}

// v1Create is version 1's CreateRoom request (rooms.CreateRequest then).
type v1Create struct {
	Title       string `json:"title"`
	CoverURL    string `json:"cover_url,omitempty"`
	Description string `json:"description,omitempty"`
	SeatCount   int    `json:"seat_count,omitempty"`
	Mode        string `json:"mode,omitempty"`
	SeatMode    string `json:"seat_mode,omitempty"`
	RoomID      string `json:"room_id,omitempty"`
}

// command is v as a version 2 command. Version 1 set only the inputs of
// the command it sent (and a kind on all but a create), so they go into
// the command's arguments as they are.
func (v *v1Command) command() *rooms.Command {
	cmd := v.Command
	a := &cmd.Args
	if v.GiftID != 0 {
		a.GiftID = v.GiftID
	}
	if v.RegionID != 0 {
		a.RegionID = v.RegionID
	}
	if v.Reason != "" {
		a.Reason = v.Reason
	}
	if c := v.Create; c != nil {
		cmd.Kind = rooms.KindCreateRoom
		if c.RoomID != "" {
			cmd.RoomID = c.RoomID
		}
		*a = rooms.Args{Title: c.Title, CoverURL: c.CoverURL, Description: c.Description, SeatCount: c.SeatCount, Mode: c.Mode,
			SeatMode: c.SeatMode}
	}
	return &cmd
}
