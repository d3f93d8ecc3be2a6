package locks

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// List implements Lister: the held locks of namespace in name order, after
// the name the cursor holds.
func (m *Memory) List(_ context.Context, namespace, cursor string, limit int) (Page, error) {
	if err := checkList(namespace, limit); err != nil {
		return Page{}, err
	}
	after := ""
	if cursor != "" {
		f, err := decodeCursor(cursor, cursorMemory, 1)
		if err != nil || !ValidName(f[0]) {
			return Page{}, errBadCursor
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
	var page Page
	for _, name := range names {
		if len(page.Locks) == limit {
			page.Next = encodeCursor(cursorMemory, page.Locks[limit-1].Key.Name)
			break
		}
		key := Key{Namespace: namespace, Name: name}
		page.Examined++
		m.expireLocked(key, now)
		if l := m.locks[key]; l != nil {
			page.Locks = append(page.Locks, Listed{Key: key, Info: m.infoLocked(key, l, now)})
		}
	}
	return page, nil
}

// Namespaces implements NamespaceLister.
func (m *Memory) Namespaces(_ context.Context, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit must be at least 1", ErrInvalid)
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
