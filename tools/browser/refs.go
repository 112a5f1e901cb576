package browser

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/cdp"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// MaxRefs bounds the refs one page may hand out; past it, snapshots show
// nodes without refs.
const MaxRefs = 20_000

// refTable maps the short refs of snapshots ("e12") to the DOM nodes they
// name, for the page now shown. Numbers keep growing across pages, so a ref
// of an earlier page is recognisably stale (below first) and never names a
// node of the current one. A node keeps its ref across snapshots of the
// same page.
type refTable struct {
	first  int // the first number of the current page
	next   int
	byNode map[cdp.BackendNodeID]string
	byRef  map[int]cdp.BackendNodeID
}

func (t *refTable) reset() {
	t.byNode = map[cdp.BackendNodeID]string{}
	t.byRef = map[int]cdp.BackendNodeID{}
	if t.next == 0 {
		t.next = 1
	}
	t.first = t.next
}

// invalidate ends the current page's refs (a navigation).
func (t *refTable) invalidate() { t.reset() }

// ref is id's ref, made if needed; "" when the page has MaxRefs already.
func (t *refTable) ref(id cdp.BackendNodeID) string {
	if id == 0 {
		return ""
	}
	if r, ok := t.byNode[id]; ok {
		return r
	}
	if len(t.byRef) >= MaxRefs {
		return ""
	}
	n := t.next
	t.next++
	r := "e" + strconv.Itoa(n)
	t.byNode[id] = r
	t.byRef[n] = id
	return r
}

// lookup resolves a client's ref, with an error that says what is wrong.
func (t *refTable) lookup(ref string) (cdp.BackendNodeID, error) {
	num, ok := strings.CutPrefix(ref, "e")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 || len(ref) > 12 {
		return 0, fmt.Errorf("ref %q is not a ref (refs look like e12 and come from browser.snapshot or browser.goto)", clip.String(ref, 20))
	}
	if n < t.first {
		return 0, fmt.Errorf("ref %q is stale: the page has navigated since the snapshot that gave it; take a new browser.snapshot", ref)
	}
	id, ok := t.byRef[n]
	if !ok {
		return 0, fmt.Errorf("ref %q was not given by any snapshot of this page; take a browser.snapshot", ref)
	}
	return id, nil
}
