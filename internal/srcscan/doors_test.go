package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The four things the doors table of docs/architecture.md allows, and how
// the scan recognizes each in a file's source. The doors are fsops (files),
// sandbox (processes) and netguard (outbound network); every other file
// that does one of these is an exception the table names with its reason.
const (
	capFiles     = "files"     // opens, creates, changes, removes, lists or looks up a path
	capProcesses = "processes" // starts a program
	capNetwork   = "network"   // dials out, or builds what dials out
	capProc      = "/proc"     // names a /proc path
)

var capabilities = []string{capFiles, capProcesses, capNetwork, capProc}

// doorCalls are the functions (and variables) whose use counts as one of
// the capabilities, by import path and name. A use is any reference, a
// call or a function value handed on (os.ReadFile as an argument).
var doorCalls = func() map[string]string {
	m := map[string]string{}
	add := func(pkg, c string, names string) {
		for _, n := range strings.Fields(names) {
			m[pkg+"."+n] = c
		}
	}
	add("os", capFiles, "Open OpenFile OpenRoot OpenInRoot ReadFile WriteFile Create CreateTemp "+
		"Mkdir MkdirAll MkdirTemp Remove RemoveAll Rename Symlink Link Chmod Chown Lchown Chtimes "+
		"Truncate ReadDir Readlink Stat Lstat DirFS CopyFS")
	add("io/ioutil", capFiles, "ReadFile WriteFile ReadDir TempFile TempDir")
	add("path/filepath", capFiles, "Walk WalkDir Glob EvalSymlinks")
	for _, sys := range []string{"syscall", "golang.org/x/sys/unix"} {
		add(sys, capFiles, "Open Openat Openat2 Creat Mkdir Mkdirat Unlink Unlinkat Rmdir "+
			"Rename Renameat Renameat2 Symlink Symlinkat Link Linkat Chmod Fchmodat Chown Fchownat "+
			"Lchown Utimes UtimesNano Utimensat Truncate Readlink Readlinkat Mknod Mknodat "+
			"Stat Lstat Fstatat Statx "+
			// By path too: mounts, the root and working directory, access
			// checks, FIFOs, extended attributes, watches, handles.
			"Mount Unmount PivotRoot Chroot Chdir Access Faccessat Faccessat2 Mkfifo Mkfifoat "+
			"Statfs Getxattr Lgetxattr Setxattr Lsetxattr Removexattr Lremovexattr Listxattr Llistxattr "+
			"InotifyAddWatch FanotifyMark NameToHandleAt OpenByHandleAt")
		add(sys, capProcesses, "Exec ForkExec StartProcess")
		// A socket made by hand, its connect, a datagram sent to an
		// address.
		add(sys, capNetwork, "Socket Connect Sendto")
	}
	add("os", capFiles, "Chdir")
	add("os", capProcesses, "StartProcess")
	add("os/exec", capProcesses, "Command CommandContext")
	// LookPath looks a program up on PATH, file by file.
	add("os/exec", capFiles, "LookPath")
	add("github.com/chromedp/chromedp", capProcesses, "NewExecAllocator")
	// A browser reached by its DevTools URL.
	add("github.com/chromedp/chromedp", capNetwork, "NewRemoteAllocator")
	add("net", capNetwork, "Dial DialTimeout DialTCP DialUDP DialIP DialUnix")
	// DNS: a lookup is a query sent out (to the resolver, and on to any
	// name's servers); a packet socket sends to any address it is given.
	add("net", capNetwork, "LookupHost LookupIP LookupAddr LookupCNAME LookupMX LookupNS LookupTXT LookupSRV LookupPort DefaultResolver "+
		"ListenPacket ListenUDP ListenIP ListenMulticastUDP ListenUnixgram")
	add("crypto/tls", capNetwork, "Dial DialWithDialer")
	add("crypto/tls", capFiles, "LoadX509KeyPair")
	add("net/http", capNetwork, "Get Head Post PostForm DefaultClient DefaultTransport")
	// A file server over a directory by path, a file served by path.
	add("net/http", capFiles, "Dir ServeFile")
	// A reverse proxy without a Transport dials with DefaultTransport.
	add("net/http/httputil", capNetwork, "NewSingleHostReverseProxy")
	add("golang.org/x/crypto/ssh", capNetwork, "Dial")
	add("github.com/gorilla/websocket", capNetwork, "DefaultDialer")
	return m
}()

// doorTypes are the types whose construction (a composite literal, new(T)
// or a variable declared of the type) counts as dialing out, or starting
// a process: each dials whatever address (or runs whatever program) it is
// later given.
var doorTypes = map[string]string{
	"net.Dialer":                          capNetwork,
	"net.Resolver":                        capNetwork,
	"crypto/tls.Dialer":                   capNetwork,
	"net/http.Client":                     capNetwork,
	"net/http.Transport":                  capNetwork,
	"github.com/gorilla/websocket.Dialer": capNetwork,
	// Each falls back to net/http's default, which dials anything, when
	// its Transport or HTTPClient is left nil.
	"net/http/httputil.ReverseProxy":                                       capNetwork,
	"github.com/modelcontextprotocol/go-sdk/mcp.StreamableClientTransport": capNetwork,
	"github.com/modelcontextprotocol/go-sdk/mcp.SSEClientTransport":        capNetwork,
	// A command built by hand starts as exec.Command's does.
	"os/exec.Cmd": capProcesses,
}

