package config

import (
	"strings"
	"testing"
)

// TestConfigFileOddBytes: what the config file's parsers make of a
// byte-order mark, CRLF line ends, a NUL, invalid UTF-8 and a key given
// twice. A key twice is refused by YAML and TOML; a UTF-8 BOM and CRLF
// read as the plain file; a NUL in a value is refused by the setting; a
// JSON file with a key twice keeps the last (encoding/json's rule, which
// viper uses): the effective value is what --check-config prints.
func TestConfigFileOddBytes(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		want                string // error substring; "" = loads
		port                int
	}{
		{"yaml BOM", "c.yaml", "\ufeffport: 1234\n", "", 1234},
		{"yaml CRLF", "c.yaml", "port: 1234\r\nbind: 127.0.0.1\r\n", "", 1234},
		{"toml CRLF", "c.toml", "port = 1234\r\n", "", 1234},
		{"yaml key twice", "c.yaml", "port: 1234\nport: 4321\n", "already defined", 0},
		{"toml key twice", "c.toml", "port = 1234\nport = 4321\n", "already", 0},
		{"json key twice", "c.json", `{"port": 1234, "port": 4321}`, "", 4321},
		{"yaml NUL in a value", "c.yaml", "port: \"12\\x0034\"\n", `key "port": invalid value`, 0},
		{"yaml invalid UTF-8", "c.yaml", "root: \"/srv/\xff\"\n", "invalid", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c.file, c.content)
			cfg, err := load(t, []string{"--config", p}, nil)
			if c.want == "" {
				if err != nil || cfg.Port != c.port {
					t.Fatalf("port %d, %v; want %d", cfg.Port, err, c.port)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v; want %q", err, c.want)
			}
		})
	}
}
