// Package imemu emulates the part of Tencent Cloud IM's REST API that
// voiceroom calls, so that development, tests, benchmarks and the fault
// suite run without a Tencent account. `voiceroom imemu` serves it; tests
// mount an [Emulator] on an httptest server.
//
// It is a test double held to the real contract: where it answers, it
// answers as Tencent does, so that what passes against it does not fail
// against Tencent for a reason it could have shown. What it reads of that contract it takes from imbridge (the
// UserSig format through [imbridge.CheckUserSig], the error codes, the API
// names, the 12 KB message limit, the event ids a message carries), so the
// two sides cannot drift apart.
//
// # What it emulates
//
//   - POST /v4/group_open_http_svc/{create_group,send_group_msg,destroy_group,forbid_send_msg}
//     with the query parameters sdkappid, identifier and usersig. An unknown
//     sdkappid answers 70014, an identifier other than the application's
//     admin 70013; the UserSig (v2: zlib-compressed JSON with an
//     HMAC-SHA256, Tencent's URL-safe base64) is checked as Tencent does:
//     empty 70002, unreadable 70003, signed with another key 70009, issued
//     to another identifier 70013 or application 70014, expired 70001.
//     Another command answers 60003; a body over 64 KB or malformed JSON
//     10004.
//   - create_group: GroupId of 1..48 bytes and not starting "@TGS#", Name of
//     1..30 bytes, Type one of Tencent's five (AVChatRoom, Public, Private,
//     ChatRoom, Community), else 10004; a GroupId in use answers 10021.
//     destroy_group of a group that does not exist or was destroyed answers
//     10010, as does send_group_msg to one.
//   - send_group_msg: a request over 12 KB answers 80002. A Random seen in
//     the group within the last 5 minutes is a duplicate: answered OK with
//     MsgSeq 0 and not shown again. Above 40 messages in a second per group
//     the answer is OK with MsgDropReason "MsgFreqLimit" and the message is
//     not shown. A From_Account muted in the group answers 10017. Every
//     answer but an injected HTTP 500 is HTTP 200 with ActionStatus,
//     ErrorCode and ErrorInfo; an accepted message's also has MsgTime and
//     MsgSeq.
//   - forbid_send_msg: GroupId required (else 10004) and at most 48 bytes
//     (else 10015), Members_Account 1..500 non-empty accounts, MuteTime
//     required and a whole number of seconds in 0..4294967295 (else 10004;
//     0 lifts the mute, 4294967295 is for ever); a group that does not
//     exist or was destroyed answers 10010, a Private group 10007 (Tencent
//     does not mute there; the code is the emulator's choice among its
//     documented ones). Each account's mute is recorded, whether or not it
//     is in the group: Tencent lists no error for a non-member, and its
//     mutes outlast leaving the group. The older name ShutUpTime is not
//     read (a request with only it lacks MuteTime).
//   - Faults on request ([Fault]): an ErrorCode answer, an HTTP 500, or no
//     answer until the caller gives up, for every call or one API, for a
//     while or until cleared.
//
// # Proving it is the emulator
//
// Whoever points a bridge at an emulator must know that what answers on
// that address is the emulator it started, not a stranger that took the
// port: the bridge signs every call with the application's credentials.
// An emulator given Config.ProofKey answers GET /_emu/proof?nonce=N with
// an HMAC-SHA256 of the nonce under that key, and [Verify] sends a fresh
// random nonce and checks the answer. deploy/run.sh generates a key per
// run, hands it to the emulator and to `voiceroom imemu verify` (never on
// a command line), and points the bridge at the emulator only once it has
// proved itself. The check sends no credential.
//
// Everything it received is shown under /_emu/ (groups, messages, events
// by id, members' mutes, counters; see docs/tencent-im.md), for tests and the
// benchmark to check that each event was shown once and each mute set.
//
// # What it does not
//
//   - Any other REST API (group members, group info, message history,
//     accounts, the list of muted members), and the per-application limit
//     on REST calls per second (Tencent's 200 per API): the bridge keeps
//     under it by itself.
//   - Members and accounts: nobody joins a group and no account is
//     imported, so any account may be muted and create_group never answers
//     that an Owner_Account is unknown.
//   - Delivery to members: no client connects, no message reaches anyone;
//     a message is "shown" when the emulator kept it.
//   - Callbacks to the application's server (such as
//     Group.CallbackBeforeApplyJoinGroup): imbridge's guard is called
//     directly by its tests.
//   - Durability: groups and messages live in memory and a restart forgets
//     them; only the newest Config.MaxMessages messages are kept for
//     inspection.
//   - Message content rules beyond the size (element types, sensitive
//     words, priorities dropping Low before High under load): MsgPriority
//     is recorded, not acted on.
package imemu
