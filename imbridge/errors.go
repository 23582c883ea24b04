package imbridge

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig reports a configuration value that Validate rejects;
	// the message names the field.
	ErrInvalidConfig = errors.New("invalid config")

	// ErrNoApplication reports an app_code that no Tencent application
	// serves: it has no entry in the apps file and there is no default.
	ErrNoApplication = errors.New("no tencent im application")

	// ErrTransport reports a call that got no Tencent answer: a connection
	// error, a timeout or an HTTP status other than 200. Retryable.
	ErrTransport = errors.New("tencent im transport")

	// ErrMessageDropped reports a message Tencent accepted but did not show
	// (MsgDropReason, e.g. the 40 messages/s per-group limit). Retryable:
	// the same message, with the same Random, is sent again.
	ErrMessageDropped = errors.New("tencent im dropped the message")

	// ErrTooLarge reports an event whose message alone exceeds the 12 KB
	// message limit. Permanent.
	ErrTooLarge = errors.New("message too large")

	// ErrBadEvent reports an event whose payload lacks what its IM action
	// needs (a RoomChatMuted without a user). Permanent.
	ErrBadEvent = errors.New("event unusable for tencent im")

	// errShutdown settles events the bridge still held when it stopped:
	// they are redelivered after a restart.
	errShutdown = errors.New("imbridge stopping")
)

// APIError is a Tencent answer with a non-zero ErrorCode.
type APIError struct {
	// API is "service/command", e.g. "group_open_http_svc/send_group_msg".
	API string
	// Code is Tencent's ErrorCode.
	Code int
	// Info is Tencent's ErrorInfo, cut to 200 bytes.
	Info string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("tencent im %s: error %d: %s", e.API, e.Code, e.Info)
}

// Tencent error codes the bridge acts on.
const (
	CodeNoPermission      = 10007 // the operation is not allowed (forbid_send_msg in a Private group)
	CodeGroupNotFound     = 10010 // the group does not exist or was destroyed
	CodeInvalidGroupID    = 10015 // the GroupId cannot be a group's
	CodeSenderMuted       = 10017 // send_group_msg: the sender is muted in the group
	CodeGroupIDInUse      = 10021 // create_group: the GroupId exists
	CodeGroupIDInUseByYou = 10025 // create_group: the GroupId exists and is yours
	CodeSigExpired        = 70001
	CodeSigEmpty          = 70002
	CodeSigInvalid        = 70003
	CodeSigBadKey         = 70009
	CodeSigIdentifier     = 70013
	CodeSigSDKAppID       = 70014
	CodeMessageTooLong    = 80002
	CodeInvalidRequest    = 10004
	CodeUnknownAPI        = 60003
)

// retryableCodes are Tencent errors worth another try: server-side
// failures, overload and an expired sig (renewed first).
var retryableCodes = map[int]bool{
	10002: true, 10006: true, 10023: true,
	60007: true, 60008: true, 60011: true, 60018: true, 60019: true,
	90992: true, 90994: true, 90995: true, 91000: true,
	CodeSigExpired: true,
}

// permanentCodes are Tencent errors another try cannot fix: bad requests,
// bad signatures, a wrong identifier, content refused.
var permanentCodes = map[int]bool{
	10003: true, 10004: true, CodeNoPermission: true, CodeInvalidGroupID: true, 10016: true, CodeSenderMuted: true,
	60002: true, 60003: true, 60004: true, 60005: true, 60006: true, 60010: true,
	80001: true, 80002: true,
}

// Permanent reports whether err cannot succeed on another try: an
// APIError with a permanent code (the list above, and 70002 to 70020),
// ErrTooLarge, ErrBadEvent or ErrNoApplication. Everything else is
// retryable: transport errors, timeouts, HTTP 5xx, dropped messages, the
// retryable codes, and codes the bridge does not know (an event is never
// dropped on a guess).
func Permanent(err error) bool {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadEvent) || errors.Is(err, ErrNoApplication) {
		return true
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	if retryableCodes[ae.Code] {
		return false
	}
	return permanentCodes[ae.Code] || (ae.Code >= 70002 && ae.Code <= 70020)
}

// errorCode is the "code" label of a call's outcome.
func errorCode(err error) string {
	var ae *APIError
	switch {
	case err == nil:
		return "0"
	case errors.As(err, &ae):
		return fmt.Sprint(ae.Code)
	case errors.Is(err, ErrMessageDropped):
		return "dropped"
	default:
		return "transport"
	}
}
