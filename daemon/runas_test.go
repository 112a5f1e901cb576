package daemon

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestRunAsOwnsWhatFileToolsWrite: under a root daemon with --run-as, what
// the file tools create belongs to that user, so the commands, which run
// as that user, can change it: an agent that writes a file with write_file
// and a directory with create_directory can then edit, move and remove
// them with a command. A file the operator made keeps its owner when
// write_file replaces it.
func TestRunAsOwnsWhatFileToolsWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "--run-as needs the daemon to run as root (the tests run as root in CI)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		testenv.Missing(t, "no user nobody to name in --run-as (Debian has one)")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	c := testConfig(t)
	c.Root = testenv.SharedTempDir(t) // nobody must reach it
	must(t, os.Chown(c.Root, uid, gid))
	must(t, os.WriteFile(filepath.Join(c.Root, "operator.txt"), []byte("op\n"), 0o644))
	c.RunAs = "nobody"
	must(t, c.Validate())
	r := start(t, c, nil)
	cs := mcpSession(t, r)

	cpCall(t, cs, "write_file", map[string]any{"path": "src/a.txt", "content": "one\n"}, false)
	cpCall(t, cs, "create_directory", map[string]any{"path": "out/logs"}, false)
	cpCall(t, cs, "write_file", map[string]any{"path": "operator.txt", "content": "op2\n"}, false)
	text, _ := cpCall(t, cs, "exec", map[string]any{"command": "id -un && sed -i s/one/two/ src/a.txt && mv src/a.txt out/logs/ && touch out/logs/b && rmdir src && echo done"}, false)
	if !strings.Contains(text, "nobody") || !strings.Contains(text, "done") {
		t.Fatalf("the command could not change what the file tools wrote: %s", text)
	}
	got, err := os.ReadFile(filepath.Join(c.Root, "out/logs/a.txt"))
	if err != nil || string(got) != "two\n" {
		t.Fatalf("out/logs/a.txt = %q, %v; want the command's edit", got, err)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(c.Root, "operator.txt"), &st))
	if st.Uid != 0 {
		t.Errorf("operator.txt, root's, is owned by %d after write_file replaced it; want it kept", st.Uid)
	}
	text, _ = cpCall(t, cs, "exec", map[string]any{"command": "echo x >> operator.txt"}, true)
	if !strings.Contains(text, "ermission denied") {
		t.Errorf("the operator's file was writable by the command: %s", text)
	}
}
