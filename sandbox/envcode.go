//go:build linux

package sandbox

import "strings"

// EnvRunsCode reports whether setting the environment variable name can
// make an ordinary program load or run code other than itself: git's
// configuration (core.fsmonitor, core.pager, aliases) and hooks, the
// language runtimes' start-up options and module paths, pagers and
// editors, the C library's module loaders, build tools' wrappers. It
// returns a short reason for the message.
//
// It matters wherever a caller may run only some commands (a tool site's
// allowed argv patterns, system.run's allowlist) and also sets their
// environment: there, `git status` with GIT_CONFIG_KEY_0=core.fsmonitor is
// any command at all. Variables the executor always drops (deniedEnv) are
// not listed again. Names are compared case-insensitively (npm reads
// npm_config_* in any case).
func EnvRunsCode(name string) (bool, string) {
	u := strings.ToUpper(name)
	if why, ok := codeEnvNames[u]; ok {
		return true, why
	}
	for _, p := range codeEnvPrefixes {
		if strings.HasPrefix(u, p.prefix) {
			return true, p.why
		}
	}
	return false, ""
}

var codeEnvNames = map[string]string{
	"NODE_OPTIONS":      "node loads modules it names",
	"NODE_PATH":         "node resolves modules from it",
	"PERL5OPT":          "perl takes options from it",
	"PERL5LIB":          "perl loads modules from it",
	"PERLLIB":           "perl loads modules from it",
	"PERL5DB":           "perl runs it as its debugger",
	"RUBYOPT":           "ruby takes options from it",
	"RUBYLIB":           "ruby loads libraries from it",
	"JAVA_TOOL_OPTIONS": "the JVM takes options (agents) from it",
	"_JAVA_OPTIONS":     "the JVM takes options (agents) from it",
	"JDK_JAVA_OPTIONS":  "the JVM takes options (agents) from it",
	"CLASSPATH":         "the JVM loads classes from it",
	"GCONV_PATH":        "the C library loads charset modules from it",
	"GLIBC_TUNABLES":    "the C library's loader reads it",
	"LOCPATH":           "the C library loads locales from it",
	"NLSPATH":           "the C library loads message catalogs from it",
	"HOSTALIASES":       "the resolver reads the file it names",
	"OPENSSL_CONF":      "OpenSSL loads engines and modules its configuration names",
	"OPENSSL_ENGINES":   "OpenSSL loads engines from it",
	"OPENSSL_MODULES":   "OpenSSL loads providers from it",
	"EDITOR":            "programs run it as the editor",
	"VISUAL":            "programs run it as the editor",
	"PAGER":             "programs run it as the pager",
	"MANPAGER":          "man runs it as the pager",
	"LESSOPEN":          "less runs it as an input filter",
	"LESSCLOSE":         "less runs it as an input filter",
	"BROWSER":           "programs run it to open URLs",
	"SSH_ASKPASS":       "ssh runs it for passwords",
	"SUDO_ASKPASS":      "sudo runs it for passwords",
	"ZDOTDIR":           "zsh runs its start-up files from it",
	"XDG_CONFIG_HOME":   "programs (git among them) read their configuration from it",
	"XDG_CONFIG_DIRS":   "programs read their configuration from it",
	"GOFLAGS":           "go takes flags (-toolexec) from it",
	"GOENV":             "go reads its settings from the file it names",
	"GOTOOLCHAIN":       "go downloads and runs the toolchain it names",
	"CC":                "build tools run it as the compiler",
	"CXX":               "build tools run it as the compiler",
	"CPP":               "build tools run it as the preprocessor",
	"MAKEFLAGS":         "make takes options from it",
	"MAKEFILES":         "make reads the makefiles it names",
	"RUSTC_WRAPPER":     "cargo runs it around the compiler",
	"RUSTC":             "cargo runs it as the compiler",
	"TAR_OPTIONS":       "tar takes options (--to-command) from it",
	"WGETRC":            "wget reads its configuration from it",
	"CURL_HOME":         "curl reads its configuration from it",
	"INPUTRC":           "readline reads it",
	"TERMINFO":          "programs read terminal descriptions from it",
	"PS1":               "an interactive shell expands it",
}

var codeEnvPrefixes = []struct{ prefix, why string }{
	{"GIT_", "git takes configuration (core.fsmonitor, aliases), hooks and programs to run from GIT_* variables"},
	{"PYTHON", "python takes start-up code, module paths and a breakpoint hook from PYTHON* variables"},
	{"NPM_CONFIG_", "npm takes its configuration (script-shell, node-options) from npm_config_* variables"},
	{"CARGO_", "cargo takes its configuration (wrappers, runners) from CARGO_* variables"},
	{"PIP_", "pip takes its configuration (index, build options) from PIP_* variables"},
	{"UV_", "uv takes its configuration from UV_* variables"},
	{"DOTNET_", ".NET takes start-up hooks from DOTNET_* variables"},
	{"COMPLUS_", ".NET takes start-up hooks from COMPlus_* variables"},
}
