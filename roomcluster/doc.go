// Package roomcluster runs the rooms role on N nodes: rooms are hashed
// into P partitions, a node serves a partition while it holds the
// partition's lease in JetStream KV, and api processes route each room
// command and live read to the partition's owner over NATS request/reply
// (in process when the owner is their own node).
//
// # Leases
//
// The lease of partition p is the key "p.<p>" of the bucket
// VOICEROOM_ROOM_LEASES, valued with its holder's node id. The bucket's
// TTL is the lease's life (LeaseTTL), and an expired key leaves a purge
// marker, so watchers see the expiry. A node takes a lease with Create,
// which succeeds only when the key is free (never held, deleted at a
// hand-over, or expired): a node takes a partition over only after the
// old lease is gone. It renews with Update at the revision it last wrote,
// which fails once the key expired or was taken, whatever the clocks say.
// The revision at which the lease was created is the partition's epoch.
//
// A node serves a partition until its own monotonic clock passes the last
// successful renewal's send time plus LeaseTTL minus Margin: a node that
// cannot renew (JetStream unreachable, or the process paused) stops
// before the server can expire its lease and let another node take it. A
// node resumed after a pause longer than that finds its deadline passed
// and serves nothing until it takes the partition again.
//
// # Fencing
//
// Clocks are not the only guard. The room command log's primary key (app
// code, room id, room version) refuses a second write of one version: an
// old owner whose state is stale fails its write, drops the room's cell,
// and (Fenced) reads the lease; when it is no longer its own at the
// revision it renewed, it stops serving the partition at once. A command
// is answered OK only if its node still serves the partition after its
// commit (rooms.Ownership), so no node answers OK for a room of a
// partition whose lease has passed to another node.
//
// # Placement
//
// Live nodes register in VOICEROOM_ROOM_NODES (renewed like a lease,
// valued with their load). Each partition's owner is the live node with the
// highest rendezvous score for it, so a node joining or leaving moves only
// the partitions it wins or held. A node hands a partition over by
// refusing new commands for it, waiting for those in flight, dropping its
// cells and deleting the lease; the next owner, watching the bucket,
// creates the lease at once and loads each room from its snapshot and
// command log when its first command arrives; the rooms whose stored
// state lists users it loads at once (rooms.Service.Recover), listed from
// an index on the rooms rows' group_hash, the hash whose remainder modulo
// P is the room's partition (migration 00021). A partition free for longer
// than a lease's life is taken by any node. Presence is memory: a moved
// room's users start a fresh presence window.
//
// # Routing
//
// Each node runs the NATS micro service voiceroom-rooms (version 2.0.0)
// with the endpoints voiceroom.rooms.<node>.execute, .view, .mic_requests
// (the queue of requests to speak, read by the host's powers) and .guard.
// A Router is a rooms.Rooms: it knows no command. It ships each
// rooms.Command as it is, its JSON, to .execute (the deadline in a
// header), or, when its own node owns the room, calls that node's rooms
// service with it, with no encoding. The JSON of a command of scalar
// arguments is written and read without reflection (command_json.go); a
// command marked NoView (its caller answers without the room, as the HTTP
// edge's leave and heartbeat) is answered without the room's view, and
// one marked ViewJSON (its caller writes the view out, as the HTTP edge's
// other commands) gets the view back as the owner encoded it, undecoded. Version 1's .command (a method per
// command, with their inputs beside the command) is still answered, for
// the api processes of the previous release during an upgrade
// (legacy.go). A Router finds a
// room's owner in the lease bucket and sends it the request; it asks again
// (after a short, growing wait) when nobody holds the partition, when the
// holder is gone or no longer serves it, or when it did not answer within
// AttemptTimeout, until the caller's deadline; then UNAVAILABLE. After a
// timeout the command goes again marked with its command id as a client
// key, so an owner that did run it answers from its command log.
//
// P is fixed per deployment, recorded in the bucket VOICEROOM_ROOMS (key
// "partitions"); a node or router with another P refuses to start.
package roomcluster
