// Package lua holds lockgate's Redis scripts, one commented .lua file per
// atomic step, embedded here because go:embed cannot reach a parent folder.
// Each script states its KEYS, ARGV and return values at its top;
// protocol.lua names the values the scripts and the engine share, the
// libraries (holds.lua, lib_*.lua, prios.lua, semlib.lua, idem_lib.lua)
// hold the functions several of them share, and both are put in front of
// them, in the order lockLib lists. lib_keys.lua describes the Redis layout. Every
// script that changes state is wrapped by once.lua, which makes each call
// have one effect however often Redis receives it.
//
// The package hands out each script's text (Scripts, Named), not a script
// to run: package locks, the engine, wraps each one in a typed call that
// builds its KEYS and ARGV, and runs it through its one runner.
package lua

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"slices"
)

var (
	//go:embed protocol.lua
	protocol string
	//go:embed once.lua
	once string
	//go:embed holds.lua
	holds string
	//go:embed lib_keys.lua
	libKeys string
	//go:embed lib_fence.lua
	libFence string
	//go:embed lib_index.lua
	libIndex string
	//go:embed lib_history.lua
	libHistory string
	//go:embed lib_record.lua
	libRecord string
	//go:embed lib_delay.lua
	libDelay string
	//go:embed lib_shared.lua
	libShared string
	//go:embed lib_grant.lua
	libGrant string
	//go:embed lib_queue.lua
	libQueue string
	//go:embed lib_handoff.lua
	libHandoff string
	//go:embed lib_describe.lua
	libDescribe string
	//go:embed prios.lua
	prios string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed leave.lua
	leaveSrc string
	//go:embed heartbeat.lua
	heartbeatSrc string
	//go:embed break.lua
	breakSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed reenter.lua
	reenterSrc string
	//go:embed value.lua
	valueSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed history.lua
	historySrc string
	//go:embed ticket.lua
	ticketSrc string
	//go:embed set_acquire.lua
	setAcquireSrc string
	//go:embed index.lua
	indexSrc string
	//go:embed indexed.lua
	indexedSrc string
	//go:embed list.lua
	listSrc string
	//go:embed watch.lua
	watchSrc string
	//go:embed watching.lua
	watchingSrc string

	//go:embed semlib.lua
	semLib string
	//go:embed sem_acquire.lua
	semAcquireSrc string
	//go:embed sem_release.lua
	semReleaseSrc string
	//go:embed sem_leave.lua
	semLeaveSrc string
	//go:embed sem_heartbeat.lua
	semHeartbeatSrc string
	//go:embed sem_renew.lua
	semRenewSrc string
	//go:embed sem_inspect.lua
	semInspectSrc string
	//go:embed sem_resize.lua
	semResizeSrc string

	//go:embed lib_session.lua
	libSession string
	//go:embed session_open.lua
	sessionOpenSrc string
	//go:embed session_join.lua
	sessionJoinSrc string
	//go:embed session_confirm.lua
	sessionConfirmSrc string
	//go:embed session_acquire.lua
	sessionAcquireSrc string
	//go:embed session_keep.lua
	sessionKeepSrc string
	//go:embed session_drop.lua
	sessionDropSrc string
	//go:embed session_end.lua
	sessionEndSrc string
	//go:embed sessions_of.lua
	sessionsOfSrc string
	//go:embed lib_count.lua
	libCount string
	//go:embed session_get.lua
	sessionGetSrc string

	//go:embed idem_lib.lua
	idemLib string
	//go:embed idem_begin.lua
	idemBeginSrc string
	//go:embed idem_done.lua
	idemDoneSrc string
	//go:embed idem_abort.lua
	idemAbortSrc string
)

