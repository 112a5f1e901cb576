package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// recorder is a table of fake rows that write down what the daemon does
// with them.
type recorder struct{ events []string }

func (r *recorder) row(name string, on bool, startErr, checkErr error) part {
	return part{
		name: name,
		on:   func(config.Config) bool { return on },
		check: func(config.Config) error {
			r.events = append(r.events, "check "+name)
			return checkErr
		},
		start: func(*wiring) (built, error) {
			r.events = append(r.events, "start "+name)
			if startErr != nil {
				return built{}, startErr
			}
			return built{close: func() error {
				r.events = append(r.events, "close "+name)
				return nil
			}}, nil
		},
	}
}

func fakeWiring(t *testing.T) *wiring {
	return &wiring{cfg: config.Default(), log: slog.New(slog.DiscardHandler), reg: registry.New(registry.Options{})}
}

// TestPartsCloseInReverse: the rows cfg asks for start in the table's
// order and close in the reverse; a row that is off is not started, and
// its files are checked instead.
func TestPartsCloseInReverse(t *testing.T) {
	var r recorder
	table := []part{r.row("a", true, nil, nil), r.row("b", false, nil, nil), r.row("c", true, nil, nil), r.row("d", true, nil, nil)}
	ps, err := startParts(fakeWiring(t), table)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeParts(ps); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "check b", "start c", "start d", "close d", "close c", "close a"}
	if !slices.Equal(r.events, want) {
		t.Errorf("events %q, want %q", r.events, want)
	}
}

// TestPartFailureClosesTheRowsAbove: a row that fails to start (or whose
// files do not check, while it is off) ends the rows above it, in reverse,
// and no row below it starts; the error is the row's own.
func TestPartFailureClosesTheRowsAbove(t *testing.T) {
	boom := errors.New("--thing: boom")
	for _, tc := range []struct {
		name  string
		table func(*recorder) []part
		want  []string
	}{
		{"start fails", func(r *recorder) []part {
			return []part{r.row("a", true, nil, nil), r.row("b", true, nil, nil), r.row("k", true, boom, nil), r.row("z", true, nil, nil)}
		}, []string{"start a", "start b", "start k", "close b", "close a"}},
		{"check of a row that is off fails", func(r *recorder) []part {
			return []part{r.row("a", true, nil, nil), r.row("k", false, nil, boom), r.row("z", true, nil, nil)}
		}, []string{"start a", "check k", "close a"}},
		{"the first row fails", func(r *recorder) []part {
			return []part{r.row("k", true, boom, nil), r.row("z", true, nil, nil)}
		}, []string{"start k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			ps, err := startParts(fakeWiring(t), tc.table(&r))
			if err != boom || ps != nil {
				t.Errorf("startParts = %v, %v; want nil, %v", ps, err, boom)
			}
			if !slices.Equal(r.events, tc.want) {
				t.Errorf("events %q, want %q", r.events, tc.want)
			}
		})
	}
}

// TestPartsTable: every row of the daemon's table keeps the contract: a
// unique name, a start, a flag for a row that is not always on, and a
// route pattern no other row serves.
func TestPartsTable(t *testing.T) {
	names, patterns := map[string]bool{}, map[string]string{}
	for _, p := range parts {
		if p.name == "" || p.start == nil {
			t.Errorf("row %+v: no name or no start", p)
		}
		if names[p.name] {
			t.Errorf("two rows named %q", p.name)
		}
		names[p.name] = true
		for _, r := range p.routes {
			if other, ok := patterns[r.pattern]; ok {
				t.Errorf("%s is a route of %q and of %q", r.pattern, other, p.name)
			}
			patterns[r.pattern] = p.name
		}
	}
}

