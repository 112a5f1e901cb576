package procstat

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	// A command name with spaces and a closing parenthesis of its own.
	line := "4242 (a b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 4 0 100 0 0"
	st, err := parse(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PPID: 17, CPU: 280 * Tick, Children: 10 * Tick}
	if st != want {
		t.Errorf("parse = %+v, want %+v", st, want)
	}
	for _, bad := range []string{
		"",                                      // no command name
		"1 (x) S 0 1 1",                         // too few fields
		"1 (x) S zz 1 1 0 -1 0 0 0 0 0 1 1 0 0", // a parent that is no number
		"1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 x 0 0",  // a time that is no number
	} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "/proc/PID/stat") {
			t.Errorf("parse(%q) = %v, want an error naming /proc/PID/stat", bad, err)
		}
	}
}

func TestReadSelf(t *testing.T) {
	// Spend CPU until a tick is counted (a loaded machine may give this
	// process little of it); the bound only stops a broken reader.
	var st Stat
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		if st, err = Read(os.Getpid()); err != nil || st.CPU > 0 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getppid() || st.CPU <= 0 {
		t.Errorf("Read(self) = %+v, want parent %d and some CPU", st, os.Getppid())
	}
	rss, err := StatusKiB(os.Getpid(), "VmRSS")
	if err != nil || rss <= 0 {
		t.Errorf("StatusKiB(VmRSS) = %d, %v", rss, err)
	}
	if _, err := StatusKiB(os.Getpid(), "NoSuchField"); err == nil || !strings.Contains(err.Error(), "NoSuchField") {
		t.Errorf("StatusKiB(NoSuchField) = %v, want an error naming it", err)
	}
}
