package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: the absolute-link fallback. os.Root refuses every absolute
// symlink, even one whose target is inside the workspace; inRoot is the one
// place that refusal is retried (TestLinkFallbackHasOneHome keeps it so).

// maxSymlinks bounds the links the absolute-link fallback follows (as the
// kernel's ELOOP limit does).
const maxSymlinks = 40

// inRoot runs f on rel in r; it is to this package what doInRoot is to
// os.Root. When os.Root refuses with an escape (an absolute symlink on the
// way, or a link that really leads out), the links of rel are resolved by
// hand (followLinks; followFinal says whether the last component is
// followed) and f runs once more on the rewritten name, which os.Root
// confines again, so a link swapped meanwhile is still refused by the
// kernel-facing walk.
//
// The errors, the same for every operation: f's own error is returned as it
// is, unmapped (the caller maps it with its op and the caller's path); a
// failure of the hand resolution (a link leading out, a loop, an unreadable
// link) is returned instead of f's refusal; when the resolution rewrites
// nothing, f's refusal stands.
func inRoot[T any](w *dirWS, r *os.Root, rel string, followFinal bool, f func(r *os.Root, rel string) (T, error)) (T, error) {
	v, err := f(r, rel)
	if !isEscape(err) {
		return v, err
	}
	rel2, ferr := w.followLinks(r, rel, followFinal)
	if ferr != nil {
		var zero T
		return zero, ferr
	}
	if rel2 == rel {
		return v, err
	}
	return f(r, rel2)
}

// do is inRoot for a Workspace method on the client path p: p resolved to
// rel, the workspace's root opened (the scope's directory created first
// when create), and any error mapped with o and p.
func do[T any](w *dirWS, o op, p string, create, followFinal bool, f func(r *os.Root, rel string) (T, error)) (T, error) {
	var zero T
	rel, err := w.rel(p)
	if err != nil {
		return zero, err
	}
	r, err := w.handle(create)
	if err != nil {
		return zero, mapErr(o, p, err)
	}
	v, err := inRoot(w, r, rel, followFinal, f)
	if err != nil {
		return zero, mapErr(o, p, err)
	}
	return v, nil
}

// run is do for an operation that returns only an error.
func (w *dirWS) run(o op, p string, create, followFinal bool, f func(r *os.Root, rel string) error) error {
	_, err := do(w, o, p, create, followFinal, func(r *os.Root, rel string) (struct{}, error) {
		return struct{}{}, f(r, rel)
	})
	return err
}

// resolveLinks is rel with every symlink on its way, the last one included,
// resolved (inside the workspace, or an escape error): the directory a
// link really lands in (Symlink, Readlink), the file a write through a link
// really replaces (atomicWrite). It is the walk of the fallback, asked for
// its result.
func (w *dirWS) resolveLinks(r *os.Root, rel string) (string, error) {
	return w.followLinks(r, rel, true)
}

// checkLinks reports an escape if an existing symlink on rel's way, the last
// one included, leads out. One lstat walk in the common case: os.Root follows
// the intermediate links and refuses escaping ones; a final link is checked
// with stat; the hand-resolution is only for absolute links os.Root refuses.
// A missing or otherwise unusable path is not an escape.
func (w *dirWS) checkLinks(r *os.Root, rel string) error {
	if w.linksInsideFast(rel) {
		return nil
	}
	_, err := inRoot(w, r, rel, true, func(r *os.Root, rel string) (struct{}, error) {
		fi, err := r.Lstat(rel)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			_, err = r.Stat(rel)
		}
		return struct{}{}, err
	})
	if err != nil && errcode.Is(mapErr(opResolve, rel, err), errcode.PathEscapeAttempt) {
		return err
	}
	return nil
}

// followLinks resolves the symlinks of rel by hand, for the one case os.Root
// refuses although the link stays inside: an absolute target (os.Root never
// follows absolute links). An absolute target inside the workspace becomes the
// equivalent relative path; anything leading out is an escape. The result is
// only a rewritten name: it is opened through os.Root again, so a link swapped
// meanwhile is still confined by the kernel-facing walk. A missing component
// ends the walk (the rest is kept lexically). With followFinal false the last
// component is not followed (lstat semantics).
func (w *dirWS) followLinks(r *os.Root, rel string, followFinal bool) (string, error) {
	if rel == "." {
		return rel, nil
	}
	parts := strings.Split(rel, "/")
	var done []string
	links := 0
	missing := false
	for i := 0; i < len(parts); i++ {
		c := parts[i]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", &fs.PathError{Op: "resolve", Path: rel, Err: errRootEscapeOr()}
			}
			done = done[:len(done)-1]
			continue
		}
		last := i == len(parts)-1
		if missing || (last && !followFinal) {
			done = append(done, c)
			continue
		}
		cand := strings.Join(append(done, c), "/")
		fi, err := r.Lstat(cand)
		if err != nil {
			if isNotExist(err) {
				missing = true
				done = append(done, c)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		links++
		if links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: rel, Err: syscall.ELOOP}
		}
		target, err := r.Readlink(cand)
		if err != nil {
			return "", err
		}
		rest := parts[i+1:]
		if strings.HasPrefix(target, "/") {
			t := path.Clean(target)
			switch {
			case within(w.root, t):
				t = relTo(w.root, t)
			case w.alias != "" && within(w.alias, t):
				t = relTo(w.alias, t)
			default:
				return "", &fs.PathError{Op: "resolve", Path: rel, Err: errRootEscapeOr()}
			}
			done = done[:0]
			target = t
		}
		parts = append(strings.Split(target, "/"), rest...)
		i = -1
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

func errRootEscapeOr() error {
	if errRootEscape != nil {
		return errRootEscape
	}
	return errors.New(rootEscapeText)
}