// Script is one script: its text as Redis runs it, and what the engine must
// know to run it. The package hands out the text, not a runnable script:
// the engine (package locks) runs each one through a typed call that names
// its KEYS and ARGV, the one place they are put in order.
type Script struct {
	// Name is the script's file name without .lua.
	Name string
	// Source is what Redis runs: protocol.lua, the libraries the script
	// uses, its body, and once.lua around a script wrapped by it.
	Source string
	// Writes: the script changes state. A script that does not write is
	// read-only, run with FCALL_RO (or EVALSHA_RO).
	Writes bool
	// Once: the script is wrapped by once.lua, and every call of it takes
	// once.lua's three trailing arguments. Every script that writes is,
	// but index.lua, indexed.lua, watching.lua (their writes, a ZADD, a
	// ZREM of one entry, a time moved later, have one effect however
	// often they run, and what they keep is advisory) and watch.lua (it
	// records an expiry, once).
	Once bool
	// Keyed: a call of the script keeps no call record (once.lua sees
	// KEYED). Each of its writes is keyed by an id the gateway chose before
	// sending (the owner token, the hold id, the call id), so that a
	// re-sent call finds its own effect in the lock's state and does
	// nothing more: an acquire finds its token holding, or the token's
	// record (lib_record.lua); a release finds its hold gone, or its
	// record saying released, and by which call. once.lua still wraps it,
	// to fence off another call and run what the libraries need done
	// after it.
	Keyed bool
	// Acked: the replicas must acknowledge what the script did before the
	// engine answers (with --redis-min-replicas): a reply of it can tell
	// the caller of a grant (made by it, or made earlier and picked up or
	// replayed by it), of a lease it extended, or of a semaphore's limit
	// now in force. The engine runs such a
	// script only through its one replica barrier (redisbackend.Backend.exec).
	Acked bool
	// Function names the script as a Redis function (FCALL), and Library
	// is the function library that defines it, for FUNCTION LOAD: the same
	// code as Source, whose libraries Redis then defines once, when it
	// loads the library, and not again on every call as with EVALSHA. Both
	// names, the library's and the function's, end in a hash of the code,
	// so that gateways of different versions, each calling its own, share
	// a Redis.
	Function, Library string
}

// writes builds a script that changes state: protocol, the libraries and
// the body as the function main, then once.lua. main is defined in the
// prelude, once per library, not in the code each call runs: a closure
// made per call (with its upvalues, the libraries' functions it uses)
// cost the lock's cycle about 3 000 Redis instructions.
func writes(name string, acked bool, body string, libs ...string) Script {
	src := protocol
	for _, l := range libs {
		src += l
	}
	return withFunction(Script{Name: name, Writes: true, Once: true, Acked: acked}, src+
		"local function main()\n"+body+"\nend\nlocal KEYED = false\n", once)
}

// keyed builds a script that changes state and is exactly-once by
// construction (see Script.Keyed): writes, but once.lua keeps no record.
func keyed(name string, acked bool, body string, libs ...string) Script {
	src := protocol
	for _, l := range libs {
		src += l
	}
	return withFunction(Script{Name: name, Writes: true, Once: true, Keyed: true, Acked: acked}, src+
		"local function main()\n"+body+"\nend\nlocal KEYED = true\n", once)
}

// writesIdempotent builds a script that changes state in a way that
// running it twice does not change (see Script.Once): not wrapped.
func writesIdempotent(name, body string, libs ...string) Script {
	src := protocol
	for _, l := range libs {
		src += l
	}
	return withFunction(Script{Name: name, Writes: true}, src, body)
}

// reads builds a read-only script.
func reads(name, body string, libs ...string) Script {
	src := protocol
	for _, l := range libs {
		src += l
	}
	return withFunction(Script{Name: name}, src, body)
}

// endsGrants are the scripts that a Redis past its maxmemory still runs, as
// a script whose first write frees memory (a DEL) runs there: they end
// grants and waits, so that a full Redis refuses new grants and still
// takes releases. Redis refuses every other function that writes before
// it runs.
var endsGrants = []string{"release", "leave", "break", "sem_release", "sem_leave", "idem_abort"}

// withFunction completes s from its prelude (protocol.lua and the libraries,
// each a chunk of top-level locals) and the code that runs a call: Source
// as the two one after the other, Library as a function library with that
// code in a function, run, which every call runs. The library declares
// KEYS and ARGV as locals above the prelude, and each call sets them to
// its keys and arguments before it runs: the scripts and libraries use
// them as EVAL's globals, unchanged (a function's call is as atomic as a
// script's, so nothing runs between the two).
func withFunction(s Script, prelude, call string) Script {
	s.Source = prelude + call
	code := "local KEYS, ARGV\n" + prelude + "local function run()\n" + call + "\nend\n"
	sum := sha1.Sum([]byte(s.Name + "\n" + code))
	s.Function = "lockgate_" + s.Name + "_" + hex.EncodeToString(sum[:8])
	flags := ""
	switch {
	case !s.Writes:
		flags = ", flags = {'no-writes'}"
	case slices.Contains(endsGrants, s.Name):
		flags = ", flags = {'allow-oom'}"
	}
	s.Library = "#!lua name=" + s.Function + "\n" + code +
		"redis.register_function{function_name = '" + s.Function + "', callback = function(keys, args)\n" +
		"  KEYS, ARGV = keys, args\n  return run()\nend" + flags + "}\n"
	return s
}

