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
			"InotifyAddWatch FanotifyMark NameToHandleAt OpenByHandleAt "+
			// Accounting to a file, times of a path, the new mount API's
			// paths, and a descriptor taken from another process.
			"Acct Futimesat Lutimes Utime UtimesNanoAt MountSetattr OpenTree MoveMount Fspick "+
			"FsconfigSetPath FsconfigSetPathEmpty PidfdGetfd")
		add(sys, capProcesses, "Exec ForkExec StartProcess")
		// A socket made by hand, its connect, a datagram sent to an
		// address. (Sendmsg is not counted: it passes descriptors over
		// socket pairs, and the socket it could address elsewhere is made
		// by a call counted here.)
		add(sys, capNetwork, "Socket Connect Sendto")
		// The same calls made raw, by number (Syscall(SYS_OPENAT, ...)):
		// the number is what names them.
		add(sys, capFiles, "SYS_OPEN SYS_OPENAT SYS_OPENAT2 SYS_CREAT SYS_OPEN_BY_HANDLE_AT SYS_OPEN_TREE "+
			"SYS_MOUNT SYS_MOVE_MOUNT SYS_CHROOT SYS_PIVOT_ROOT SYS_CHDIR SYS_MKDIR SYS_MKDIRAT SYS_MKNOD SYS_MKNODAT "+
			"SYS_UNLINK SYS_UNLINKAT SYS_RMDIR SYS_RENAME SYS_RENAMEAT SYS_RENAMEAT2 SYS_SYMLINK SYS_SYMLINKAT "+
			"SYS_LINK SYS_LINKAT SYS_CHMOD SYS_FCHMODAT SYS_CHOWN SYS_LCHOWN SYS_FCHOWNAT SYS_TRUNCATE "+
			"SYS_STAT SYS_LSTAT SYS_NEWFSTATAT SYS_STATX SYS_READLINK SYS_READLINKAT SYS_PIDFD_GETFD")
		add(sys, capProcesses, "SYS_EXECVE SYS_EXECVEAT")
		add(sys, capNetwork, "SYS_SOCKET SYS_CONNECT SYS_SENDTO")
	}
	// Code loaded from a path; templates, archives and executables read
	// from a path.
	add("plugin", capFiles, "Open")
	for _, tpl := range []string{"text/template", "html/template"} {
		add(tpl, capFiles, "ParseFiles ParseGlob")
	}
	add("archive/zip", capFiles, "OpenReader")
	add("debug/elf", capFiles, "Open")
	add("debug/pe", capFiles, "Open")
	add("debug/macho", capFiles, "Open OpenFat")
	add("debug/plan9obj", capFiles, "Open")
	add("debug/buildinfo", capFiles, "ReadFile")
	add("os", capFiles, "Chdir")
	add("os", capProcesses, "StartProcess")
	add("os/exec", capProcesses, "Command CommandContext")
	// LookPath looks a program up on PATH, file by file.
	add("os/exec", capFiles, "LookPath")
	add("github.com/chromedp/chromedp", capProcesses, "NewExecAllocator")
	// A context without an allocator starts Chromium with the default
	// options when first run.
	add("github.com/chromedp/chromedp", capProcesses, "NewContext")
	// A browser reached by its DevTools URL.
	add("github.com/chromedp/chromedp", capNetwork, "NewRemoteAllocator")
	// A pseudo-terminal opened (/dev/ptmx), a command started on one.
	add("github.com/creack/pty", capFiles, "Open")
	add("github.com/creack/pty", capProcesses, "Start StartWithSize StartWithAttrs")
	add("net", capNetwork, "Dial DialTimeout DialTCP DialUDP DialIP DialUnix")
	// DNS: a lookup is a query sent out (to the resolver, and on to any
	// name's servers); a packet socket sends to any address it is given.
	add("net", capNetwork, "LookupHost LookupIP LookupAddr LookupCNAME LookupMX LookupNS LookupTXT LookupSRV LookupPort DefaultResolver "+
		"ListenPacket ListenUDP ListenIP ListenMulticastUDP ListenUnixgram")
	add("crypto/tls", capNetwork, "Dial DialWithDialer")
	add("crypto/tls", capFiles, "LoadX509KeyPair")
	add("net/http", capNetwork, "Get Head Post PostForm DefaultClient DefaultTransport")
	// A file server over a directory by path, a file served by path, a
	// certificate and key read by path.
	add("net/http", capFiles, "Dir ServeFile ListenAndServeTLS ServeTLS")
	// Clients of other protocols, each dialing the address it is given
	// (syslog's a local socket or a remote one).
	add("log/syslog", capNetwork, "Dial New NewLogger")
	add("net/rpc", capNetwork, "Dial DialHTTP DialHTTPPath")
	add("net/rpc/jsonrpc", capNetwork, "Dial")
	add("net/smtp", capNetwork, "Dial SendMail")
	add("net/textproto", capNetwork, "Dial")
	// A reverse proxy without a Transport dials with DefaultTransport.
	add("net/http/httputil", capNetwork, "NewSingleHostReverseProxy")
	add("golang.org/x/crypto/ssh", capNetwork, "Dial")
	add("github.com/gorilla/websocket", capNetwork, "DefaultDialer")
	return m
}()

