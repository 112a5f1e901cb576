//go:build linux

package sandbox

import (
	"fmt"
	"sync"
)

// headTail is a bounded io.Writer that keeps the first half and the last half
// of its limit and counts everything written. The head tells an agent how a
// command started, the tail how it ended (the error is usually there); the
// middle of a huge build log is what can go. Memory grows with the output up
// to the limit, so a small output never allocates the whole limit.
type headTail struct {
	mu    sync.Mutex
	limit int64
	head  []byte // the first limit/2 bytes
	tail  []byte // ring of the last limit-limit/2 bytes once head is full
	start int    // index of the oldest byte in tail when it is full
	total int64
}

func newHeadTail(limit int64) *headTail { return &headTail{limit: limit} }

// Write never fails, so a chatty command is never killed by EPIPE.
func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	headCap := int(h.limit / 2)
	if room := headCap - len(h.head); room > 0 {
		if room > len(p) {
			room = len(p)
		}
		h.head = append(h.head, p[:room]...)
		p = p[room:]
	}
	tailCap := int(h.limit) - headCap
	if len(p) == 0 || tailCap == 0 {
		return n, nil
	}
	if len(p) >= tailCap { // only the last tailCap bytes of p survive
		p = p[len(p)-tailCap:]
		if cap(h.tail) < tailCap {
			h.tail = make([]byte, 0, tailCap)
		}
		h.tail = append(h.tail[:0], p...)
		h.start = 0
		return n, nil
	}
	if room := tailCap - len(h.tail); room > 0 { // still filling the ring
		if room > len(p) {
			room = len(p)
		}
		h.tail = append(h.tail, p[:room]...)
		p = p[room:]
	}
	for len(p) > 0 { // ring full: overwrite the oldest bytes
		c := copy(h.tail[h.start:], p)
		p = p[c:]
		h.start = (h.start + c) % tailCap
	}
	return n, nil
}

// bytes returns head followed by the tail in order, and the total written.
func (h *headTail) bytes() ([]byte, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tail) == 0 {
		return h.head, h.total
	}
	out := make([]byte, 0, len(h.head)+len(h.tail))
	out = append(out, h.head...)
	out = append(out, h.tail[h.start:]...)
	out = append(out, h.tail[:h.start]...)
	return out, h.total
}

// TruncationNotice is the line inserted where output was cut: kept bytes out
// of total were kept (the first and last halves).
func TruncationNotice(kept, total int64) string {
	return fmt.Sprintf("\n[... output truncated: %d of %d bytes omitted; kept the first %d and last %d bytes ...]\n",
		total-kept, total, kept/2, kept-kept/2)
}

// WithTruncationNotice returns kept with the TruncationNotice inserted between
// its head and tail halves when total shows that output was cut, and kept
// itself otherwise. It is how a protocol layer shows a Result stream:
// WithTruncationNotice(res.Stdout, res.StdoutSize).
func WithTruncationNotice(kept []byte, total int64) []byte {
	k := int64(len(kept))
	if total <= k {
		return kept
	}
	half := len(kept) / 2
	notice := TruncationNotice(k, total)
	out := make([]byte, 0, len(kept)+len(notice))
	out = append(out, kept[:half]...)
	out = append(out, notice...)
	return append(out, kept[half:]...)
}
