package upstream

import (
	"bytes"
	"container/list"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultCache holds a server's successful results of tools annotated
// read-only and idempotent, for a TTL, at most max entries and maxBytes of
// results (the oldest entry goes first). Off unless the server's cache.ttl
// is set.
type resultCache struct {
	ttl      time.Duration
	max      int
	maxBytes int64

	mu    sync.Mutex
	items map[string]*list.Element
	order *list.List // front: newest; all share one TTL, so the back expires first
	bytes int64      // the entries' sizes, summed
}

type cacheEntry struct {
	key     string
	res     *mcp.CallToolResult
	expires time.Time
	size    int64
}

// maxCacheBytes bounds the results one server's cache holds, measured as
// their JSON: with results up to the 32 MiB message bound, maxEntries alone
// would let a cache hold gigabytes (docs/upstreams.md).
const maxCacheBytes = 64 << 20

func newResultCache(c Cache) *resultCache {
	if c.TTL <= 0 {
		return nil
	}
	return &resultCache{ttl: time.Duration(c.TTL), max: c.MaxEntries, maxBytes: maxCacheBytes, items: map[string]*list.Element{}, order: list.New()}
}

// drop removes el; c.mu is held.
func (c *resultCache) drop(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.items, e.key)
	c.bytes -= e.size
}

// cacheable reports whether a tool's results may be cached: the server says
// it reads only and answers the same for the same arguments.
func cacheable(t *mcp.Tool) bool {
	a := t.Annotations
	return a != nil && a.ReadOnlyHint && a.IdempotentHint
}

// cacheKey is the tool, the caller's workspace and the arguments in a
// canonical form (so key order and spacing do not matter).
func cacheKey(tool, workspace string, args json.RawMessage) (string, bool) {
	var v any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return "", false
		}
	}
	canon, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return "", false
	}
	var b bytes.Buffer
	b.WriteString(tool)
	b.WriteByte(0)
	b.WriteString(workspace)
	b.WriteByte(0)
	b.Write(canon)
	return b.String(), true
}

func (c *resultCache) get(key string) (*mcp.CallToolResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if time.Now().After(e.expires) {
		c.drop(el)
		return nil, false
	}
	cp := *e.res // callers own the result they get; the entry stays as stored
	return &cp, true
}

func (c *resultCache) put(key string, res *mcp.CallToolResult) {
	if res == nil || res.IsError {
		return
	}
	// Its size as the JSON it came as, near enough: what it holds.
	b, err := json.Marshal(res)
	size := int64(len(b) + len(key))
	if err != nil || size > c.maxBytes {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.drop(el)
	}
	c.items[key] = c.order.PushFront(&cacheEntry{key: key, res: res, expires: now.Add(c.ttl), size: size})
	c.bytes += size
	// Past a bound, or expired: an expired entry would otherwise be held
	// until it is asked for or pushed out.
	for el := c.order.Back(); el != nil; el = c.order.Back() {
		if c.order.Len() <= c.max && c.bytes <= c.maxBytes && !now.After(el.Value.(*cacheEntry).expires) {
			break
		}
		c.drop(el)
	}
}

// clear drops everything (the server restarted: its answers may differ).
func (c *resultCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = map[string]*list.Element{}
	c.order.Init()
	c.bytes = 0
}
