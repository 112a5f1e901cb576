package browser

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
)

// axTree is the answer of Accessibility.getFullAXTree, decoded by
// decodeAXTree into the fields a snapshot reads. Most of a tree is the
// sources of each name and the reasons a node is ignored, which no snapshot
// shows; chromedp's reflection-based decoder parsed them only to drop them,
// and decoded each value twice. decodeAXTree scans past them: a goto +
// snapshot of 200 links costs the daemon 37-40 ms of CPU instead of 46-51
// (BenchmarkGotoSnapshotPhases, BenchmarkDecodeAXTree; docs/performance.md,
// "Browser").
type axTree struct {
	Nodes []*axNode
}

// UnmarshalJSON decodes the tree. The JSON reaches it validated whole
// (chromedp read it as one value first); nothing decoded refers to data,
// which the caller may reuse.
func (t *axTree) UnmarshalJSON(data []byte) error {
	nodes, err := decodeAXTree(data)
	if err != nil {
		return fmt.Errorf("decoding the accessibility tree: %w", err)
	}
	t.Nodes = nodes
	return nil
}

// decodeAXTree decodes {"nodes": [AXNode…]} into axNodes, as
// json.Unmarshal into struct{ Nodes []*axNode } would for the JSON Chromium
// writes (keys matched exactly, the last of a repeated key wins).
// TestAXTreeDecoders and FuzzDecodeAXTree hold it to that. The nodes refer
// to one copy of data as a string (their ids are substrings of it) and to
// copies of the raw values they keep, never to data: a tree costs one copy
// of its answer, which MaxMessageBytes bounds, while its nodes live.
func decodeAXTree(data []byte) ([]*axNode, error) {
	s := axScanner{b: data, t: string(data)}
	var nodes []*axNode
	err := s.object(func(key []byte) error {
		if string(key) != "nodes" {
			return s.skip()
		}
		nodes = nil
		if s.null() {
			return nil
		}
		nodes = []*axNode{}
		return s.array(func() error {
			if s.null() {
				nodes = append(nodes, nil)
				return nil
			}
			n := s.newNode()
			nodes = append(nodes, n)
			return s.node(n)
		})
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, s.errorf("data after the tree")
	}
	return nodes, nil
}

// axScanner reads JSON that is known to be valid, without recursion (a
// value it skips may nest as deep as it likes).
type axScanner struct {
	b []byte
	t string // b as a string: the strings decoded are its substrings, not copies
	i int
	// nodes and values are allocated in blocks, and the raw values kept
	// are copied into kept: a tree has thousands of each.
	nodes  []axNode
	values []axValue
	kept   []byte
}

// keep is a copy of raw, from a shared block.
func (s *axScanner) keep(raw []byte) []byte {
	if len(s.kept)+len(raw) > cap(s.kept) {
		s.kept = make([]byte, 0, max(16<<10, len(raw)))
	}
	start := len(s.kept)
	s.kept = append(s.kept, raw...)
	return s.kept[start:len(s.kept):len(s.kept)]
}

const axBlock = 256

func (s *axScanner) newNode() *axNode {
	if len(s.nodes) == cap(s.nodes) {
		s.nodes = make([]axNode, 0, axBlock)
	}
	s.nodes = s.nodes[:len(s.nodes)+1]
	return &s.nodes[len(s.nodes)-1]
}

func (s *axScanner) newValue() *axValue {
	if len(s.values) == cap(s.values) {
		s.values = make([]axValue, 0, axBlock)
	}
	s.values = s.values[:len(s.values)+1]
	return &s.values[len(s.values)-1]
}

var errAXEnd = errors.New("unexpected end of the JSON")

func (s *axScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *axScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte that is not white space (0 at the end).
func (s *axScanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *axScanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.b) {
			return errAXEnd
		}
		return s.errorf("want %q, have %q", c, s.b[s.i])
	}
	s.i++
	return nil
}

// null consumes a null if one is next.
func (s *axScanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// object calls field for each key of the object that is next, with the
// scanner on the key's value, which field must consume.
func (s *axScanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		quoted, escaped, err := s.str()
		if err != nil {
			return err
		}
		key := quoted[1 : len(quoted)-1]
		if escaped {
			k, err := s.unquote(quoted)
			if err != nil {
				return err
			}
			key = []byte(k)
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		case 0:
			return errAXEnd
		default:
			return s.errorf("want , or } in an object")
		}
	}
}

// array calls elem for each element of the array that is next; elem must
// consume it.
func (s *axScanner) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		case 0:
			return errAXEnd
		default:
			return s.errorf("want , or ] in an array")
		}
	}
}

