package daemon

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
)

// BenchmarkSSHPortVsOpenSSH measures the SSH port (--ssh-listen) beside
// OpenSSH's own sshd (Debian's openssh-server, started here on a loopback
// port with a throwaway config, serving the same directory), in one run:
// a handshake with key authentication, an exec of true on a connection,
// SFTP open+read+close of 4 KiB, and 64 MiB upload and download. Run:
//
//	go test -run '^$' -bench SSHPortVsOpenSSH -benchtime 200x ./daemon/
func BenchmarkSSHPortVsOpenSSH(b *testing.B) {
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		b.Fatalf("OpenSSH's sshd (apt-get install openssh-server) is needed: %v", err)
	}
	dir := b.TempDir()
	_, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := gossh.NewSignerFromKey(clientPriv)
	if err != nil {
		b.Fatal(err)
	}
	authz := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authz, gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		b.Fatal(err)
	}

	// Ours.
	c := testConfig(b)
	c.SSHListen = freeAddrB(b)
	c.SSHAuthorizedKeys = authz
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	r := start(b, c, nil)
	for r.d.SSHAddr() == "" {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(c.Root, "4k.bin"), bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		b.Fatal(err)
	}

	// OpenSSH's sshd over the same directory.
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostPEM, err := gossh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		b.Fatal(err)
	}
	hostKey := filepath.Join(dir, "host_key")
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(hostPEM), 0o600); err != nil {
		b.Fatal(err)
	}
	sshdAddr := freeAddrB(b)
	host, port, _ := net.SplitHostPort(sshdAddr)
	conf := filepath.Join(dir, "sshd_config")
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	if err := os.WriteFile(conf, fmt.Appendf(nil, `Port %s
ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile none
Subsystem sftp /usr/lib/openssh/sftp-server -d %s
`, port, host, hostKey, authz, c.Root), 0o600); err != nil {
		b.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755)
	cmd := exec.Command(sshd, "-D", "-e", "-f", conf)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	cfg := &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}
	dial := func(b *testing.B, addr string) *gossh.Client {
		var cl *gossh.Client
		var err error
		for range 100 {
			if cl, err = gossh.Dial("tcp", addr, cfg); err == nil {
				return cl
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.Fatalf("%s: %v\n%s", addr, err, logs.String())
		return nil
	}
	dial(b, sshdAddr).Close()

	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	for _, target := range []struct{ name, addr string }{{"ours", r.d.SSHAddr()}, {"openssh", sshdAddr}} {
		b.Run("handshake/"+target.name, func(b *testing.B) {
			for b.Loop() {
				dial(b, target.addr).Close()
			}
		})
		b.Run("exec-true/"+target.name, func(b *testing.B) {
			cl := dial(b, target.addr)
			defer cl.Close()
			for b.Loop() {
				s, err := cl.NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run("true"); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
		b.Run("sftp-4k-read/"+target.name, func(b *testing.B) {
			cl := dial(b, target.addr)
			defer cl.Close()
			sc, err := sftp.NewClient(cl)
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			path := filepath.Join(c.Root, "4k.bin")
			for b.Loop() {
				f, err := sc.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, f); err != nil || n != 4096 {
					b.Fatal(n, err)
				}
				f.Close()
			}
		})
		b.Run("sftp-64MiB-upload-download/"+target.name, func(b *testing.B) {
			cl := dial(b, target.addr)
			defer cl.Close()
			sc, err := sftp.NewClient(cl, sftp.UseConcurrentWrites(true))
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			path := filepath.Join(c.Root, "big-"+target.name+".bin")
			b.SetBytes(int64(2 * len(big)))
			for b.Loop() {
				f, err := sc.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.ReadFrom(bytes.NewReader(big)); err != nil {
					b.Fatal(err)
				}
				f.Close()
				g, err := sc.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := g.WriteTo(io.Discard); err != nil || n != int64(len(big)) {
					b.Fatal(n, err)
				}
				g.Close()
			}
			if !strings.HasPrefix(path, c.Root) {
				b.Fatal("outside the workspace")
			}
		})
	}
}

func freeAddrB(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
