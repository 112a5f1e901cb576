package policy

import "strings"

// DeniedEnv reports the environment variable names the executor drops
// from every command's environment, because they would let a variable take
// over the shell or the dynamic linker (LD_PRELOAD, BASH_ENV, exported bash
// functions, ...). They never reach a command, so the policy does not judge
// them (CheckEnv).
func DeniedEnv(name string) bool {
	switch name {
	case "BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
		"CDPATH", "GLOBIGNORE", "BASH_XTRACEFD", "HOME", "PWD":
		return true
	}
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") ||
		strings.HasPrefix(name, "BASH_FUNC_")
}

// ValidEnvName reports a name a shell accepts for a variable: letters,
// digits and _, not starting with a digit.
func ValidEnvName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; !(b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}