// str reads the string that is next and returns it as written, quotes
// included, and whether it holds an escape.
func (s *axScanner) str() (quoted []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, s.expect('"')
	}
	start := s.i
	s.i++
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return nil, false, errAXEnd
		}
		k := bytes.IndexByte(s.b[s.i:s.i+j], '\\')
		if k < 0 {
			s.i += j + 1
			return s.b[start:s.i], escaped, nil
		}
		escaped = true
		s.i += k + 2 // the backslash and the byte it escapes
	}
}

// unquote is the text of a string as written, as encoding/json decodes it
// (escapes resolved, invalid UTF-8 replaced).
func (s *axScanner) unquote(quoted []byte) (string, error) {
	var out string
	if err := json.Unmarshal(quoted, &out); err != nil {
		return "", s.errorf("string: %v", err)
	}
	return out, nil
}

// text reads the string (or null: "") that is next.
func (s *axScanner) text() (string, error) {
	if s.null() {
		return "", nil
	}
	quoted, escaped, err := s.str()
	if err != nil {
		return "", err
	}
	if content := quoted[1 : len(quoted)-1]; !escaped && utf8.Valid(content) {
		end := s.i - 1 // the closing quote
		return s.t[end-len(content) : end], nil
	}
	return s.unquote(quoted)
}

// skip consumes the value that is next, whatever it is.
func (s *axScanner) skip() error {
	if s.peek() == 0 {
		return errAXEnd
	}
	v, _, ok := jsonscan.Value(s.b[s.i:])
	if !ok {
		if c := s.b[s.i]; c == '"' || c == '{' || c == '[' {
			return errAXEnd // a string or container the input cuts
		}
		return s.errorf("want a value")
	}
	s.i += len(v)
	return nil
}

// scalar reads a number, true, false or null.
func (s *axScanner) scalar() ([]byte, error) {
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			goto end
		}
		s.i++
	}
end:
	if s.i == start {
		return nil, s.errorf("want a value")
	}
	return s.b[start:s.i], nil
}

// raw reads the value that is next and returns its JSON.
func (s *axScanner) raw() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// axValue reads an AXValue object (or null) and keeps its value's JSON.
func (s *axScanner) axValue() (*axValue, error) {
	if s.null() {
		return nil, nil
	}
	v := s.newValue()
	err := s.object(func(key []byte) error {
		if string(key) != "value" {
			return s.skip()
		}
		raw, err := s.raw()
		v.Value = s.keep(raw) // null too, as encoding/json keeps it in a RawMessage
		return err
	})
	return v, err
}

// node reads one AXNode into n.
func (s *axScanner) node(n *axNode) error {
	return s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "nodeId":
			if s.null() {
				return nil // as encoding/json: null leaves a string as it was
			}
			var id string
			id, err = s.text()
			n.NodeID = accessibility.NodeID(id)
		case "ignored":
			var v []byte
			if v, err = s.scalar(); err == nil {
				switch string(v) {
				case "true":
					n.Ignored = true
				case "false":
					n.Ignored = false
				case "null":
				default:
					err = s.errorf("ignored is %s", v)
				}
			}
		case "role":
			n.Role, err = s.axValue()
		case "name":
			n.Name, err = s.axValue()
		case "value":
			n.Value, err = s.axValue()
		case "properties":
			n.Properties = nil
			if s.null() {
				return nil
			}
			n.Properties = []axProperty{}
			err = s.array(func() error {
				var p axProperty
				if !s.null() {
					if err := s.object(func(key []byte) error {
						switch string(key) {
						case "name":
							if s.null() {
								return nil
							}
							name, err := s.text()
							p.Name = accessibility.PropertyName(name)
							return err
						case "value":
							v, err := s.axValue()
							p.Value = v
							return err
						}
						return s.skip()
					}); err != nil {
						return err
					}
				}
				n.Properties = append(n.Properties, p)
				return nil
			})
		case "parentId":
			if s.null() {
				return nil
			}
			var id string
			id, err = s.text()
			n.ParentID = accessibility.NodeID(id)
		case "childIds":
			n.ChildIDs = nil
			if s.null() {
				return nil
			}
			n.ChildIDs = []accessibility.NodeID{}
			err = s.array(func() error {
				id, err := s.text()
				n.ChildIDs = append(n.ChildIDs, accessibility.NodeID(id))
				return err
			})
		case "backendDOMNodeId":
			if s.null() {
				return nil
			}
			var v []byte
			if v, err = s.scalar(); err == nil {
				var id int64
				id, err = strconv.ParseInt(string(v), 10, 64)
				n.BackendDOMNodeID = cdp.BackendNodeID(id)
			}
		default:
			err = s.skip()
		}
		return err
	})
}