// The libraries, each put in front of the scripts that use it (after
// protocol.lua, which comes first in all of them). The lock libraries go
// in this order, each after those it uses: a Lua local is seen only below
// its definition, and one used above it would be read as a global, which
// Redis refuses when the line runs (TestLibrariesDefineBeforeUse checks
// the order).
var (
	lockLib = holds + libKeys + libIndex + libFence + libHistory + libRecord + libDelay +
		libShared + libGrant + libQueue + libHandoff
	// describeLibs are for the scripts that describe a lock's holders and
	// its queue.
	describeLibs = lockLib + libDescribe + prios
	// semDescribeLibs are for the script that describes a semaphore's.
	semDescribeLibs = lockLib + semLib + prios
	semLibs         = lockLib + semLib
	idemLibs        = holds + idemLib
)

// scripts are the scripts, built once.
var scripts = []Script{
	keyed("acquire", true, acquireSrc, lockLib),
	keyed("release", true, releaseSrc, lockLib), // hands the lock on, in full to a waiter of the caller's gateway
	writes("leave", true, leaveSrc, lockLib),
	writes("break", true, breakSrc, lockLib), // ends every grant, hands the lock on as release does
	writes("heartbeat", false, heartbeatSrc, lockLib),
	writes("renew", true, renewSrc, lockLib),
	writes("reenter", true, reenterSrc, lockLib),
	writes("value", false, valueSrc, lockLib), // answers no grant nor lease: nothing for the replicas to confirm first
	writes("ticket", true, ticketSrc, lockLib),
	writes("set_acquire", true, setAcquireSrc, lockLib), // every lock of a set, or none
	reads("inspect", inspectSrc, describeLibs),
	reads("history", historySrc, lockLib),
	writesIdempotent("index", indexSrc, libIndex),      // listing's index, advisory
	writesIdempotent("indexed", indexedSrc, lockLib),   // notes the index's entry in the name record, only ever later
	reads("list", listSrc, libIndex),                   // reads the entries as lib_index.lua writes them
	writesIdempotent("watch", watchSrc, describeLibs),  // records an expiry, as every lock script does first
	writesIdempotent("watching", watchingSrc, lockLib), // the watch registry, advisory

	keyed("sem_acquire", true, semAcquireSrc, semLibs),
	keyed("sem_release", false, semReleaseSrc, semLibs),
	writes("sem_leave", true, semLeaveSrc, semLibs),
	writes("sem_heartbeat", false, semHeartbeatSrc, semLibs),
	writes("sem_renew", true, semRenewSrc, semLibs),
	reads("sem_inspect", semInspectSrc, semDescribeLibs),
	writes("sem_resize", true, semResizeSrc, semLibs), // its answer names the limit in force; it hands permits on

	writes("idem_begin", true, idemBeginSrc, idemLibs), // replays a live grant
	writes("idem_done", false, idemDoneSrc, idemLibs),
	writes("idem_abort", false, idemAbortSrc),

	writes("session_open", true, sessionOpenSrc, libSession, libCount), // answers a lease
	keyed("session_join", false, sessionJoinSrc, libSession),           // by the grant's nonce
	keyed("session_confirm", false, sessionConfirmSrc, libSession),     // by the grant's nonce
	// join, acquire and confirm in one step on a single Redis: the kind's
	// acquire's body, as a function, after the libraries of both
	keyed("session_acquire", true, sessionAcquireSrc, lockLib, libSession, inSession(acquireSrc, "'r:'")),
	keyed("session_sem_acquire", true, sessionAcquireSrc, semLibs, libSession, inSession(semAcquireSrc, "''")),
	writes("session_keep", true, sessionKeepSrc, libSession, libCount), // answers a lease
	writesIdempotent("session_drop", sessionDropSrc),
	writes("session_end", false, sessionEndSrc, libSession, libCount),
	reads("session_get", sessionGetSrc, libSession),
	writesIdempotent("sessions_of", sessionsOfSrc, libCount),
}

// inSession is the library of session_acquire.lua that makes acquire, the
// body of a kind's acquire script, its function acquire_main; holdField is
// the Lua text of what goes before the token hash in the field of a hold
// kept as JSON in KEYS[1] (a lock's shared hold: 'r:'; a permit: none), where
// its grant names its session's member (see session_acquire.lua). A grant
// made now answers {GRANTED, fencing token, ttl} there, not its bare
// fencing token (lib_grant.lua granted_now): the session cut its lease.
func inSession(acquire, holdField string) string {
	return "BARE_GRANT = false\nlocal function acquire_main()\n" + acquire + "\nend\nlocal HOLD_FIELD = " + holdField + "\n"
}

// Scripts returns every script.
func Scripts() []Script { return slices.Clone(scripts) }

// Named returns the script called name (see Script.Name), and whether there
// is one.
func Named(name string) (Script, bool) {
	i := slices.IndexFunc(scripts, func(s Script) bool { return s.Name == name })
	if i < 0 {
		return Script{}, false
	}
	return scripts[i], true
}
