package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// interactiveRoles are the ARIA roles a snapshot gives a ref: what act can
// click, type into, select or press on.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "option": true, "menuitem": true, "menuitemcheckbox": true,
	"menuitemradio": true, "tab": true, "switch": true, "slider": true, "spinbutton": true, "treeitem": true,
}

// skippedRoles carry no meaning of their own; their children are shown in
// their place.
var skippedRoles = map[string]bool{"none": true, "generic": true, "LineBreak": true, "presentation": true}

// shownProperties are the states a line shows after the name.
var shownProperties = map[accessibility.PropertyName]bool{
	"checked": true, "disabled": true, "expanded": true, "selected": true, "level": true, "required": true, "pressed": true,
}

// snapshotText is a snapshot being written, up to a byte cap.
type snapshotText struct {
	b         strings.Builder
	max       int
	truncated bool
}

func (w *snapshotText) line(depth int, s string) bool {
	if w.truncated {
		return false
	}
	if w.b.Len()+2*depth+len(s)+1 > w.max {
		w.truncated = true
		return false
	}
	w.b.WriteString(strings.Repeat("  ", depth))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
	return true
}

// axNode is the part of an Accessibility.AXNode a snapshot reads. The
// answer of Accessibility.getFullAXTree is decoded into it (axdecode.go)
// rather than into cdproto's accessibility.Node: a tree of a few hundred
// links is 0.5 MB of JSON, most of it the sources of each name, ignored
// reasons and related nodes, which no snapshot shows.
type axNode struct {
	NodeID           accessibility.NodeID   `json:"nodeId"`
	Ignored          bool                   `json:"ignored"`
	Role             *axValue               `json:"role"`
	Name             *axValue               `json:"name"`
	Value            *axValue               `json:"value"`
	Properties       []axProperty           `json:"properties"`
	ParentID         accessibility.NodeID   `json:"parentId"`
	ChildIDs         []accessibility.NodeID `json:"childIds"`
	BackendDOMNodeID cdp.BackendNodeID      `json:"backendDOMNodeId"`
}

// axValue is an AXValue's value, as JSON (a string, a number, a boolean).
type axValue struct {
	Value json.RawMessage `json:"value"`
}

type axProperty struct {
	Name  accessibility.PropertyName `json:"name"`
	Value *axValue                   `json:"value"`
}

// axString is an AX value as text ("" for none).
func axString(v *axValue) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	if s, ok := plainString(v.Value); ok {
		return s
	}
	var s string
	if json.Unmarshal(v.Value, &s) == nil {
		return s
	}
	return string(v.Value)
}

// plainString is the text of a JSON string without escapes, control
// characters or invalid UTF-8 (most names and roles), read without a
// decoder; ok is false for any other JSON, which json.Unmarshal decodes.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	c := raw[1 : len(raw)-1]
	for _, b := range c {
		if b == '\\' || b == '"' || b < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(c) {
		return "", false
	}
	return string(c), true
}

// quote is s on one line, cut to MaxTextPerNode, in double quotes.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strconv.Quote(clip.String(s, MaxTextPerNode))
}

// ariaSnapshot writes the accessibility tree of the page, one line per
// node: "- role "name" [ref=e3] [checked=true]". Interactive nodes get refs.
func (p *Provider) ariaSnapshot(ctx context.Context, s *session, interactiveOnly bool, max int) (string, bool, error) {
	tree, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (axTree, error) {
		var tree axTree
		err := t.Call(ctx, string(accessibility.GetFullAXTree.Method), accessibility.GetFullAXTreeParams{}, &tree)
		return tree, err
	})
	if err != nil {
		return "", false, err
	}
	text, truncated := writeAria(s, tree.Nodes, interactiveOnly, max)
	return text, truncated, nil
}

