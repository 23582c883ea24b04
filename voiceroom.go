// Package voiceroom holds the product's domain rules that more than one
// package needs: what an app_code may be, the room_outbox row, and the key
// that orders a room's events. It is the root of the module in the sense of
// Standard Package Layout: it depends on nothing but the standard library,
// every other package may import it, and it holds no I/O.
//
// A rule lives here only when two packages would otherwise define it each;
// a rule one package owns stays in that package.
package voiceroom
