package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// List implements Lister: the held locks of namespace in name order, after
// the name the cursor holds.
func (m *Backend) List(_ context.Context, namespace, cursor string, limit int) (locks.Page, error) {
	if err := locks.CheckList(namespace, limit); err != nil {
		return locks.Page{}, err
	}
	after := ""
	if cursor != "" {
		f, err := locks.DecodeCursor(cursor, locks.CursorMemory, 1)
		if err != nil || !locks.ValidName(f[0]) {
			return locks.Page{}, locks.ErrBadCursor
		}
		after = f[0]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var names []string
	for name := range m.held[namespace] {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var page locks.Page
	for _, name := range names {
		if len(page.Locks) == limit {
			page.Next = locks.EncodeCursor(locks.CursorMemory, page.Locks[limit-1].Key.Name)
			break
		}
		key := locks.Key{Namespace: namespace, Name: name}
		page.Examined++
		m.expireLocked(key, now)
		if l := m.locks[key]; l != nil {
			page.Locks = append(page.Locks, locks.Listed{Key: key, Info: m.infoLocked(key, l, now)})
		}
	}
	return page, nil
}

// Namespaces implements locks.NamespaceLister.
func (m *Backend) Namespaces(_ context.Context, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit must be at least 1", locks.ErrInvalid)
	}
	m.mu.Lock()
	var names []string
	for ns, held := range m.held {
		if len(held) > 0 {
			names = append(names, ns)
		}
	}
	m.mu.Unlock()
	slices.Sort(names)
	return names[:min(limit, len(names))], nil
}
