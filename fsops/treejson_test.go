package fsops

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// treeJSONEncoder is TreeJSON through encoding/json (each node's
// MarshalJSON, indented by the encoder): the definition TreeJSON is held to.
func treeJSONEncoder(nodes []TreeNode) string {
	if nodes == nil {
		nodes = []TreeNode{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(nodes); err != nil {
		return "[]"
	}
	return unescapeLineSeps(strings.TrimSuffix(buf.String(), "\n"))
}

var treeNames = []string{"a", "", "x y", `q"uote`, `back\slash`, "<html>&", "tab\there", "nl\nx", "\x00\x1f", "\xff\xfe", "é", "日本",
	"\u2028", "a\u2029b", `\u2028`, "emoji 😀", "\x7f", "node_modules"}

func randomTree(r *rand.Rand, depth int) []TreeNode {
	n := r.IntN(5)
	if depth == 0 && n == 0 {
		n = 1
	}
	var nodes []TreeNode
	for range n {
		name := treeNames[r.IntN(len(treeNames))] + treeNames[r.IntN(len(treeNames))]
		if depth < 3 && r.IntN(3) == 0 {
			var kids []TreeNode
			if r.IntN(4) > 0 {
				kids = randomTree(r, depth+1)
			}
			if kids == nil {
				kids = []TreeNode{}
			}
			nodes = append(nodes, TreeNode{Name: name, Type: "directory", Children: kids})
			continue
		}
		size := r.Int64N(1 << 40)
		node := TreeNode{Name: name, Type: "file", Size: &size}
		if r.IntN(10) == 0 {
			node.Size = nil
		}
		nodes = append(nodes, node)
	}
	return nodes
}

// TestTreeJSONMatchesEncoder: TreeJSON writes what encoding/json writes
// for the same nodes, byte for byte, on random trees of awkward names.
func TestTreeJSONMatchesEncoder(t *testing.T) {
	if got := TreeJSON(nil); got != "[]" {
		t.Errorf("TreeJSON(nil) = %q", got)
	}
	if got, want := TreeJSON([]TreeNode{{Name: "d", Type: "directory", Children: []TreeNode{}}}), treeJSONEncoder([]TreeNode{{Name: "d", Type: "directory", Children: []TreeNode{}}}); got != want {
		t.Errorf("empty directory:\n%s\nwant\n%s", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		nodes := randomTree(r, 0)
		if got, want := TreeJSON(nodes), treeJSONEncoder(nodes); got != want {
			t.Fatalf("tree %d:\n%s\nwant\n%s", i, got, want)
		}
	}
}

func FuzzTreeJSON(f *testing.F) {
	for _, n := range treeNames {
		f.Add(n, n)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		size := int64(len(a))
		nodes := []TreeNode{{Name: a, Type: "directory", Children: []TreeNode{{Name: b, Type: "file", Size: &size}}}, {Name: b, Type: "file"}}
		if got, want := TreeJSON(nodes), treeJSONEncoder(nodes); got != want {
			t.Fatalf("%q %q:\n%s\nwant\n%s", a, b, got, want)
		}
	})
}
