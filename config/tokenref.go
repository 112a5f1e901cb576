package config

import (
	"path/filepath"
	"strings"
)

// TokenRef is how a user's shell names the bearer token in use without
// writing its value: "$(cat FILE)" for --auth-token-file (FILE absolute),
// "$NAME" for the environment variable it came from (AGENTBE_AUTH_TOKEN or
// AUTH_TOKEN), a placeholder naming --auth-token (and the config file, when
// one is read) or --tokens when the value lives only in the command line,
// the config file or a digest file, and "" without a token. lookupEnv is
// os.LookupEnv in production. The start-up line that tells a user how to
// connect (daemon/connect.go) prints it, so it never holds the token
// itself.
func (c Config) TokenRef(lookupEnv func(string) (string, bool)) string {
	switch {
	case c.AuthTokenFile != "":
		p := c.AuthTokenFile
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		return "$(cat " + ShellQuote(p) + ")"
	case c.AuthToken != "":
		if s := lookupSetting("auth-token"); s != nil {
			for _, name := range s.env {
				if v, ok := lookupEnv(name); ok && v != "" {
					if v == c.AuthToken || strings.TrimSpace(v) == c.AuthToken {
						return "$" + name
					}
					break // the first one set is the one Load read
				}
			}
		}
		if c.ConfigFile != "" {
			return "<the auth token of --auth-token or --config " + c.ConfigFile + ">"
		}
		return "<the value of --auth-token>"
	case c.TokensFile != "":
		return "<a token whose digest is in --tokens " + c.TokensFile + ">"
	}
	return ""
}

// ShellQuote returns s as one POSIX shell word: unchanged when it holds
// only characters no shell treats specially, else in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