// TestNewProviderIsOneRow: a provider added as one row of the table (here
// a test's) is started, publishes its tools to every face under its name,
// fills /health's providers, and is closed with the daemon, in its place
// of the reverse order. Nothing else of the daemon is edited for it.
func TestNewProviderIsOneRow(t *testing.T) {
	var events []string
	table := slices.Clone(parts)
	i := slices.IndexFunc(table, func(p part) bool { return p.name == "mcp" })
	for j := range table {
		if table[j].name == "workspace" {
			start := table[j].start
			table[j].start = func(w *wiring) (built, error) {
				b, err := start(w)
				close := b.close
				b.close = func() error { events = append(events, "close workspace"); return close() }
				return b, err
			}
		}
	}
	table = slices.Insert(table, i, part{name: "echo", flag: "--echo-tools", on: func(config.Config) bool { return true },
		start: func(w *wiring) (built, error) {
			events = append(events, "start echo")
			return built{tools: []registry.Tool{okTool("echo_hello")}, close: func() error {
				events = append(events, "close echo")
				return nil
			}}, nil
		}})
	c := testConfig(t)
	d, err := newDaemon(c, Options{}, table)
	if err != nil {
		t.Fatal(err)
	}
	r := serve(t, d)
	code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"echo_hello","arguments":{}}`, nil)
	if code != 200 || !strings.Contains(body, "done") {
		t.Errorf("/execute echo_hello: %d %s", code, body)
	}
	_, body = send(t, "GET", r.url+"/health", "", nil)
	var h healthBody
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(h.Providers, func(p registry.ProviderInfo) bool { return p.Name == "echo" && p.Tools == 1 }) {
		t.Errorf("/health providers %+v lack echo", h.Providers)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start echo", "close echo", "close workspace"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

// partFiles writes a good file for each part that loads one (the --tokens
// file, the --upstreams file, the --exec-approvals file, the SSH port's
// authorized_keys) into c, and returns their paths by flag.
func partFiles(t *testing.T, c *config.Config) map[string]string {
	dir := t.TempDir()
	files := map[string]string{
		"--tokens":              filepath.Join(dir, "tokens.json"),
		"--upstreams":           filepath.Join(dir, "mcp_servers.json"),
		"--exec-approvals":      filepath.Join(dir, "approvals.json"),
		"--ssh-authorized-keys": filepath.Join(dir, "authorized_keys"),
	}
	_, line, _ := clientKey(t, dir, "key")
	must(t, os.WriteFile(files["--tokens"], []byte(`{"tokens":[{"name":"ci","sha256":"`+strings.Repeat("ab", 32)+`"}]}`), 0o600))
	must(t, os.WriteFile(files["--upstreams"], []byte(`{"servers":[]}`), 0o600))
	must(t, os.WriteFile(files["--exec-approvals"], []byte(`{"allowlist":{"commands":["ls"]}}`), 0o600))
	must(t, os.WriteFile(files["--ssh-authorized-keys"], []byte(line+"\n"), 0o600))
	c.TokensFile, c.Upstreams, c.ExecApprovals, c.SSHAuthorizedKeys = files["--tokens"], files["--upstreams"], files["--exec-approvals"], files["--ssh-authorized-keys"]
	c.SSHListen = freeAddr(t)
	return files
}

// opens counts the opens of files while it watches them (inotify). It
// watches closes too: the kernel merges an event into the same one left
// unread just before it, so two opens in a row would count as one, but
// open, close, open, close are four.
type opens struct {
	fd    int
	paths map[int32]string
}

func watchOpens(t *testing.T, files map[string]string) *opens {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	o := &opens{fd: fd, paths: map[int32]string{}}
	for flag, p := range files {
		wd, err := syscall.InotifyAddWatch(fd, p, syscall.IN_OPEN|syscall.IN_CLOSE)
		if err != nil {
			t.Fatal(err)
		}
		o.paths[int32(wd)] = flag
	}
	return o
}

// count is how many times each file was opened since the last count.
func (o *opens) count(t *testing.T) map[string]int {
	n := map[string]int{}
	for _, flag := range o.paths {
		n[flag] = 0
	}
	buf := make([]byte, 64<<10)
	for {
		k, err := syscall.Read(o.fd, buf)
		if err == syscall.EAGAIN {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= k; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				n[o.paths[ev.Wd]]++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestPartFilesLoadedOnce: the file a part loads is read once, by the
// part, when the daemon starts it: config.Validate reads none of them, New
// opens each once (what the part serves is what it read), and
// --check-config's Validate and Check open each once too. A part that is
// off (the gateway tools) still has its file (--exec-approvals) checked,
// once.
func TestPartFilesLoadedOnce(t *testing.T) {
	for _, gatewayTools := range []bool{true, false} {
		t.Run(fmt.Sprintf("gateway-tools=%v", gatewayTools), func(t *testing.T) {
			c := testConfig(t)
			files := partFiles(t, &c)
			c.GatewayTools = gatewayTools
			o := watchOpens(t, files)
			must(t, c.Validate())
			for flag, n := range o.count(t) {
				if n != 0 {
					t.Errorf("config.Validate opened the %s file %d times; it is its part's to load", flag, n)
				}
			}
			d, err := New(c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			must(t, d.Close())
			for flag, n := range o.count(t) {
				if n != 1 {
					t.Errorf("New opened the %s file %d times, want once", flag, n)
				}
			}
			if errs := Check(c); len(errs) != 0 {
				t.Fatal(errs)
			}
			for flag, n := range o.count(t) {
				if n != 1 {
					t.Errorf("Check opened the %s file %d times, want once", flag, n)
				}
			}
		})
	}
}

// TestPartsCheckTheirFiles: a bad file of a part stops New, and fails
// Check (--check-config), with the one message of the part that loads it,
// naming the flag and the file; config.Validate does not read it.
func TestPartsCheckTheirFiles(t *testing.T) {
	for _, tc := range []struct {
		flag, body, want string
		tweak            func(*config.Config)
	}{
		{"--tokens", `{"tokens":[{"name":"x"}]}`, "--tokens {file}: ", nil},
		{"--upstreams", `{"servers":[{"name":"fs","comand":"node"}]}`, `--upstreams: {file}: servers[0] ("fs"): "comand": unknown key; did you mean "command"?`, nil},
		{"--exec-approvals", `{"allowlist":{"commands":["./rel"]}}`, `--exec-approvals: {file}: allowlist.commands[0] "./rel": a program name or an absolute path`, nil},
		{"--exec-approvals", `{"allowlist":{"commands":["./rel"]}}`, `--exec-approvals: {file}: allowlist.commands[0] "./rel": a program name or an absolute path`,
			func(c *config.Config) { c.GatewayTools = false }},
		{"--ssh-authorized-keys", "# keys\nssh-ed25519 not-base64\n", "--ssh-authorized-keys: {file}:2: ", nil},
	} {
		name := tc.flag
		if tc.tweak != nil {
			name += " of a part that is off"
		}
		t.Run(name, func(t *testing.T) {
			c := testConfig(t)
			files := partFiles(t, &c)
			c.GatewayTools = true
			if tc.tweak != nil {
				tc.tweak(&c)
			}
			must(t, os.WriteFile(files[tc.flag], []byte(tc.body), 0o600))
			must(t, c.Validate())
			want := strings.ReplaceAll(tc.want, "{file}", files[tc.flag])
			errs := Check(c)
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
				t.Errorf("Check: %v; want one error starting %q", errs, want)
			}
			d, err := New(c, Options{})
			if err == nil {
				d.Close()
				t.Fatalf("New started with a bad %s file", tc.flag)
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("New: %v; want %q", err, want)
			}
		})
	}
}
