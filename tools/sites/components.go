package sites

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// Bounds of component blocks, as the reference has them.
const (
	DefaultComponentTimeout = 5 * time.Second
	MaxComponents           = 20
	componentParallelism    = 4
	componentErrMax         = 256
)

// component is one ```component fenced block of a page: its byte range and
// its command line.
type component struct {
	start, end int // the whole fence, closing line included
	line       string
}

// findComponents returns the page's component blocks, in order. Only fences
// whose info string is exactly "component" count.
func findComponents(body []byte) []component {
	var out []component
	lines := bytes.SplitAfter(body, []byte("\n"))
	off := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(string(l))
		if strings.HasPrefix(trimmed, "```") && strings.TrimSpace(strings.TrimLeft(trimmed, "`")) == "component" {
			fence := trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			start := off
			var cmd []string
			j := i + 1
			off2 := off + len(l)
			closed := false
			for ; j < len(lines); j++ {
				lj := strings.TrimSpace(string(lines[j]))
				off2 += len(lines[j])
				if strings.HasPrefix(lj, fence) && strings.Trim(lj, "`") == "" {
					closed = true
					break
				}
				if lj != "" {
					cmd = append(cmd, lj)
				}
			}
			if !closed {
				break
			}
			out = append(out, component{start: start, end: off2, line: strings.Join(cmd, " ")})
			for k := i; k <= j; k++ {
				off += len(lines[k])
			}
			i = j
			continue
		}
		off += len(l)
	}
	return out
}

// splitWords splits a component's command line into argv: words separated
// by blanks, '…' and "…" quoting taken literally. Shell operators are not
// shell operators here and are refused, so nobody writes a pipe believing
// it works.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c quote", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.IndexByte("|&;<>`$(){}\\", c) >= 0:
			return nil, fmt.Errorf("%q: component commands run without a shell; write one command with its arguments", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// noCommandsKey marks the context of a reader that may not run commands.
type noCommandsKey struct{}

// WithoutCommands returns ctx for a reader whose token may not run commands
// (read-only, or "exec": false): the pages it reads show their component
// blocks as not run, since running them would run commands on its behalf.
func WithoutCommands(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCommandsKey{}, true)
}

// NotRunNotice replaces a component block for a reader that may not run
// commands (WithoutCommands).
const NotRunNotice = "[component not run: this token may not run commands]"

// renderComponents runs the page's component blocks (validated against its
// tools like any POST, 5 s each, 4 at a time, at most 20) and replaces each
// block by its stdout, or by "[eval error: ...]"; for a reader that may not
// run commands, by NotRunNotice, and nothing runs.
func (s *Site) renderComponents(ctx context.Context, page string, data []byte) []byte {
	comps := findComponents(data)
	if len(comps) == 0 {
		return data
	}
	out := make([]string, len(comps))
	sem := make(chan struct{}, componentParallelism)
	var wg sync.WaitGroup
	noRun, _ := ctx.Value(noCommandsKey{}).(bool)
	for i, c := range comps {
		if noRun {
			out[i] = NotRunNotice
			continue
		}
		if i >= MaxComponents {
			out[i] = fmt.Sprintf("[eval error: more than %d component blocks on this page]", MaxComponents)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = s.evalComponent(ctx, page, c.line)
		}()
	}
	wg.Wait()
	var b bytes.Buffer
	prev := 0
	for i, c := range comps {
		b.Write(data[prev:c.start])
		b.WriteString(out[i])
		if !strings.HasSuffix(out[i], "\n") {
			b.WriteByte('\n')
		}
		prev = c.end
	}
	b.Write(data[prev:])
	return b.Bytes()
}

func (s *Site) evalComponent(ctx context.Context, page, line string) string {
	argv, err := splitWords(line)
	if err == nil && len(argv) == 0 {
		err = errors.New("empty command")
	}
	if err != nil {
		return evalError(err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ComponentTimeout)
	defer cancel()
	res, err := s.Run(ctx, "/"+page, ActionRequest{Command: argv})
	var te *TimeoutError
	switch {
	case errors.As(err, &te) || ctx.Err() != nil:
		return evalError(fmt.Sprintf("timed out after %s", s.opts.ComponentTimeout))
	case err != nil:
		return evalError(err.Error())
	case res.Returncode != 0:
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = strings.TrimSpace(res.Stdout)
		}
		return evalError(fmt.Sprintf("exit %d — %s", res.Returncode, msg))
	}
	return res.Stdout
}

func evalError(msg string) string {
	return "[eval error: " + clip.String(msg, componentErrMax) + "]"
}
