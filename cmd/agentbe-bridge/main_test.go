package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/internal/testca"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.OperatorUmask() // the daemon's token and TLS files, made as an operator would
	goleak.VerifyTestMain(m)
}

const testToken = "bridge-test-token-0123456789"

// startDaemon serves a workspace on a loopback port with testToken (and
// TLS with certFile/keyFile when given) until the test ends; it returns
// the host:port.
func startDaemon(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	_, addr, _ := serveDaemon(t, func(c *config.Config) {
		c.AuthToken = testToken
		c.TLSCert, c.TLSKey = certFile, keyFile
	})
	return addr
}

// serveDaemon serves a workspace on a loopback port (software isolation,
// tweak's settings) until the test ends; it returns the daemon, its
// host:port and its root.
func serveDaemon(t *testing.T, tweak func(*config.Config)) (*daemon.Daemon, string, string) {
	t.Helper()
	c := config.Default()
	c.Root = t.TempDir()
	c.Isolation = "software"
	c.SSHHostKey = filepath.Join(t.TempDir(), "host_key")
	c.ShutdownTimeout = 5 * time.Second
	tweak(&c)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(c, daemon.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = d.Close()
	})
	return d, ln.Addr().String(), c.Root
}

// forward is a plain TCP forward from a loopback port to target, standing
// in for `ssh -L PORT:127.0.0.1:3001 vm`: the bridge talks to the local
// end and knows nothing of the hop. It returns the local host:port.
func forward(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, down); up.Close() })
			wg.Go(func() { _, _ = io.Copy(down, up); down.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// bridged connects a go-sdk MCP client over stdio to `agentbe-bridge
// args...` run in process: the client writes the bridge's stdin and reads
// its stdout, as Claude Desktop does with the spawned command. The bridge
// ends when the client closes its side; its exit code and stderr are
// checked then.
func bridged(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		c := run(context.Background(), args, inR, outW, stderr)
		outW.Close()
		code <- c
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bridge-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		t.Fatalf("connect through agentbe-bridge %s: %v (stderr %q, exit %d)", strings.Join(args, " "), err, stderr.String(), <-code)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		if c := <-code; c != 0 {
			t.Errorf("agentbe-bridge %s exited %d: %s", strings.Join(args, " "), c, stderr.String())
		}
	})
	return cs
}

type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// useSession makes the calls an agent makes first: the tool list, a write,
// a read back and a command, and checks each answer.
func useSession(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	if !names["exec"] || !names["write_file"] || !names["read_text_file"] {
		t.Fatalf("tools through the bridge: %v; want exec, write_file, read_text_file", names)
	}
	text := func(name string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: error %s", name, out)
		}
		return out
	}
	text("write_file", map[string]any{"path": "from-the-bridge.txt", "content": "line one\nline two\n"})
	if got := text("read_text_file", map[string]any{"path": "from-the-bridge.txt"}); !strings.Contains(got, "line two") {
		t.Errorf("read back through the bridge: %q", got)
	}
	if got := text("exec", map[string]any{"command": "wc -l < from-the-bridge.txt"}); strings.TrimSpace(got) != "2" {
		t.Errorf("exec through the bridge: %q, want 2", got)
	}
}

// TestBridgeCarriesMCPSession: a go-sdk MCP client speaking stdio reaches
// the daemon through `agentbe-bridge mcp` with the token from
// --token-file: over plain HTTP, over HTTPS with a certificate of a test CA
// (--ca), and through a plain TCP forward standing in for an SSH tunnel.
func TestBridgeCarriesMCPSession(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := startDaemon(t, "", "")
	caFile, certFile, keyFile := testca.Files(t)
	secure := startDaemon(t, certFile, keyFile)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"http", []string{"mcp", "http://" + plain + "/mcp", "--token-file", tokenFile}},
		{"https with a test CA", []string{"mcp", "https://" + secure + "/mcp", "--token-file", tokenFile, "--ca", caFile}},
		{"through a TCP forward (an SSH tunnel's stand-in)", []string{"mcp", "http://" + forward(t, plain) + "/mcp", "--token-file", tokenFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := bridged(t, tc.args...)
			useSession(t, cs)
		})
	}

	// As Claude Desktop runs it: the built program, spawned with its
	// arguments, speaking on its real stdin and stdout.
	t.Run("spawned as a process", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		if err != nil {
			t.Skip("the go command is not on PATH (this subtest builds the bridge)")
		}
		bin := filepath.Join(t.TempDir(), "agentbe-bridge")
		if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		var stderr lockedBuffer
		cmd := exec.Command(bin, "mcp", "https://"+secure+"/mcp", "--token-file", tokenFile, "--ca", caFile)
		cmd.Stderr = &stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bridge-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect through the spawned bridge: %v (stderr %q)", err, stderr.String())
		}
		useSession(t, cs)
		if err := cs.Close(); err != nil {
			t.Errorf("closing the spawned bridge: %v (stderr %q)", err, stderr.String())
		}
	})

	// The token from the environment when no file is named.
	t.Run("token from AGENTBE_AUTH_TOKEN", func(t *testing.T) {
		t.Setenv("AGENTBE_AUTH_TOKEN", testToken)
		cs := bridged(t, "mcp", "http://"+plain+"/mcp")
		useSession(t, cs)
	})
}

