package sites

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// MaxEnvFileBytes bounds an env file.
const MaxEnvFileBytes = 1 << 20

// LoadEnvFile reads the operator's KEY=VALUE file (--site-env-file): one
// variable per line, blank lines and lines starting with # skipped, an
// optional "export " prefix, values optionally in single or double quotes
// (taken literally). A malformed line is an error naming the file and line.
// It holds the secrets the site's commands are given, so it is read as
// every file that grants rights is (opfile.Read): a regular file, without
// blocking, at most MaxEnvFileBytes, and refused when a user other than
// root and the daemon's could change it; an error names the file.
func LoadEnvFile(name string) (map[string]string, error) {
	data, err := opfile.Read(name, MaxEnvFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ParseEnvFile(name, data)
}

// ParseEnvFile is LoadEnvFile on bytes already read.
func ParseEnvFile(name string, data []byte) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxEnvFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !envKeyRe().MatchString(k) {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE with KEY of letters, digits and _", name, n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return env, nil
}