// doorUse is one file's first use of one capability.
type doorUse struct {
	pos  token.Position
	what string
}

// doorUses scans every non-test Go file of the module and returns, per
// file (slash-separated, relative to the root) and capability, the first
// use found.
func doorUses(t *testing.T) (map[string]map[string]doorUse, int) {
	uses := map[string]map[string]doorUse{}
	files := 0
	Files(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		files++
		if u := fileDoorUses(fset, f); len(u) > 0 {
			uses[filepath.ToSlash(rel)] = u
		}
	})
	return uses, files
}

// fileDoorUses is the first use of each capability in one file.
func fileDoorUses(fset *token.FileSet, f *ast.File) map[string]doorUse {
	uses := map[string]doorUse{}
	names := ImportNames(f)
	qualified := func(e ast.Expr) string {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || names[id.Name] == "" {
			return ""
		}
		return names[id.Name] + "." + sel.Sel.Name
	}
	found := func(c string, n ast.Node, what string) {
		if _, ok := uses[c]; !ok {
			uses[c] = doorUse{pos: fset.Position(n.Pos()), what: what}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if q := qualified(n); doorCalls[q] != "" {
				found(doorCalls[q], n, q)
			}
		case *ast.CompositeLit:
			if q := qualified(n.Type); doorTypes[q] != "" {
				found(doorTypes[q], n, q+"{…}")
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if q := qualified(n.Args[0]); doorTypes[q] != "" {
					found(doorTypes[q], n, "new("+q+")")
				}
			}
		case *ast.ValueSpec:
			if q := qualified(n.Type); doorTypes[q] != "" {
				found(doorTypes[q], n, "var "+q)
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil && (s == "/proc" || strings.HasPrefix(s, "/proc/")) {
					found(capProc, n, strconv.Quote(s))
				}
			}
		}
		return true
	})
	return uses
}