// writeAria writes the snapshot of the accessibility tree nodes, giving
// refs from s's table.
func writeAria(s *session, nodes []*axNode, interactiveOnly bool, max int) (string, bool) {
	byID := make(map[accessibility.NodeID]*axNode, len(nodes))
	for _, n := range nodes {
		if n != nil {
			byID[n.NodeID] = n
		}
	}
	var root *axNode
	for _, n := range nodes {
		if n != nil && n.ParentID == "" {
			root = n
			break
		}
	}
	w := &snapshotText{max: max}
	if root == nil {
		return "", false
	}
	s.refMu.Lock()
	defer s.refMu.Unlock()
	var walk func(n *axNode, depth int, parentName string, seen int)
	walk = func(n *axNode, depth int, parentName string, seen int) {
		if w.truncated || seen > 1000 { // seen bounds the depth of a hostile tree
			return
		}
		role := axString(n.Role)
		if role == "InlineTextBox" {
			return // a line box of its StaticText parent, which shows the text
		}
		name := axString(n.Name)
		shown := !n.Ignored && !(skippedRoles[role] && name == "")
		if role == "StaticText" && (strings.TrimSpace(name) == "" || name == parentName) {
			shown = false // the text is the parent's name already
		}
		childDepth, childParent := depth, parentName
		if shown {
			interactive := interactiveRoles[role]
			if !interactiveOnly || interactive {
				var line strings.Builder
				line.WriteString("- ")
				if role == "StaticText" {
					line.WriteString("text")
				} else {
					line.WriteString(role)
				}
				if name != "" {
					line.WriteString(" " + quote(name))
				}
				if interactive {
					if r := s.refs.ref(n.BackendDOMNodeID); r != "" {
						line.WriteString(" [ref=" + r + "]")
					}
					if v := axString(n.Value); v != "" {
						line.WriteString(" value=" + quote(v))
					}
				}
				for _, prop := range n.Properties {
					if shownProperties[prop.Name] {
						if v := axString(prop.Value); v != "" && v != "false" {
							line.WriteString(" [" + string(prop.Name) + "=" + v + "]")
						}
					}
				}
				d := depth
				if interactiveOnly {
					d = 0
				}
				w.line(d, line.String())
			}
			childDepth, childParent = depth+1, name
		}
		for _, id := range n.ChildIDs {
			if c := byID[id]; c != nil {
				walk(c, childDepth, childParent, seen+1)
			}
		}
	}
	walk(root, 0, "", 0)
	return w.b.String(), w.truncated
}

// skippedTags are not shown by the DOM snapshot (nor their subtrees).
var skippedTags = map[string]bool{"script": true, "style": true, "noscript": true, "template": true, "head": true, "svg": true, "meta": true, "link": true}

// interactiveTags get a ref in the DOM snapshot.
var interactiveTags = map[string]bool{"a": true, "button": true, "input": true, "select": true, "textarea": true, "option": true, "summary": true}

// shownAttributes are the attributes the DOM snapshot shows.
var shownAttributes = []string{"id", "name", "type", "href", "value", "placeholder", "role", "aria-label", "title", "alt"}

