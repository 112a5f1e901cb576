package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/internal/suggest"
)

// ConfigFlag is the flag naming the config file.
const ConfigFlag = "config"

// RegisterFlags adds a flag for every setting, plus --config, to fs. The
// reference CLI's camelCase spellings (--rootDir, --scopePath) are accepted as
// aliases through fs's normalize function.
func RegisterFlags(fs *pflag.FlagSet) {
	aliases := map[string]string{}
	for _, s := range settings {
		if s.alias != "" {
			aliases[s.alias] = s.key
		}
	}
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if key, ok := aliases[name]; ok {
			return pflag.NormalizedName(key)
		}
		return pflag.NormalizedName(name)
	})
	for _, s := range settings {
		usage := s.usage
		if s.alias != "" {
			usage += " (alias --" + s.alias + ")"
		}
		usage += " [env " + strings.Join(s.env, ", ") + "]"
		f := fs.VarPF(&flagValue{s: s, raw: s.def}, s.key, "", usage)
		f.DefValue = s.def
		if s.kind() == "bool" {
			f.NoOptDefVal = "true"
		}
	}
	fs.String(ConfigFlag, "", "read settings from this YAML, TOML or JSON file (keys as the flag names) [env AGENTBE_CONFIG]")
}

// FlagAliases maps each alias flag (the reference CLI's spelling, such as
// rootDir) to the flag it stands for, for "did you mean" on a near miss
// such as --root-dir.
func FlagAliases() map[string]string {
	m := map[string]string{}
	for _, s := range settings {
		if s.alias != "" {
			m[s.alias] = s.key
		}
	}
	return m
}

// flagValue validates a flag's value when it is parsed (so pflag's error names
// the flag) and keeps the raw text; Load applies it after the lower layers.
type flagValue struct {
	s   *setting
	raw string
}

func (f *flagValue) String() string { return f.raw }
func (f *flagValue) Type() string   { return f.s.kind() }
func (f *flagValue) Set(v string) error {
	var scratch Config
	if err := f.s.set(&scratch, v); err != nil {
		return err
	}
	f.raw = v
	return nil
}