// TestBridgeSaysWhy: what goes wrong is said where the user looks. A wrong
// token answers initialize with an error naming 401 and the flag; an
// https daemon whose CA the bridge was not given fails naming the
// certificate; a bad command line exits 2 naming what is wrong.
func TestBridgeSaysWhy(t *testing.T) {
	plain := startDaemon(t, "", "")
	wrong := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrong, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	connectErr := func(args ...string) string {
		t.Helper()
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		code := make(chan int, 1)
		go func() {
			c := run(context.Background(), args, inR, outW, io.Discard)
			outW.Close()
			code <- c
		}()
		_, err := mcp.NewClient(&mcp.Implementation{Name: "bridge-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
		inW.Close()
		outR.Close()
		<-code
		if err == nil {
			t.Fatalf("agentbe-bridge %s: the session connected", strings.Join(args, " "))
		}
		return err.Error()
	}
	if got := connectErr("mcp", "http://"+plain+"/mcp", "--token-file", wrong); !strings.Contains(got, "401") || !strings.Contains(got, "--token-file") {
		t.Errorf("a wrong token: %q; want 401 and --token-file named", got)
	}
	_, certFile, keyFile := testca.Files(t)
	secure := startDaemon(t, certFile, keyFile)
	if got := connectErr("mcp", "https://"+secure+"/mcp", "--token-file", wrong); !strings.Contains(got, "certificate") {
		t.Errorf("an unknown CA: %q; want the certificate named", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "want one URL"},
		{[]string{"mcp", "ws://127.0.0.1:3001/ssh"}, "want http://"},
		{[]string{"ssh", "http://127.0.0.1:3001/mcp"}, "want ws://"},
		{[]string{"mcp", "http://127.0.0.1:1/mcp", "--token-fil", "x"}, "unknown flag: --token-fil"},
		{[]string{"mcp", "http://127.0.0.1:1/mcp", "--token-file", filepath.Join(t.TempDir(), "none")}, "--token-file: open"},
		{[]string{"mcp", "https://127.0.0.1:1/mcp", "--ca", wrong}, "no PEM certificate"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("agentbe-bridge %s: exit %d, %q; want an error naming %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
}

// TestBridgeBuildsOffLinux: the bridge is what runs on the user's macOS
// or Windows machine, so it must build there (the daemon, cmd/agent-backend,
// does not: sandbox/unsupported.go).
func TestBridgeBuildsOffLinux(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH (this test runs go build)")
	}
	// darwin/amd64 shares its compiled standard library with the client's
	// TestBuildsOffLinux; `make bridges` builds darwin/arm64 as well.
	for _, target := range []string{"darwin/amd64", "windows/amd64"} {
		goos, goarch, _ := strings.Cut(target, "/")
		cmd := exec.Command(goBin, "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build ./cmd/agentbe-bridge: %v\n%s", goos, goarch, err, out)
		}
	}
}

// TestBridgeCarriesSSH: `agentbe-bridge ssh` is the ProxyCommand of an
// OpenSSH client on any OS: an x/crypto/ssh client speaking over the
// bridge's stdin/stdout reaches the daemon's /ssh with the token and runs a
// command in the workspace, over ws:// and over wss:// to a daemon with a
// test CA's certificate (--ca). Without --ca that daemon's certificate is
// refused naming --ca FILE, and a --ca file with no certificate is refused
// naming the file.
func TestBridgeCarriesSSH(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := testca.Files(t)
	plain, secure := startDaemon(t, "", ""), startDaemon(t, certFile, keyFile)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ws", []string{"ssh", "ws://" + plain + "/ssh", "--token-file", tokenFile}},
		{"wss with a test CA", []string{"ssh", "wss://" + secure + "/ssh", "--token-file", tokenFile, "--ca", caFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := sshThroughBridge(t, context.Background(), tc.args, "echo through the bridge")
			if err != nil || strings.TrimSpace(string(out)) != "through the bridge" {
				t.Errorf("exec over the bridge: %v, %q", err, out)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ssh", "wss://" + secure + "/ssh", "--token-file", tokenFile}, "certificate signed by unknown authority (a daemon whose certificate this machine does not trust: --ca FILE names the CA that signed it)"},
		{[]string{"ssh", "wss://" + secure + "/ssh", "--token-file", tokenFile, "--ca", keyFile}, "--ca " + keyFile + ": no PEM certificate in it"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
		if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("agentbe-bridge %s: exit %d, stdout %q, stderr %q; want exit 1 naming %q", strings.Join(tc.args, " "), code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

// sshThroughBridge logs in over SSH through `agentbe-bridge ssh` (run with
// args, as a ProxyCommand would: the bridge's stdin and stdout are one end
// of a pipe, the SSH client the other) and runs command; it waits for the
// bridge to exit.
func sshThroughBridge(t *testing.T, ctx context.Context, args []string, command string) ([]byte, error) {
	t.Helper()
	local, remote := net.Pipe()
	code := make(chan int, 1)
	var stderr lockedBuffer
	go func() {
		code <- run(ctx, args, remote, remote, &stderr)
		remote.Close()
	}()
	conn, chans, reqs, err := ssh.NewClientConn(local, "workspace", &ssh.ClientConfig{
		User: "agent", Auth: []ssh.AuthMethod{ssh.Password("unused")}, HostKeyCallback: ssh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		local.Close()
		t.Fatalf("SSH through agentbe-bridge %v: %v (exit %d, %q)", args, err, <-code, stderr.String())
	}
	client := ssh.NewClient(conn, chans, reqs)
	defer func() {
		client.Close()
		<-code
	}()
	sess, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	return sess.Output(command)
}
