package embedded

import "github.com/lockgate/lockgate/locks"

// SessionStore hands out m's session store to the conformance suite
// (locktest.SessionStores).
func (m *Backend) SessionStore() locks.SessionStore { return m.SessionEngine.Store }