// TestDoorsAllowlist holds the doors table of docs/architecture.md (the
// table headed "| where | may | why |") to the code, both ways: every
// non-test Go file of the module that touches files, starts a process,
// dials out or names a /proc path is covered by a row that allows it (a
// row names a file, or a folder ending in "/" for everything below it),
// and every row's every capability is used by a file it covers, so the
// table lists no one who does not need the door it names. A file that
// fails here goes through its door (fsops, sandbox, netguard) or, when it
// is the daemon's own business (its config, keys, log), gets a row that
// says why.
func TestDoorsAllowlist(t *testing.T) {
	type row struct {
		line  int
		names []string
		may   []string
	}
	var rows []row
	seen := map[string]int{}
	for _, r := range docTable(t, architecture, "| where | may | why |") {
		names, may, why := quoted(r.cells[0]), words(r.cells[1]), r.cells[2]
		if len(names) == 0 {
			t.Errorf("docs/architecture.md:%d: the doors table's row names no file or folder in backticks", r.line)
		}
		if len(may) == 0 || why == "" {
			t.Errorf("docs/architecture.md:%d: a row of the doors table says what it may do and why", r.line)
		}
		for _, c := range may {
			if !slices.Contains(capabilities, c) {
				t.Errorf("docs/architecture.md:%d: %q is none of %v", r.line, c, capabilities)
			}
		}
		for _, n := range names {
			if l, ok := seen[n]; ok {
				t.Errorf("docs/architecture.md:%d: %s has a row already (line %d)", r.line, n, l)
			}
			seen[n] = r.line
			if _, err := os.Stat(filepath.Join("../..", n)); err != nil {
				t.Errorf("docs/architecture.md:%d: %s does not exist", r.line, n)
			}
		}
		rows = append(rows, row{r.line, names, may})
	}

	uses, files := doorUses(t)
	used := map[string]bool{} // name + " " + capability
	rels := make([]string, 0, len(uses))
	for rel := range uses {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	for _, rel := range rels {
		for _, c := range capabilities {
			u, ok := uses[rel][c]
			if !ok {
				continue
			}
			allowed := false
			for _, r := range rows {
				if !slices.Contains(r.may, c) {
					continue
				}
				for _, n := range r.names {
					if covers(n, rel) {
						allowed = true
						used[n+" "+c] = true
					}
				}
			}
			if !allowed {
				t.Errorf("%s: %s: %s outside its door; go through %s, or give %s a row in the doors table of docs/architecture.md that says why",
					u.pos, u.what, c, door(c), rel)
			}
		}
	}
	for _, r := range rows {
		for _, n := range r.names {
			for _, c := range r.may {
				if !used[n+" "+c] {
					t.Errorf("docs/architecture.md:%d: the doors table lets %s use %s, which nothing there does: drop it", r.line, n, c)
				}
			}
		}
	}
	// The scan must see the doors doing their jobs, or it sees nothing.
	for _, want := range []struct{ folder, c string }{
		{"fsops/", capFiles}, {"sandbox/", capProcesses}, {"netguard/", capNetwork},
	} {
		found := false
		for rel, byCap := range uses {
			if _, ok := byCap[want.c]; ok && covers(want.folder, rel) {
				found = true
			}
		}
		if !found {
			t.Errorf("the scan found no %s in %s; it no longer recognizes what the doors do", want.c, want.folder)
		}
	}
	if files < 200 {
		t.Errorf("scanned %d files; the module has more", files)
	}
}

func door(c string) string {
	switch c {
	case capFiles:
		return "fsops"
	case capProcesses:
		return "sandbox"
	case capNetwork:
		return "netguard"
	}
	return "the package that owns what /proc says (sandbox for its processes)"
}

// TestDoorScanSeesEveryWay: each way a file could touch a file, start a
// process or reach the network without naming one of the calls of the
// first list is still counted: a process started from an exec.Cmd built by
// hand (no exec.Command), a reverse proxy or an MCP client transport whose
// nil Transport or HTTPClient falls back to net/http's default (which dials
// anything), a DNS lookup, a packet socket that sends where it likes, a raw
// sendto, chromedp attaching to a browser by URL, a key pair, a file server
// or a mount by path, a program looked up on PATH. A snippet the scan does
// not see fails the test, so the doors table cannot be gone around by a
// form it does not know.
func TestDoorScanSeesEveryWay(t *testing.T) {
	for _, tc := range []struct {
		imports, body, want string
	}{
		{`"os/exec"`, `c := &exec.Cmd{Path: "/bin/sh"}; c.Run()`, capProcesses},
		{`"os/exec"`, `var c exec.Cmd; c.Run()`, capProcesses},
		{`"os/exec"`, `_, _ = exec.LookPath("sh")`, capFiles},
		{`"net/http/httputil"`, `_ = &httputil.ReverseProxy{}`, capNetwork},
		{`"net/http/httputil"`, `_ = httputil.NewSingleHostReverseProxy(nil)`, capNetwork},
		{`"github.com/modelcontextprotocol/go-sdk/mcp"`, `_ = &mcp.StreamableClientTransport{Endpoint: "http://x"}`, capNetwork},
		{`"github.com/modelcontextprotocol/go-sdk/mcp"`, `_ = &mcp.SSEClientTransport{Endpoint: "http://x"}`, capNetwork},
		{`"net"`, `_, _ = net.LookupHost("example.com")`, capNetwork},
		{`"net"`, `_, _ = net.DefaultResolver.LookupHost(nil, "example.com")`, capNetwork},
		{`"net"`, `r := &net.Resolver{}; _ = r`, capNetwork},
		{`"net"`, `_, _ = net.ListenPacket("udp", ":0")`, capNetwork},
		{`"net"`, `_, _ = net.ListenUDP("udp", nil)`, capNetwork},
		{`"golang.org/x/sys/unix"`, `_ = unix.Sendto(0, nil, 0, nil)`, capNetwork},
		{`"github.com/chromedp/chromedp"`, `_, _ = chromedp.NewRemoteAllocator(nil, "ws://x")`, capNetwork},
		{`"crypto/tls"`, `_, _ = tls.LoadX509KeyPair("a", "b")`, capFiles},
		{`"net/http"`, `_ = http.FileServer(http.Dir("/"))`, capFiles},
		{`"net/http"`, `http.ServeFile(nil, nil, "/etc/passwd")`, capFiles},
		{`"os"`, `_ = os.Chdir("/")`, capFiles},
		{`"golang.org/x/sys/unix"`, `_ = unix.Mount("a", "b", "tmpfs", 0, "")`, capFiles},
		{`"golang.org/x/sys/unix"`, `_ = unix.Access("/etc/shadow", 0)`, capFiles},
		{`"golang.org/x/sys/unix"`, `_ = unix.Mkfifo("/tmp/x", 0)`, capFiles},
		{`"golang.org/x/sys/unix"`, `_, _ = unix.InotifyAddWatch(0, "/", 0)`, capFiles},
		{`"syscall"`, `_ = syscall.Chroot("/")`, capFiles},
		// The forms the scan knew before, as a check of the check.
		{`"os"`, `_, _ = os.Open("x")`, capFiles},
		{`"net"`, `_ = &net.Dialer{}`, capNetwork},
	} {
		src := "package p\n\nimport " + tc.imports + "\n\nfunc f() {\n\t" + tc.body + "\n}\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if _, ok := fileDoorUses(fset, f)[tc.want]; !ok {
			t.Errorf("%s: not counted as %s", tc.body, tc.want)
		}
	}
}
