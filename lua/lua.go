// Package lua holds lockgate's Redis scripts, one commented .lua file per
// atomic step, embedded here because go:embed cannot reach a parent folder.
// Each script states its KEYS, ARGV and return values at its top; lib.lua
// holds the functions several of them share, and is put in front of them.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lib.lua
	lib string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed leave.lua
	leaveSrc string
	//go:embed heartbeat.lua
	heartbeatSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed reenter.lua
	reenterSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed history.lua
	historySrc string
	//go:embed ticket.lua
	ticketSrc string

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
)

// The scripts, run with Script.Run (EVALSHA, falling back to EVAL when Redis
// has lost its script cache) or Script.RunRO for the read-only Inspect.
var (
	Acquire   = redis.NewScript(lib + acquireSrc)
	Release   = redis.NewScript(lib + releaseSrc)
	Leave     = redis.NewScript(lib + leaveSrc)
	Heartbeat = redis.NewScript(lib + heartbeatSrc)
	Renew     = redis.NewScript(lib + renewSrc)
	Reenter   = redis.NewScript(lib + reenterSrc)
	Inspect   = redis.NewScript(lib + inspectSrc)
	History   = redis.NewScript(historySrc)
	Ticket    = redis.NewScript(lib + ticketSrc)
)

// The semaphore scripts: lib.lua and semlib.lua, then the script.
var (
	SemAcquire   = redis.NewScript(lib + semLib + semAcquireSrc)
	SemRelease   = redis.NewScript(lib + semLib + semReleaseSrc)
	SemLeave     = redis.NewScript(lib + semLib + semLeaveSrc)
	SemHeartbeat = redis.NewScript(lib + semLib + semHeartbeatSrc)
	SemRenew     = redis.NewScript(lib + semRenewSrc)
	SemInspect   = redis.NewScript(lib + semInspectSrc)
)
