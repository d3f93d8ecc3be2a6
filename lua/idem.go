package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed idem_lib.lua
	idemLib string
	//go:embed idem_begin.lua
	idemBeginSrc string
	//go:embed idem_done.lua
	idemDoneSrc string
	//go:embed idem_abort.lua
	idemAbortSrc string
)

// The scripts of acquires with an Idempotency-Key: idem_lib.lua, then the
// script.
var (
	IdemBegin = redis.NewScript(idemLib + idemBeginSrc)
	IdemDone  = redis.NewScript(idemLib + idemDoneSrc)
	IdemAbort = redis.NewScript(idemAbortSrc)
)
