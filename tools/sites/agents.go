package sites

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// AgentsMD is a site's AGENTS.md when it has none (agentFiles): the rules
// an agent needs, for agents that read a site over plain HTTP.
const AgentsMD = `# Using this tool site

This site is a set of Markdown pages. Some pages list, in their frontmatter, commands you may run.

- Read a page: ` + "`GET /{path}`" + ` (the file; {path}/README.md for a directory; {path}.md). Start at ` + "`/`" + `.
- Run a command a page allows: ` + "`POST /{path}`" + ` with ` + "`{\"command\": [\"wc\", \"-l\", \"data.csv\"]}`" + `,
  sent as ` + "`Content-Type: application/json`" + `. The answer is ` + "`{\"stdout\", \"stderr\", \"returncode\"}`" + `.
- A page's ` + "`tools`" + ` list holds argv patterns: a string must match exactly; ` + "`{}`" + ` is one argument of any
  value; ` + "`{regex: \"...\"}`" + ` one argument matching the regex; a final ` + "`\";\"`" + ` forbids more arguments.
- Commands run in the page's directory, without a shell: no pipes, redirections, globs or variables of yours.
  Arguments may not be absolute paths or contain ` + "`..`" + `.
- Where a pattern has ` + "`$NAME`" + `, send it literally: the server fills it in from its own configuration.
- ` + "`{key}`" + ` in a command is replaced by ` + "`args.key`" + ` from the request body.
- Errors: 400 the request is malformed, 401 the server wants a bearer token, 403 the command is not allowed by
  the page (a server may be set to answer 400) or has a forbidden argument or address, 404 no such page,
  408 the command timed out (and was killed), 413 the request is too large, 415 the body was not sent as JSON,
  502 the network request of ` + "`curl`" + ` failed.
- Output over the server's cap comes back cut, head and tail kept with a notice. Send ` + "`Prefer: handling=strict`" + `
  to get 413 instead, with none of the output.
`

// indexHTML is a site's index.html when it has none (agentFiles); it
// embeds AGENTS.md so that an agent fetching it learns the rules at once.
func indexHTML(agents string) string {
	return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tool site</title></head>\n<body>\n" +
		"<p>This is a tool site: <a href=\"/README.md\">start at README.md</a>.</p>\n<pre id=\"agents\">" + html.EscapeString(agents) + "</pre>\n</body></html>\n"
}

// agentFileNames are the files agentFiles gives a site that lacks them,
// in the order they are written.
var agentFileNames = []string{"AGENTS.md", "index.html"}

func agentFileBody(name string) []byte {
	if name == "AGENTS.md" {
		return []byte(AgentsMD)
	}
	return []byte(indexHTML(AgentsMD))
}

// agentFiles gives the site AGENTS.md and index.html where it has none,
// and says so in one line of the log: an existing file is never touched;
// a missing one is written into the directory, or, where it cannot be
// written (a read-only directory or mount: errcode.PermissionDenied) or
// is not the daemon's to write (a directory holding the kubelet's "..data"
// link, a ConfigMap or Secret volume whose files only the kubelet writes),
// served from memory, as it would read written (Resolve, Read). The
// missing files are written all or none: when one fails, those this call
// wrote are removed, and all are served from memory (a directory that
// cannot be written) or the start fails (any other failure, such as a full
// disk). With noInit nothing is written or served. It returns the files
// served from memory, by name.
func agentFiles(ws fsops.Workspace, noInit bool, log *slog.Logger) (map[string][]byte, error) {
	var present, missing []string
	for _, name := range agentFileNames {
		ok, err := ws.Exists(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if ok {
			present = append(present, name)
		} else {
			missing = append(missing, name)
		}
	}
	line := func(msg string, args ...any) {
		log.Info(msg, append([]any{"dir", ws.Root(), "present", present}, args...)...)
	}
	switch {
	case len(missing) == 0:
		line("site: AGENTS.md and index.html are the site's own")
		return nil, nil
	case noInit:
		line("site: the missing agent files are neither written nor served (no-init)", "missing", missing)
		return nil, nil
	}
	why := ""
	if fi, err := ws.Lstat("..data"); err == nil && fi.Mode&fs.ModeSymlink != 0 {
		why = "the directory holds the kubelet's ..data link (a ConfigMap or Secret volume, whose files only the kubelet writes)"
	} else {
		var written []string
		for _, name := range missing {
			err := ws.WriteFile(name, agentFileBody(name))
			if err == nil {
				written = append(written, name)
				continue
			}
			// All or none: undo this call's writes.
			var undo []error
			for _, w := range written {
				if rerr := ws.Remove(w, fsops.RemoveOptions{}); rerr != nil {
					undo = append(undo, fmt.Errorf("removing the %s just written: %w", w, rerr))
				}
			}
			if errcode.Of(err) != errcode.PermissionDenied || len(undo) > 0 {
				return nil, fmt.Errorf("writing %s: %w", name, errors.Join(append([]error{err}, undo...)...))
			}
			why = fmt.Sprintf("the directory cannot be written (%s: %s)", name, errcode.Sentence(err))
			break
		}
		if why == "" {
			line("site: wrote the missing agent files into the site", "written", written)
			return nil, nil
		}
	}
	mem := make(map[string][]byte, len(missing))
	for _, name := range missing {
		mem[name] = agentFileBody(name)
	}
	line("site: serving the missing agent files from memory", "from_memory", missing, "why", why)
	return mem, nil
}

// wantsHTML reports whether a GET of / comes from a browser.
func wantsHTML(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "text/html")
}

