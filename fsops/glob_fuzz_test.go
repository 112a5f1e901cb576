package fsops

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// refSegments is matchSegments by trying every split at every "**" (what
// matchSegments replaced for its exponential time; fine for the short
// inputs a fuzz run gives it): a "**" matches any number of segments, a
// trailing run of "**" at least one.
func refSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		trailing := true
		for _, p := range pat {
			trailing = trailing && p == "**"
		}
		if trailing {
			return len(name) > 0
		}
		for i := 0; i <= len(name); i++ {
			if refSegments(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	return len(name) > 0 && matchSegment(pat[0], name[0]) && refSegments(pat[1:], name[1:])
}

// FuzzGlobMatch: globMatch, and the compiled form the tree walk uses,
// agree with matching by trying every split at every "**".
func FuzzGlobMatch(f *testing.F) {
	for _, p := range []string{"*.go", "**/*.go", "src/**", "src/**/*.ts", "**", "*", "?.txt", "[ab].txt", "[!a].txt",
		"{a,b}/*.js", "**/node_modules/**", "**/x/**/y", "!*.go", "a/**/b", "**/**", "a/**/**/b", "./a", "a//b/", `\*`} {
		f.Add(p, "a/x/z/y")
		f.Add(p, "src/b/c.ts")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 128 || strings.Count(pattern, "{") > 4 {
			return // the reference's time grows with the splits
		}
		neg := false
		p := pattern
		for strings.HasPrefix(p, "!") {
			neg, p = !neg, p[1:]
		}
		want := false
		for _, alt := range expandBraces(p) {
			want = want || refSegments(splitSegs(alt), splitSegs(name))
		}
		want = want != neg
		if got := globMatch(pattern, name); got != want {
			t.Fatalf("globMatch(%q, %q) = %v; every split gives %v", pattern, name, got, want)
		}
		if got := compileGlob(pattern).match(splitSegs(name)); got != want {
			t.Fatalf("compileGlob(%q).match(%q) = %v; every split gives %v", pattern, name, got, want)
		}
	})
}

// ignoredByWalk is how the walk applies an ignore file to a file at rel:
// a directory on the way that is ignored is not entered; else the file's
// own last matching rule decides.
func ignoredByWalk(f *ignoreFile, rel string) bool {
	segs := strings.Split(rel, "/")
	for i := 1; i < len(segs); i++ {
		if m, white := f.match(strings.Join(segs[:i], "/"), true); m && !white {
			return true
		}
	}
	m, white := f.match(rel, false)
	return m && !white
}

// FuzzIgnoreMatchesGit: a .gitignore ignores a file exactly when git
// check-ignore says it does. Without git (or a plain go test run, where
// only the seeds run) the parse and match run on their own.
func FuzzIgnoreMatchesGit(f *testing.F) {
	for _, c := range [][2]string{
		{"d/\n*.log\n!keep.log\nsub/x\n", "d/x"}, {"d/\n*.log\n!keep.log\n", "d/keep.log"}, {"*.log\n!keep.log\n", "a/keep.log"},
		{"/a\n", "b/a"}, {"/a\n", "a"}, {"a/**/b\n", "a/b"}, {"a/**\n", "a/x/y"}, {"**/foo\n", "x/foo"}, {"foo/\n", "foo"},
		{"\\#x\n\\!y\n#z\n", "#x"}, {"a\\ \n", "a "}, {"a  \n", "a"}, {"[ab]?\n", "bz"}, {"x/*/y\n", "x/q/y"}, {"*\n!*/\n!*.go\n", "d/a.go"},
	} {
		f.Add(c[0], c[1])
	}
	git, gitErr := exec.LookPath("git")
	repo := f.TempDir()
	if gitErr == nil {
		if out, err := exec.Command(git, "init", "-q", repo).CombinedOutput(); err != nil {
			f.Logf("git init: %v %s; comparing with git is left out", err, out)
			gitErr = err
		}
	}
	f.Fuzz(func(t *testing.T, text, rel string) {
		ign := parseIgnore(".", text)
		got := ignoredByWalk(ign, rel)
		if !strings.Contains(text, "!") {
			for _, r := range ign.rules {
				if r.neg {
					t.Fatalf("%q: a whitelist rule without a '!'", text)
				}
			}
		}
		if gitErr != nil || !forGit(text, rel) {
			return
		}
		if err := os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(git, "-C", repo, "check-ignore", "--no-index", "-v", "-n", "--stdin")
		cmd.Stdin = strings.NewReader(rel + "\n")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) { // 1: nothing ignored
			t.Fatalf("git check-ignore: %v", err)
		}
		// "source:line:pattern\tpath", or "::\tpath" for no match.
		src, _, _ := strings.Cut(string(out), "\t")
		fields := strings.SplitN(src, ":", 3)
		want := len(fields) == 3 && fields[0] != "" && !strings.HasPrefix(fields[2], "!")
		if got != want {
			t.Fatalf(".gitignore %q, file %q: ignored %v; git check-ignore says %q", text, rel, got, out)
		}
	})
}

// forGit: inputs git reads as this parser does: a clean relative path of a
// file (not pathspec magic, ":...") and a .gitignore without carriage returns, NULs, or glob features
// git has and path.Match lacks ([[:class:]], ranges of bytes >= 0x80).
func forGit(text, rel string) bool {
	if rel == "" || len(rel) > 100 || len(text) > 200 || strings.ContainsAny(rel, "\x00\n\r\\\"*?[") || strings.ContainsAny(text, "\x00\r") ||
		strings.Contains(text, "[:") || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, ":") || strings.HasSuffix(rel, "/") {
		return false
	}
	for _, s := range strings.Split(rel, "/") {
		if s == "" || s == "." || s == ".." || s == ".git" {
			return false
		}
	}
	for _, b := range []byte(text + rel) {
		if b >= 0x80 || b < 0x20 && b != '\n' && b != '\t' {
			return false
		}
	}
	return true
}