// doorTypes are the types whose construction counts as dialing out, or
// starting a process: each dials whatever address (or runs whatever
// program) it is later given. Any use of the type's name but as a
// pointer's element counts: a composite literal, new(T), a variable, a
// struct field, an array, slice or map element, a type defined on it, a
// type argument. Each of these holds a zero value that works; a pointer
// (a parameter, a field, a type assertion) holds one made elsewhere.
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
	// elemDoorType is the door type of a slice, array or map literal's
	// elements, when they are pointers to one.
	elemDoorType := func(e ast.Expr) string {
		var elt ast.Expr
		switch t := e.(type) {
		case *ast.ArrayType:
			elt = t.Elt
		case *ast.MapType:
			elt = t.Value
		}
		if star, ok := elt.(*ast.StarExpr); ok && doorTypes[qualified(star.X)] != "" {
			return qualified(star.X)
		}
		return ""
	}
	// A package imported with "." brings its names in unqualified
	// (ReadFile("x")): the import itself counts as what they do.
	for _, imp := range f.Imports {
		if imp.Name == nil || imp.Name.Name != "." {
			continue
		}
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, table := range []map[string]string{doorCalls, doorTypes} {
			for name, c := range table {
				if strings.HasPrefix(name, path+".") && !strings.Contains(name[len(path)+1:], ".") {
					found(c, imp, `import . "`+path+`"`)
				}
			}
		}
	}
	// elided is an element written as a literal without its type ({…}, or
	// key: {…}); a pointer already made (c) is not one.
	elided := func(e ast.Expr) bool {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			e = kv.Value
		}
		c, ok := e.(*ast.CompositeLit)
		return ok && c.Type == nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.StarExpr:
			if doorTypes[qualified(n.X)] != "" {
				return false // a pointer: made elsewhere, where it counts
			}
		case *ast.SelectorExpr:
			if q := qualified(n); doorCalls[q] != "" {
				found(doorCalls[q], n, q)
			} else if doorTypes[q] != "" {
				found(doorTypes[q], n, q)
			}
		case *ast.CompositeLit:
			if q := qualified(n.Type); doorTypes[q] != "" {
				found(doorTypes[q], n, q+"{…}")
			}
			// []*exec.Cmd{{Path: …}}: the elements' literals name no
			// type, and their pointer type is not a use.
			if q := elemDoorType(n.Type); q != "" && slices.ContainsFunc(n.Elts, elided) {
				found(doorTypes[q], n, "[]*"+q+"{{…}}")
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
// or a mount by path, a program looked up on PATH; a door type held as a
// value in a field, an array, a slice or a type defined on it; a raw
// system call by number; code, templates, archives and executables loaded
// by path; syslog, RPC, SMTP and textproto clients; chromedp's context
// without an allocator; a pty. A snippet the scan does not see fails the
// test, so the doors table cannot be gone around by a form it does not
// know; and a pointer to a door type, which holds one made elsewhere, is
// not counted.
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
		// A door type held as a value anywhere: its zero value works.
		{`"net"`, `type T struct{ d net.Dialer }; var t T; _, _ = t.d.Dial("tcp", "192.0.2.1:80")`, capNetwork},
		{`"net/http"`, `type T struct{ http.Client }; var t T; _, _ = t.Get("http://192.0.2.1/")`, capNetwork},
		{`"os/exec"`, `cs := make([]exec.Cmd, 1); cs[0].Path = "/bin/sh"; _ = cs[0].Run()`, capProcesses},
		{`"os/exec"`, `var cs [1]exec.Cmd; cs[0].Path = "/bin/sh"; _ = cs[0].Run()`, capProcesses},
		{`"net"`, `type D net.Dialer; _ = D{}`, capNetwork},
		{`"os/exec"`, `cs := []*exec.Cmd{{Path: "/bin/sh"}}; _ = cs[0].Run()`, capProcesses},
		// A door package imported with ".": its names come unqualified.
		{`. "os"`, `_, _ = ReadFile("/etc/shadow")`, capFiles},
		{`. "net"`, `_, _ = Dial("tcp", "192.0.2.1:80")`, capNetwork},
		{`"net/http"`, `cs := map[string]*http.Client{"a": {}}; _, _ = cs["a"].Get("http://192.0.2.1/")`, capNetwork},
		// Raw system calls, named by their number.
		{`"syscall"`, `_, _, _ = syscall.Syscall(syscall.SYS_OPENAT, 0, 0, 0)`, capFiles},
		{`"golang.org/x/sys/unix"`, `_, _, _ = unix.Syscall6(unix.SYS_EXECVEAT, 0, 0, 0, 0, 0, 0)`, capProcesses},
		{`"golang.org/x/sys/unix"`, `_, _, _ = unix.RawSyscall(unix.SYS_CONNECT, 0, 0, 0)`, capNetwork},
		// Path-taking calls of x/sys/unix the list lacked.
		{`"golang.org/x/sys/unix"`, `_, _ = unix.OpenTree(0, "/", 0)`, capFiles},
		{`"golang.org/x/sys/unix"`, `_ = unix.Acct("/tmp/acct")`, capFiles},
		{`"golang.org/x/sys/unix"`, `_, _ = unix.PidfdGetfd(0, 3, 0)`, capFiles},
		// Code, templates, archives and executables by path.
		{`"plugin"`, `_, _ = plugin.Open("/tmp/x.so")`, capFiles},
		{`"html/template"`, `_, _ = template.ParseFiles("/etc/passwd")`, capFiles},
		{`"text/template"`, `_, _ = template.ParseGlob("/etc/*")`, capFiles},
		{`"archive/zip"`, `_, _ = zip.OpenReader("/tmp/x.zip")`, capFiles},
		{`"debug/elf"`, `_, _ = elf.Open("/bin/sh")`, capFiles},
		{`"net/http"`, `_ = http.ListenAndServeTLS(":0", "cert", "key", nil)`, capFiles},
		// Other protocols' clients.
		{`"log/syslog"`, `_, _ = syslog.Dial("udp", "192.0.2.1:514", 0, "x")`, capNetwork},
		{`"net/rpc"`, `_, _ = rpc.Dial("tcp", "192.0.2.1:1")`, capNetwork},
		{`"net/smtp"`, `_ = smtp.SendMail("192.0.2.1:25", nil, "a", nil, nil)`, capNetwork},
		{`"net/textproto"`, `_, _ = textproto.Dial("tcp", "192.0.2.1:1")`, capNetwork},
		// chromedp without an allocator starts Chromium; a pty by hand.
		{`"github.com/chromedp/chromedp"`, `_, _ = chromedp.NewContext(nil)`, capProcesses},
		{`"github.com/creack/pty"`, `_, _, _ = pty.Open()`, capFiles},
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
	// A pointer to a door type holds one made elsewhere (where it is
	// counted): a parameter, a type assertion, a nil one, are not uses.
	for _, tc := range []struct{ imports, body string }{
		{`"os/exec"`, `var run func(*exec.Cmd) error; _ = run`},
		{`"net/http"`, `var rt any; _, _ = rt.(*http.Transport)`},
		{`"net"`, `var d *net.Dialer; _ = d`},
		{`"os/exec"`, `var cs []*exec.Cmd; _ = cs`},
		{`"os/exec"`, `cs := []*exec.Cmd{}; _ = cs`},
		{`"os/exec"`, `var c *exec.Cmd; cs := []*exec.Cmd{c}; _ = cs`},
	} {
		src := "package p\n\nimport " + tc.imports + "\n\nfunc f() {\n\t" + tc.body + "\n}\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if u := fileDoorUses(fset, f); len(u) > 0 {
			t.Errorf("%s: counted as %v, yet it makes nothing", tc.body, u)
		}
	}
}
