package main

import "sync"

// tailBuffer keeps the last bytes written to it, for error messages about a
// process whose output nobody reads otherwise. It is safe for concurrent use,
// and cheap enough to take the gateway's access log under load: it trims
// only once it holds twice its limit.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	data  []byte
}

func newTailBuffer(limit int) *tailBuffer {
	return &tailBuffer{limit: limit, data: make([]byte, 0, 2*limit)}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data = append(b.data, p...)
	if len(b.data) > 2*b.limit {
		b.data = append(b.data[:0], b.data[len(b.data)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.data[max(len(b.data)-b.limit, 0):])
}
