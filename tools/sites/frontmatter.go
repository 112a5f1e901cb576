package sites

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// ErrNoFrontmatter: the page declares no tools (a 400 on POST).
var ErrNoFrontmatter = errors.New("the page has no frontmatter (--- YAML --- or +++ TOML +++) declaring tools")

// FrontmatterError is a frontmatter the page author got wrong: which line
// (1-based, in the page) and what.
type FrontmatterError struct {
	Line int
	Msg  string
}

func (e *FrontmatterError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("frontmatter line %d: %s", e.Line, e.Msg)
	}
	return "frontmatter: " + e.Msg
}

// MaxSpecs bounds the tool specs of one page and MaxSpecParts the parts of
// one spec, so a page cannot make matching costly.
const (
	MaxSpecs     = 256
	MaxSpecParts = 64
	maxRegexLen  = 1024
	// MaxTOMLNesting bounds how deep arrays and inline tables nest in a
	// TOML frontmatter (a tools list needs 3: tools = [[ {regex = ".."} ]]).
	// go-toml's parser takes time and memory that grow faster than the
	// depth (a 1 MiB page of "[" took 9 s and hundreds of MB), so a deeper
	// frontmatter is refused before it is parsed; YAML's parser stops at
	// its own bound (10000 levels, in milliseconds).
	MaxTOMLNesting = 32
)