// Load builds the Config from defaults, the config file, the environment
// (through lookupEnv, os.LookupEnv in production) and the flags in fs, which
// must have been registered with RegisterFlags and parsed. It reads the token
// file but does not validate cross-setting rules: call Validate for that.
func Load(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (Config, error) {
	c := defaults()

	file := ""
	if f := fs.Lookup(ConfigFlag); f != nil && f.Changed {
		file = f.Value.String()
	} else if v, ok := lookupEnv("AGENTBE_CONFIG"); ok && v != "" {
		file = v
	}
	if file != "" {
		if err := loadFile(&c, file); err != nil {
			return c, err
		}
		c.ConfigFile = file
	}

	for _, s := range settings {
		for _, name := range s.env {
			v, ok := lookupEnv(name)
			if !ok || v == "" {
				continue
			}
			value := v
			if form := envForms[name]; form != nil {
				value = form(v)
			}
			if err := s.set(&c, value); err != nil {
				return c, fmt.Errorf("invalid value %q in %s: %v", redact(s, v), name, err)
			}
			break
		}
	}

	for _, s := range settings {
		f := fs.Lookup(s.key)
		if f == nil || !f.Changed {
			continue
		}
		if err := s.set(&c, f.Value.String()); err != nil {
			return c, fmt.Errorf("invalid value %q for --%s: %v", redact(s, f.Value.String()), s.key, err)
		}
	}

	c.fillStateDefaults()

	if c.AuthTokenFile != "" {
		if c.AuthToken != "" {
			return c, errors.New("both an auth token and --auth-token-file are set: use only one")
		}
	}
	if err := c.readTokenFiles(); err != nil {
		return c, err
	}
	return c, nil
}

// readTokenFiles reads --auth-token-file, --operator-token-file and
// --metrics-token-file into the tokens they name, at start and on every
// reload (ReloadTokenFiles).
func (c *Config) readTokenFiles() error {
	for _, f := range []struct {
		flag, path string
		token      *string
	}{
		{"--auth-token-file", c.AuthTokenFile, &c.AuthToken},
		{"--operator-token-file", c.OperatorTokenFile, &c.OperatorToken},
		{"--metrics-token-file", c.MetricsTokenFile, &c.MetricsToken},
	} {
		if f.path == "" {
			continue
		}
		b, err := opfile.Read(f.path, maxTokenFile)
		if err != nil {
			return fmt.Errorf("%s %q: cannot read: %v", f.flag, f.path, err)
		}
		if *f.token = strings.TrimSpace(string(b)); *f.token == "" {
			return fmt.Errorf("%s %q is empty", f.flag, f.path)
		}
	}
	return nil
}

// ReloadTokenFiles is c with --auth-token-file, --operator-token-file and
// --metrics-token-file read again (on SIGHUP), checked as at start: each
// file safe to read and not empty, and the three tokens different. On an
// error nothing of c changes and the error names the file. A token given
// as a value (--auth-token, the environment, the config file) has no file
// and is kept.
func (c Config) ReloadTokenFiles() (Config, error) {
	next := c
	if err := next.readTokenFiles(); err != nil {
		return c, err
	}
	if err := next.tokensDiffer(); err != nil {
		return c, err
	}
	return next, nil
}

// maxTokenFile bounds what --auth-token-file, --operator-token-file and
// --metrics-token-file may make the daemon read: a token is one line.
const maxTokenFile = 64 << 10

// maxConfigFile bounds the config file.
const maxConfigFile = 4 << 20

func redact(s *setting, v string) string {
	if s.key == "auth-token" {
		return "[redacted]"
	}
	return v
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// loadFile applies a config file's keys to c. Unknown keys and values of the
// wrong type are errors naming the file and the key.
func loadFile(c *Config, file string) error {
	v := viper.New()
	switch strings.ToLower(filepath.Ext(file)) {
	case ".yaml", ".yml", ".toml", ".json":
	default:
		return fmt.Errorf("--config %q: unknown format: use a .yaml, .yml, .toml or .json file", file)
	}
	// Read as the token files are (internal/opfile): a regular file that
	// only its owner can change, bounded; the file names the others.
	data, err := opfile.Read(file, maxConfigFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--config %q: file not found", file)
		}
		return fmt.Errorf("--config %q: %v", file, err)
	}
	v.SetConfigType(strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), "."))
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("--config %q: %s", file, oneLine(unwrapPathError(err).Error()))
	}
	// Viper's own view flattens nested tables into dotted keys; read the
	// top level so a table where a value belongs is reported, not flattened.
	all := v.AllSettings()
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := lookupSetting(k)
		if s == nil {
			if sug := suggestKey(k); sug != "" {
				return fmt.Errorf("config file %s: unknown key %q; did you mean %q? (keys are the flag names)", file, k, sug)
			}
			return fmt.Errorf("config file %s: unknown key %q (keys are the flag names, e.g. root, port, auth-token-file)", file, k)
		}
		raw, err := scalarString(all[k], s.kind() == "list")
		if err != nil {
			return fmt.Errorf("config file %s: key %q %v", file, k, err)
		}
		if err := s.set(c, raw); err != nil {
			return fmt.Errorf("config file %s: key %q: invalid value %q: %v", file, k, redact(s, raw), err)
		}
	}
	return nil
}

// oneLine is a parser's message on one line, as every error of a bad
// value is (docs/configuration.md): YAML's lists each unmarshal error on a
// line of its own, indented, and a message may quote a carriage return.
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, " ")
}

// suggestKey is the setting a config file's unknown key k probably meant
// (internal/suggest, as for flags), by its flag name, or "". An alias that
// is nearest names its setting.
func suggestKey(k string) string {
	names := make([]string, 0, 2*len(settings))
	key := map[string]string{}
	for _, s := range settings {
		names = append(names, s.key)
		key[s.key] = s.key
		if s.alias != "" {
			names = append(names, s.alias)
			key[s.alias] = s.key
		}
	}
	return key[suggest.Closest(k, names)]
}

// scalarString turns a decoded YAML/TOML/JSON value into the text form set
// parses. Lists are allowed only for list settings.
func scalarString(v any, list bool) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x), nil
	case []any:
		if !list {
			return "", errors.New("is a list; expected a single value")
		}
		parts := make([]string, len(x))
		for i, item := range x {
			s, err := scalarString(item, false)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("is a table; expected a single value")
	}
	return "", fmt.Errorf("has unsupported type %T", v)
}

// Format renders c as "key: value" lines in settings order, the token
// redacted: the effective configuration that --check-config prints, valid as
// a YAML config file.
func (c Config) Format() string {
	r := c.Redacted()
	var b strings.Builder
	for _, s := range settings {
		v := s.get(&r)
		if s.kind() == "string" || s.kind() == "list" || s.kind() == "duration" || s.kind() == "size" {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, "%s: %s\n", s.key, v)
	}
	return b.String()
}