// serveOverview is the browser's view of /: the README rendered, then every
// page with the tools it lists.
func (s *Site) serveOverview(w http.ResponseWriter, r *http.Request) {
	_, readme, err := s.ReadPage(r.Context(), "README.md")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, body, _ := ParseFrontmatter(readme)
	if body == nil {
		body = readme
	}
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tool site</title>\n" +
		"<style>body{font:16px/1.5 system-ui,sans-serif;max-width:50em;margin:2em auto;padding:0 1em}pre,code{background:#f4f4f4}pre{padding:.5em;overflow:auto}</style>\n" +
		"</head><body>\n")
	b.WriteString(renderMarkdown(string(body)))
	b.WriteString("<h2>Pages and their tools</h2>\n<ul>\n")
	// Every page is judged, by one judge for the request: the
	// directories the pages share are judged once, not once a page.
	judge := new(opfile.Judge)
	for _, p := range s.pageList(r.Context()) {
		fmt.Fprintf(&b, "<li><a href=\"/%s\">%s</a>", html.EscapeString(p), html.EscapeString(p))
		specs, err := s.specs(p, judge)
		switch {
		case err != nil && !strings.Contains(err.Error(), "declares no tools"):
			fmt.Fprintf(&b, " — <em>%s</em>", html.EscapeString(err.Error()))
		case len(specs) > 0:
			b.WriteString("<ul>")
			for _, sp := range specs {
				fmt.Fprintf(&b, "<li><code>%s</code></li>", html.EscapeString(sp.String()))
			}
			b.WriteString("</ul>")
		}
		b.WriteString("</li>\n")
	}
	b.WriteString("</ul>\n</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(b.String()))
}

// pageList is every Markdown page of the site (at most 1000), those
// served from memory (agentFiles) among them. A site
// mounted from a Kubernetes ConfigMap holds each page three times: the
// kubelet's timestamped directory and its "..data" link (names that begin
// with "..") hold the files, and each page's own name is a link through
// "..data": the page is listed once, by its own name.
func (s *Site) pageList(ctx context.Context) []string {
	found, err := s.ws.Search(ctx, ".", "**/*.md", fsops.SearchOptions{})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(found)+len(s.mem))
	onDisk := map[string]bool{}
	for _, f := range found {
		f = strings.TrimPrefix(f, "./")
		if kubeletEntry(f) {
			continue
		}
		onDisk[f] = true
		out = append(out, f)
	}
	// The pages served from memory (agentFiles), as if written.
	for name := range s.mem {
		if path.Ext(name) == ".md" && !onDisk[name] {
			out = append(out, name)
		}
	}
	return out[:min(len(out), s.opts.MaxListItems)]
}

// mdPatterns are renderMarkdown's inline patterns (links, code, bold),
// compiled on the first overview rendered rather than at every daemon's
// start (issue 34: what a feature needs is paid at its first use).
var mdPatterns = sync.OnceValue(func() (p struct{ link, code, strong *regexp.Regexp }) {
	p.link = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`)
	p.code = regexp.MustCompile("`([^`]+)`")
	p.strong = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	return p
})

// renderMarkdown is a small Markdown renderer for the overview: headings,
// paragraphs, lists, fenced code, inline code, bold and links (http, https
// and relative only). Everything is escaped first.
func renderMarkdown(md string) string {
	var b strings.Builder
	pat := mdPatterns()
	inline := func(s string) string {
		s = html.EscapeString(s)
		s = pat.code.ReplaceAllString(s, "<code>$1</code>")
		s = pat.strong.ReplaceAllString(s, "<strong>$1</strong>")
		return pat.link.ReplaceAllStringFunc(s, func(m string) string {
			p := pat.link.FindStringSubmatch(m)
			href := p[2]
			if strings.Contains(href, ":") && !strings.HasPrefix(href, "http://") && !strings.HasPrefix(href, "https://") {
				return p[1] // javascript:, data: and the like are not links
			}
			return `<a href="` + href + `">` + p[1] + `</a>`
		})
	}
	lines := strings.Split(md, "\n")
	inList, inCode := false, false
	var para []string
	flush := func() {
		if len(para) > 0 {
			b.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>\n")
			para = nil
		}
		if inList {
			b.WriteString("</ul>\n")
			inList = false
		}
	}
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "```"):
			if inCode {
				b.WriteString("</pre>\n")
			} else {
				flush()
				b.WriteString("<pre>")
			}
			inCode = !inCode
		case inCode:
			b.WriteString(html.EscapeString(l) + "\n")
		case t == "":
			flush()
		case strings.HasPrefix(t, "#"):
			flush()
			n := len(t) - len(strings.TrimLeft(t, "#"))
			n = min(n, 6)
			fmt.Fprintf(&b, "<h%d>%s</h%d>\n", n, inline(strings.TrimSpace(t[n:])), n)
		case strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* "):
			if len(para) > 0 {
				b.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>\n")
				para = nil
			}
			if !inList {
				b.WriteString("<ul>\n")
				inList = true
			}
			b.WriteString("<li>" + inline(t[2:]) + "</li>\n")
		default:
			para = append(para, t)
		}
	}
	if inCode {
		b.WriteString("</pre>\n")
	}
	flush()
	return b.String()
}

// kubeletEntry reports whether the page path p lies under a directory
// the kubelet names (opfile.KubeletName): the "..data" and timestamped
// directories of a ConfigMap or Secret volume. The overview and glob
// leave such paths out.
func kubeletEntry(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if opfile.KubeletName(c) {
			return true
		}
	}
	return false
}
