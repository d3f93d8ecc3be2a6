package locks

import (
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/lua"
)

// script is one of package lua's scripts, ready to run: only through
// Redis.exec (or the heartbeat's pipeline), by the typed call of it that
// builds its KEYS and ARGV.
type script struct {
	*redis.Script
	// name, writes, once and acked are lua.Script's Name, Writes, Once
	// and Acked.
	name                string
	writes, once, acked bool
}

// wrapped are the scripts that newScript made, by name.
var wrapped = map[string]*script{}

// newScript wraps the script called name. A name package lua does not have
// is a mistake in this package, found when it loads.
func newScript(name string) *script {
	s, ok := lua.Named(name)
	if !ok {
		panic("locks: package lua has no script " + name)
	}
	w := &script{Script: redis.NewScript(s.Source), name: s.Name, writes: s.Writes, once: s.Once, acked: s.Acked}
	wrapped[name] = w
	return w
}

// The scripts.
var (
	acquireScript   = newScript("acquire")
	releaseScript   = newScript("release")
	leaveScript     = newScript("leave")
	heartbeatScript = newScript("heartbeat")
	renewScript     = newScript("renew")
	reenterScript   = newScript("reenter")
	ticketScript    = newScript("ticket")
	inspectScript   = newScript("inspect")
	historyScript   = newScript("history")
	indexScript     = newScript("index")
	listScript      = newScript("list")

	semAcquireScript   = newScript("sem_acquire")
	semReleaseScript   = newScript("sem_release")
	semLeaveScript     = newScript("sem_leave")
	semHeartbeatScript = newScript("sem_heartbeat")
	semRenewScript     = newScript("sem_renew")
	semInspectScript   = newScript("sem_inspect")

	idemBeginScript = newScript("idem_begin")
	idemDoneScript  = newScript("idem_done")
	idemAbortScript = newScript("idem_abort")
)
