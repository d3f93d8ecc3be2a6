package embedded

import (
	"time"

	"github.com/lockgate/lockgate/locks"
)

// ForgetHistory forgets key's history, as pruning forgets an idle one.
func (m *Backend) ForgetHistory(key locks.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetHistoryLocked(key)
}

// SessionStore hands out m's session store to the conformance suite
// (locktest.SessionStores).
func (m *Backend) SessionStore() locks.SessionStore { return m.SessionEngine.Store }

// PruneSemaphores forgets the semaphores idle for historyKeep at now, as
// a grant's sweep does (pruneLocked).
func (m *Backend) PruneSemaphores(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneSemaphoresLocked(now)
}