// ParseFrontmatter returns the tool specs a page declares. The frontmatter
// is YAML between "---" lines or TOML between "+++" lines at the very start
// of the page (leading whitespace ignored); only its `tools` key is read. A
// page without frontmatter is ErrNoFrontmatter; one whose `tools` is not a
// list of lists of strings, {} and {regex: "..."} (any other key, a bad
// regex) is a *FrontmatterError naming the line, and the whole page is
// refused. body is the rest of the page.
func ParseFrontmatter(page []byte) (specs []Spec, body []byte, err error) {
	trimmed := bytes.TrimLeft(page, " \t\r\n")
	skipped := bytes.Count(page[:len(page)-len(trimmed)], []byte("\n"))
	var fence string
	switch {
	case bytes.HasPrefix(trimmed, []byte("---")):
		fence = "---"
	case bytes.HasPrefix(trimmed, []byte("+++")):
		fence = "+++"
	default:
		return nil, page, ErrNoFrontmatter
	}
	first := bytes.IndexByte(trimmed, '\n')
	if first < 0 || strings.TrimSpace(string(trimmed[:first])) != fence {
		return nil, page, ErrNoFrontmatter
	}
	rest := trimmed[first+1:]
	end, after := -1, 0
	for off := 0; off <= len(rest); {
		nl := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		if nl >= 0 {
			line = rest[off : off+nl]
		}
		if strings.TrimSpace(string(line)) == fence {
			end = off
			after = off + len(line)
			if nl >= 0 {
				after++
			}
			break
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
	if end < 0 {
		return nil, page, &FrontmatterError{Line: skipped + 1, Msg: fmt.Sprintf("the %s fence is not closed", fence)}
	}
	src := rest[:end]
	base := skipped + 1 // the line of the opening fence; src starts on the next
	if fence == "---" {
		specs, err = parseYAML(src, base)
	} else {
		specs, err = parseTOML(src, base)
	}
	return specs, rest[after:], err
}

func parseYAML(src []byte, base int) ([]Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, &FrontmatterError{Line: base + yamlErrLine(err), Msg: "invalid YAML: " + yamlErrMsg(err)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &FrontmatterError{Line: base + root.Line, Msg: "the frontmatter must be a mapping with a `tools` key"}
	}
	var list *yaml.Node
	keyLine := 0
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "tools" {
			continue
		}
		if list != nil {
			// YAML says keys are unique, but parsers differ on a repeated
			// one: this one would read the first, others (and a reader of
			// the page) the last. Which commands a page allows must not
			// depend on the reader, so the page is refused, as TOML does.
			return nil, &FrontmatterError{Line: base + root.Content[i].Line, Msg: fmt.Sprintf("`tools` is defined twice (lines %d and %d); keep one", keyLine, base+root.Content[i].Line)}
		}
		list, keyLine = root.Content[i+1], base+root.Content[i].Line
	}
	if list != nil {
		if list.Kind != yaml.SequenceNode {
			return nil, &FrontmatterError{Line: base + list.Line, Msg: "`tools` must be a list of commands, each a list such as [ls, {}]"}
		}
		var specs []Spec
		for _, item := range list.Content {
			if len(specs) == MaxSpecs {
				return nil, &FrontmatterError{Line: base + item.Line, Msg: fmt.Sprintf("more than %d tools", MaxSpecs)}
			}
			s, err := yamlSpec(item, base)
			if err != nil {
				return nil, err
			}
			specs = append(specs, s)
		}
		return specs, nil
	}
	return nil, nil
}

func yamlSpec(item *yaml.Node, base int) (Spec, error) {
	line := base + item.Line
	if item.Kind != yaml.SequenceNode || len(item.Content) == 0 {
		return Spec{}, &FrontmatterError{Line: line, Msg: "a tool must be a non-empty list such as [cat, {}]"}
	}
	s := Spec{Line: line}
	for j, el := range item.Content {
		l := base + el.Line
		switch el.Kind {
		case yaml.ScalarNode:
			if el.Tag == "!!null" {
				return Spec{}, &FrontmatterError{Line: l, Msg: "an empty element; write {} for a placeholder"}
			}
			if el.Value == ";" && j == len(item.Content)-1 && j > 0 {
				s.NoExtra = true
				continue
			}
			s.Parts = append(s.Parts, Part{Literal: el.Value})
		case yaml.MappingNode:
			obj := map[string]string{}
			for k := 0; k+1 < len(el.Content); k += 2 {
				if el.Content[k+1].Kind != yaml.ScalarNode {
					return Spec{}, &FrontmatterError{Line: l, Msg: fmt.Sprintf("the value of %q must be a string", el.Content[k].Value)}
				}
				obj[el.Content[k].Value] = el.Content[k+1].Value
			}
			p, err := objectPart(obj, l)
			if err != nil {
				return Spec{}, err
			}
			s.Parts = append(s.Parts, p)
		default:
			return Spec{}, &FrontmatterError{Line: l, Msg: "an element must be a string, {} or {regex: \"...\"}"}
		}
	}
	if len(s.Parts) > MaxSpecParts {
		return Spec{}, &FrontmatterError{Line: line, Msg: fmt.Sprintf("more than %d elements", MaxSpecParts)}
	}
	return s, nil
}

// objectPart is {} or {regex: "..."}; any other key refuses the page.
func objectPart(obj map[string]string, line int) (Part, error) {
	if len(obj) == 0 {
		return Part{Any: true}, nil
	}
	for k := range obj {
		if k != "regex" {
			return Part{}, &FrontmatterError{Line: line, Msg: fmt.Sprintf("unknown key %q in a placeholder; use {} or {regex: \"...\"}", k)}
		}
	}
	src := obj["regex"]
	if len(src) > maxRegexLen {
		return Part{}, &FrontmatterError{Line: line, Msg: fmt.Sprintf("a regex longer than %d bytes", maxRegexLen)}
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return Part{}, &FrontmatterError{Line: line, Msg: fmt.Sprintf("invalid regex %q: %v", src, err)}
	}
	return Part{Regex: re}, nil
}

// yamlLineRe finds the line a YAML error names; compiled on the first
// such error, not at start.
var yamlLineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+)`) })

func yamlErrLine(err error) int {
	m := yamlLineRe().FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n := 0
	fmt.Sscan(m[1], &n)
	return n
}

func yamlErrMsg(err error) string {
	return strings.TrimPrefix(yamlLineRe().ReplaceAllString(err.Error(), ""), "yaml: ")
}

func parseTOML(src []byte, base int) ([]Spec, error) {
	if line, ok := tomlNestingOK(src); !ok {
		return nil, &FrontmatterError{Line: base + line, Msg: fmt.Sprintf("arrays and tables nested deeper than %d levels", MaxTOMLNesting)}
	}
	var doc struct {
		Tools []any `toml:"tools"`
	}
	if err := toml.Unmarshal(src, &doc); err != nil {
		line := 0
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ = de.Position()
		}
		return nil, &FrontmatterError{Line: base + line, Msg: "invalid TOML: " + err.Error()}
	}
	// go-toml does not keep positions of values: a pattern's line is found
	// by looking for the tools key, which is good enough to point at.
	line := base + 1 + bytes.Count(src[:max(0, bytes.Index(src, []byte("tools")))], []byte("\n"))
	var specs []Spec
	for _, item := range doc.Tools {
		if len(specs) == MaxSpecs {
			return nil, &FrontmatterError{Line: line, Msg: fmt.Sprintf("more than %d tools", MaxSpecs)}
		}
		arr, ok := item.([]any)
		if !ok || len(arr) == 0 {
			return nil, &FrontmatterError{Line: line, Msg: "a tool must be a non-empty array such as [\"cat\", {}]"}
		}
		s := Spec{Line: line}
		for j, el := range arr {
			switch v := el.(type) {
			case string:
				if v == ";" && j == len(arr)-1 && j > 0 {
					s.NoExtra = true
					continue
				}
				s.Parts = append(s.Parts, Part{Literal: v})
			case map[string]any:
				obj := map[string]string{}
				for k, val := range v {
					str, ok := val.(string)
					if !ok {
						return nil, &FrontmatterError{Line: line, Msg: fmt.Sprintf("the value of %q must be a string", k)}
					}
					obj[k] = str
				}
				p, err := objectPart(obj, line)
				if err != nil {
					return nil, err
				}
				s.Parts = append(s.Parts, p)
			default:
				return nil, &FrontmatterError{Line: line, Msg: "an element must be a string, {} or {regex = \"...\"}"}
			}
		}
		if len(s.Parts) > MaxSpecParts {
			return nil, &FrontmatterError{Line: line, Msg: fmt.Sprintf("more than %d elements", MaxSpecParts)}
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// tomlNestingOK scans TOML for the depth of its arrays and inline tables
// ([ and { outside strings and comments) and reports whether it stays
// within MaxTOMLNesting, else the line (1-based, in src) where it passed.
// It does not check anything else; the parser does.
func tomlNestingOK(src []byte) (line int, ok bool) {
	depth, line := 0, 1
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '\n':
			line++
		case '#':
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			q := string(c)
			if bytes.HasPrefix(src[i:], []byte(q+q+q)) {
				q += q + q
			}
			j := i + len(q)
			for j < len(src) && !bytes.HasPrefix(src[j:], []byte(q)) {
				if c == '"' && src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					line++
				}
				j++
			}
			i = j + len(q) - 1
		case '[', '{':
			if depth++; depth > MaxTOMLNesting {
				return line, false
			}
		case ']', '}':
			depth--
		}
	}
	return 0, true
}
