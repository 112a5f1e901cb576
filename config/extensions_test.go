package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestExtensionsAllowances: --extensions-env and --extensions-db-hosts
// reach the Config as lists, and a value that could never match is refused
// naming the flag.
func TestExtensionsAllowances(t *testing.T) {
	c, err := load(t, []string{"--extensions-env", "POSTGRES_*,GITHUB_DEFAULT_REPO", "--extensions-db-hosts", "db.internal,10.0.0.5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.ExtensionsEnv) != "[POSTGRES_* GITHUB_DEFAULT_REPO]" || fmt.Sprint(c.ExtensionsDBHosts) != "[db.internal 10.0.0.5]" {
		t.Errorf("env %v, hosts %v", c.ExtensionsEnv, c.ExtensionsDBHosts)
	}
	if d, _ := load(t, nil, nil); len(d.ExtensionsEnv) != 0 || len(d.ExtensionsDBHosts) != 0 {
		t.Errorf("defaults allow %v %v", d.ExtensionsEnv, d.ExtensionsDBHosts)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--extensions-env", "A=B"}, `invalid argument "A=B" for "--extensions-env" flag: "A=B" is not a variable name or PREFIX_* pattern`},
		{[]string{"--extensions-env", "*X"}, `"*X" is not a variable name or PREFIX_* pattern`},
		{[]string{"--extensions-env", "A-B"}, `"A-B" is not a variable name`},
		{[]string{"--extensions-env", "*"}, `"*": a pattern is a prefix ending in _ followed by *`},
		{[]string{"--extensions-env", "A*"}, `"A*": a pattern is a prefix ending in _ followed by *`},
		{[]string{"--extensions-env", "_*"}, `"_*": a pattern is a prefix ending in _ followed by *`},
		{[]string{"--extensions-env", "OK,__*"}, `"__*": a pattern is a prefix ending in _ followed by *`},
		{[]string{"--extensions-db-hosts", "db:5432"}, `invalid argument "db:5432" for "--extensions-db-hosts" flag: "db:5432" is not a host name or an address (without a port)`},
		{[]string{"--extensions-db-hosts", "/var/run/postgresql"}, `is not a host name or an address`},
	} {
		if _, err := load(t, tt.args, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v\nwant %s", tt.args, err, tt.want)
		}
	}
}
