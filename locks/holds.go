package locks

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// BaseHold is the id of a grant's first hold, the one its acquire made
// (BASE_HOLD in lua/holds.lua); a re-entry's hold gets an id of its own.
const BaseHold = "="

// NewHoldID returns the id of a new hold: 9 random bytes, 12 characters.
func NewHoldID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidHold checks a hold id a caller sent: "" or BaseHold for the base
// hold, or one that newHoldID could have made.
func ValidHold(hold string) error {
	if hold == "" || hold == BaseHold {
		return nil
	}
	if len(hold) > 32 {
		return fmt.Errorf("%w: a hold id has at most 32 characters", ErrInvalid)
	}
	for i := 0; i < len(hold); i++ {
		if c := hold[i]; !Alnum(c) && c != '-' && c != '_' {
			return fmt.Errorf("%w: a hold id is made of letters, digits, '-' and '_'", ErrInvalid)
		}
	}
	return nil
}