// domSnapshot writes the DOM of the page as an indented outline: tags with
// their telling attributes, text, and refs for interactive elements.
func (p *Provider) domSnapshot(ctx context.Context, s *session, interactiveOnly bool, max int) (string, bool, error) {
	root, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (*cdp.Node, error) {
		doc, err := evaluateObject(ctx, t, "document")
		if err != nil {
			return nil, err
		}
		depth := int64(maxDOMDepth)
		res, err := cdp.Call(ctx, t, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: doc, Depth: &depth})
		if err != nil {
			return nil, err
		}
		return res.Node, nil
	})
	if err != nil {
		return "", false, err
	}
	w := &snapshotText{max: max}
	deep := false // a node below maxDOMDepth was left out
	s.refMu.Lock()
	defer s.refMu.Unlock()
	var walk func(n *cdp.Node, depth int)
	walk = func(n *cdp.Node, depth int) {
		if w.truncated {
			return
		}
		if n.ChildNodeCount > 0 && len(n.Children) == 0 {
			deep = true
		}
		switch n.NodeType {
		case 3: // Node.TEXT_NODE
			if t := strings.TrimSpace(n.NodeValue); t != "" && !interactiveOnly {
				w.line(depth, quote(t))
			}
			return
		case 1: // Node.ELEMENT_NODE
			tag := strings.ToLower(n.LocalName)
			if skippedTags[tag] {
				return
			}
			attrs := map[string]string{}
			for i := 0; i+1 < len(n.Attributes); i += 2 {
				attrs[n.Attributes[i]] = n.Attributes[i+1]
			}
			interactive := interactiveTags[tag] || attrs["onclick"] != "" || attrs["contenteditable"] == "true" ||
				attrs["tabindex"] != "" && attrs["tabindex"] != "-1"
			if !interactiveOnly || interactive {
				var line strings.Builder
				if plainTag(tag) {
					line.WriteString(tag)
				} else {
					// The page names its elements: Chromium admits any
					// name that starts with a letter and holds no space,
					// "/", ">" or NUL (`x[ref=e1]`, `a"b"`), which written
					// bare would be a ref or a text of the daemon's.
					line.WriteString(quote(tag))
				}
				for _, a := range shownAttributes {
					if v, ok := attrs[a]; ok {
						line.WriteString(" " + a + "=" + quote(v))
					}
				}
				if interactive {
					if r := s.refs.ref(n.BackendNodeID); r != "" {
						line.WriteString(" [ref=" + r + "]")
					}
				}
				d := depth
				if interactiveOnly {
					d = 0
				}
				w.line(d, line.String())
			}
			depth++
		}
		for _, c := range n.Children {
			walk(c, depth)
		}
	}
	walk(root, 0)
	return w.b.String(), w.truncated || deep, nil
}

// maxDOMDepth is how deep below the document the dom snapshot reads the
// tree. Chromium answers DOM.describeNode for a deeper one with an error
// ("CBOR: stack limit exceeded": its encoder nests at most 300 levels, two
// a DOM level), so a page nested a few hundred deep would have no dom
// snapshot at all (TestSnapshotOfAHugePage); its nodes below are left out
// and the snapshot is marked truncated.
const maxDOMDepth = 120

// plainTag reports whether an element's name is written bare in the dom
// snapshot: letters, digits, "-", "_", "." and ":", as HTML's and custom
// elements' names are; another is quoted.
func plainTag(tag string) bool {
	if tag == "" || len(tag) > MaxTextPerNode {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// pageWorld names the isolated world the daemon's page functions run in.
//
// A world of its own has its own built-ins and its own wrappers of the
// page's nodes: the page's script can replace Array.from or
// String.prototype.slice, or define a getter on an element, in its main
// world, and none of it is what the daemon's functions call. They read the
// same DOM, and its content stays the page's to write.
const pageWorld = "agentbe"

// isolatedWorld returns the execution context of pageWorld in the page's
// main frame. Chromium keeps one world of a name per document, so every
// call of a document's life gets the same context, created by the first;
// a navigation starts a new one. The main frame's id is its target's.
func isolatedWorld(ctx context.Context, t *chromedp.Target) (runtime.ExecutionContextID, error) {
	res, err := cdp.Call(ctx, t, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: cdp.FrameID(t.TargetID), WorldName: pageWorld})
	if err != nil {
		return 0, err
	}
	return res.ExecutionContextID, nil
}

// evaluateObject evaluates a constant expression (never one built from
// client input) in pageWorld and returns its object's id.
func evaluateObject(ctx context.Context, t *chromedp.Target, expr string) (runtime.RemoteObjectID, error) {
	world, err := isolatedWorld(ctx, t)
	if err != nil {
		return "", err
	}
	res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: expr, ContextID: world})
	if err != nil {
		return "", err
	}
	if res.ExceptionDetails != nil {
		return "", fmt.Errorf("%s: %s", expr, quote(res.ExceptionDetails.Text))
	}
	if res.Result == nil || res.Result.ObjectID == "" {
		return "", fmt.Errorf("%s is not an object", expr)
	}
	return res.Result.ObjectID, nil
}
