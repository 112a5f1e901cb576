package upstream

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResultCacheBoundedOverALongLife: a cache asked to keep 1,000 entries
// is handed 100 distinct results of 256 KiB each (an agent calling a
// cacheable tool with new arguments each time). It holds at most its byte
// bound (lowered to 4 MiB here), in its count and in the live heap; an
// expired entry is dropped at the next put rather than held until it is
// asked for or pushed out; clear empties it.
func TestResultCacheBoundedOverALongLife(t *testing.T) {
	c := newResultCache(Cache{TTL: Duration(time.Hour), MaxEntries: 1000})
	const bound, n, size = 4 << 20, 100, 256 << 10
	c.maxBytes = bound
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	result := func(i int) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(string(rune('a'+i%26)), size)}}}
	}
	h0 := heap()
	for i := range n {
		c.put(fmt.Sprintf("tool\x00\x00{\"i\":%d}", i), result(i))
	}
	h := heap()
	c.mu.Lock()
	held, bytes := len(c.items), c.bytes
	c.mu.Unlock()
	t.Logf("%d results of %d bytes: %d kept, %d bytes counted; live heap %d → %d", n, size, held, bytes, h0, h)
	if held > bound/size || bytes > bound {
		t.Errorf("%d entries, %d bytes kept; want at most %d entries, %d bytes", held, bytes, bound/size, bound)
	}
	if h > h0+bound+1<<20 {
		t.Errorf("live heap %d → %d after %d results of %d bytes; want within the bound (%d) and 1 MiB", h0, h, n, size, bound)
	}
	if _, ok := c.get(fmt.Sprintf("tool\x00\x00{\"i\":%d}", n-1)); !ok {
		t.Error("the newest result is not cached")
	}

	// Expired entries go at the next put.
	c.mu.Lock()
	for _, el := range c.items {
		el.Value.(*cacheEntry).expires = time.Now().Add(-time.Second)
	}
	c.mu.Unlock()
	c.put("tool\x00\x00{}", result(0))
	c.mu.Lock()
	held = len(c.items)
	c.mu.Unlock()
	if held != 1 {
		t.Errorf("%d entries after a put past the others' expiry; want 1", held)
	}
	c.clear()
	if c.bytes != 0 || len(c.items) != 0 {
		t.Errorf("after clear: %d entries, %d bytes", len(c.items), c.bytes)
	}
	// A result over the whole bound is not cached.
	c.put("big", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", bound)}}})
	if _, ok := c.get("big"); ok {
		t.Error("a result over the byte bound was cached")
	}
}
