// Package deploy holds the container image (Dockerfile) and the Kubernetes
// manifests (kubernetes/). These tests check them without a container
// engine or a cluster, neither of which CI has:
//
//   - the Dockerfile is parsed with BuildKit's own parser and instruction
//     decoder (what `docker build` runs first), its build stage's `go build`
//     command is run on the host, and the image's default configuration is
//     run through the binary's --check-config;
//   - the manifests are built with the kustomize library (what
//     `kubectl apply -k` runs), every resulting object and every source file
//     is decoded strictly into the k8s.io/api types (an unknown or misspelt
//     field fails), and the sidecar's arguments, environment and probes are
//     run against the built binary and a live daemon.
//
// The image itself is never built here, and the manifests never meet an
// API server: admission rules, the image pull and the runtime's behaviour
// are outside what these tests can see.
package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	sidecarName = "agentbe-daemon"
	daemonPort  = 3001
	imageUID    = 10001
)

func TestMain(m *testing.M) {
	// The daemon refuses a token or key file that a user other than its
	// owner could change, or one in such a directory (docs/configuration.md):
	// the fixtures are made as an operator makes them, whatever the umask.
	syscall.Umask(syscall.Umask(0) | 0o022)
	code := m.Run()
	cleanupDaemonBin()
	os.Exit(code)
}

// ---- Dockerfile ---------------------------------------------------------

// parseDockerfile parses deploy/Dockerfile as BuildKit does before a build:
// syntax, then every instruction's arguments and flags. Parser and linter
// warnings fail the test.
func parseDockerfile(t *testing.T) []instructions.Stage {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile parser warning: %s (line %d)", w.Short, w.Location.Start.Line)
	}
	lint := linter.New(&linter.Config{
		Warn: func(rule, description, url, msg string, loc []parser.Range) {
			line := 0
			if len(loc) > 0 {
				line = loc[0].Start.Line
			}
			t.Errorf("Dockerfile lint %s: %s (line %d)", rule, msg, line)
		},
	})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile instructions: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s); want a build stage and a runtime stage", len(stages))
	}
	return stages
}

func commandsOf[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// buildRun is the build stage's RUN that compiles the binary.
func buildRun(t *testing.T, stages []instructions.Stage) (instructions.Stage, string) {
	t.Helper()
	for _, s := range stages[:len(stages)-1] {
		for _, r := range commandsOf[*instructions.RunCommand](s) {
			line := strings.Join(r.CmdLine, " ")
			if strings.Contains(line, "go build") {
				if !r.PrependShell {
					t.Fatalf("the go build RUN is in exec form; it needs a shell for CGO_ENABLED=0 and ${VERSION}")
				}
				return s, line
			}
		}
	}
	t.Fatal("no RUN ... go build in a build stage")
	return instructions.Stage{}, ""
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	final := stages[len(stages)-1]

	t.Run("static, trimmed, version-stamped build", func(t *testing.T) {
		s, line := buildRun(t, stages)
		if !strings.HasPrefix(s.BaseName, "golang:") {
			t.Errorf("build stage FROM %s, want a golang image", s.BaseName)
		}
		for _, want := range []string{
			"CGO_ENABLED=0 go build",
			"-trimpath",
			`-ldflags "-s -w -X main.version=${VERSION}"`,
			"./cmd/agent-backend",
		} {
			if !strings.Contains(line, want) {
				t.Errorf("the build RUN lacks %q:\n%s", want, line)
			}
		}
		// VERSION must be declared in the stage (an ARG before the first
		// FROM is not visible inside a stage without being re-declared).
		declared := false
		for _, a := range commandsOf[*instructions.ArgCommand](s) {
			for _, kv := range a.Args {
				declared = declared || kv.Key == "VERSION"
			}
		}
		if !declared {
			t.Error("the build stage uses ${VERSION} without ARG VERSION")
		}
	})

	t.Run("runtime stage", func(t *testing.T) {
		if !regexp.MustCompile(`^debian:[0-9a-z.]+-slim$`).MatchString(final.BaseName) {
			t.Errorf("runtime FROM %s, want debian:<release>-slim", final.BaseName)
		}
		// The tools the agent's commands and the daemon expect.
		var apt string
		for _, r := range commandsOf[*instructions.RunCommand](final) {
			if l := strings.Join(r.CmdLine, " "); strings.Contains(l, "apt-get install") {
				apt = l
			}
		}
		fields := strings.Fields(apt)
		for _, pkg := range []string{"bubblewrap", "ripgrep", "git", "ca-certificates"} {
			if !slices.Contains(fields, pkg) {
				t.Errorf("the runtime stage does not install %s (apt line: %q)", pkg, apt)
			}
		}
		if !strings.Contains(apt, "--no-install-recommends") || !strings.Contains(apt, "rm -rf /var/lib/apt/lists/*") {
			t.Errorf("the apt line keeps recommends or the package lists in the image: %q", apt)
		}
		// The daemon, and its sandbox trampoline beside it (where the
		// daemon looks for it).
		for _, dest := range []string{"/usr/local/bin/agent-backend", "/usr/local/bin/agentbe-sandbox"} {
			copied := false
			for _, c := range commandsOf[*instructions.CopyCommand](final) {
				if c.From == stages[0].Name && c.DestPath == dest {
					copied = true
				}
			}
			if !copied {
				t.Errorf("the runtime stage does not COPY --from=%s the binary to %s", stages[0].Name, dest)
			}
		}
	})

	t.Run("non-root numeric USER", func(t *testing.T) {
		users := commandsOf[*instructions.UserCommand](final)
		if len(users) == 0 {
			t.Fatal("the runtime stage has no USER: the container would run as root")
		}
		// The last USER is the one the container runs as. Kubernetes'
		// runAsNonRoot can only check a numeric one.
		u := users[len(users)-1].User
		uid, gid, _ := strings.Cut(u, ":")
		n, err := strconv.Atoi(uid)
		if err != nil || n == 0 {
			t.Fatalf("USER %s: want a numeric, non-zero uid", u)
		}
		if n != imageUID {
			t.Errorf("USER uid %d, but the Kubernetes manifests run as %d", n, imageUID)
		}
		if gid != "" {
			if g, err := strconv.Atoi(gid); err != nil || g == 0 {
				t.Errorf("USER %s: want a numeric, non-zero gid", u)
			}
		}
		// Nothing after USER needs root.
		after := false
		for _, c := range final.Commands {
			if c == instructions.Command(users[len(users)-1]) {
				after = true
				continue
			}
			if _, isRun := c.(*instructions.RunCommand); after && isRun {
				t.Errorf("RUN after the final USER: %s", c)
			}
		}
	})

	t.Run("HEALTHCHECK via agent-backend health", func(t *testing.T) {
		hcs := commandsOf[*instructions.HealthCheckCommand](final)
		if len(hcs) != 1 {
			t.Fatalf("%d HEALTHCHECKs in the runtime stage, want 1", len(hcs))
		}
		h := hcs[0].Health
		if want := []string{"CMD", "agent-backend", "health"}; !slices.Equal(h.Test, want) {
			t.Errorf("HEALTHCHECK test %q, want %q (exec form: the image needs no curl or shell quoting)", h.Test, want)
		}
		if h.Interval <= 0 || h.Timeout <= 0 || h.Retries <= 0 {
			t.Errorf("HEALTHCHECK without explicit interval/timeout/retries: %+v", h)
		}
	})

	t.Run("EXPOSE, ENTRYPOINT, CMD", func(t *testing.T) {
		var ports []string
		for _, e := range commandsOf[*instructions.ExposeCommand](final) {
			ports = append(ports, e.Ports...)
		}
		if !slices.Contains(ports, strconv.Itoa(daemonPort)) {
			t.Errorf("EXPOSE %q lacks %d", ports, daemonPort)
		}
		eps := commandsOf[*instructions.EntrypointCommand](final)
		if len(eps) != 1 || eps[0].PrependShell || !slices.Equal(eps[0].CmdLine, []string{"agent-backend"}) {
			t.Errorf("want exactly ENTRYPOINT [\"agent-backend\"] in exec form (signals reach the daemon, not a shell)")
		}
		cmds := commandsOf[*instructions.CmdCommand](final)
		if len(cmds) != 1 || cmds[0].PrependShell || len(cmds[0].CmdLine) == 0 || cmds[0].CmdLine[0] != "daemon" {
			t.Errorf("want one exec-form CMD starting with daemon")
		}
	})
}

// TestDockerfileBuildCommand runs the build stage's RUN on the host, in the
// module root (what the stage's COPY . . gives it), with /out replaced by a
// scratch directory: the command the image build would run compiles, and the
// binary reports the stamped version.
func TestDockerfileBuildCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the daemon; skipped with -short")
	}
	_, line := buildRun(t, parseDockerfile(t))
	out := t.TempDir()
	script := strings.ReplaceAll(line, "/out/", out+"/")
	if strings.Contains(script, "/out") {
		t.Fatalf("the build RUN refers to /out in a way this test does not rewrite: %s", line)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = ".."
	// CGO_ENABLED must come from the command itself: the environment says 1.
	cmd.Env = append(os.Environ(), "VERSION=9.8.7-dockerfiletest", "CGO_ENABLED=1")
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, got)
	}
	// main.version is the bare X.Y.Z; `version` adds the "v".
	if !strings.Contains(string(got), "agent-backend v9.8.7-dockerfiletest\n") {
		t.Errorf("the built binary's version output does not show the stamped version:\n%s", got)
	}
	// A static binary has no program interpreter (ld.so); the runtime stage
	// relies on that only loosely (it is Debian too) but the docs promise it.
	bin, err := os.ReadFile(filepath.Join(out, "agent-backend"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bin, []byte("/lib64/ld-linux")) || bytes.Contains(bin, []byte("/lib/ld-linux")) {
		t.Error("the binary names a dynamic loader: CGO_ENABLED=0 did not take effect")
	}
}

// TestImageDefaults runs the image's default command (ENTRYPOINT + CMD with
// the runtime stage's ENV) through --check-config: with a token it is a
// valid configuration; without one it is refused, so the image cannot be
// started open to the network by accident.
func TestImageDefaults(t *testing.T) {
	bin := daemonBin(t)
	final := parseDockerfile(t)
	stage := final[len(final)-1]
	tmp := t.TempDir()
	// The image's paths, moved under a scratch directory.
	moved := map[string]string{
		"/workspace":       filepath.Join(tmp, "workspace"),
		"/var/lib/agentbe": filepath.Join(tmp, "state"),
	}
	move := func(v string) string {
		for from, to := range moved {
			if v == from || strings.HasPrefix(v, from+"/") {
				return to + strings.TrimPrefix(v, from)
			}
		}
		return v
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range commandsOf[*instructions.EnvCommand](stage) {
		for _, kv := range e.Env {
			if strings.Contains(kv.Value, "$") {
				t.Fatalf("ENV %s=%s: a substitution this test does not make", kv.Key, kv.Value)
			}
			env = append(env, kv.Key+"="+move(kv.Value))
		}
	}
	cmds := commandsOf[*instructions.CmdCommand](stage)
	if len(cmds) != 1 {
		t.Fatal("want one CMD")
	}
	args := append(slices.Clone(cmds[0].CmdLine), "--check-config")

	run := func(extraEnv ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(slices.Clone(env), extraEnv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	t.Run("refused without a token", func(t *testing.T) {
		_, stderr, err := run()
		if err == nil {
			t.Fatal("the image's default configuration passed --check-config without a token")
		}
		if !strings.Contains(stderr, "no auth token") {
			t.Errorf("unexpected refusal: %s", stderr)
		}
	})
	t.Run("valid with a token file", func(t *testing.T) {
		token := filepath.Join(tmp, "token")
		if err := os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := run("AGENTBE_AUTH_TOKEN_FILE=" + token)
		if err != nil {
			t.Fatalf("--check-config: %v\n%s", err, stderr)
		}
		for _, line := range []string{
			`bind: "0.0.0.0"`,
			fmt.Sprintf("port: %d", daemonPort),
			fmt.Sprintf("root: %q", moved["/workspace"]),
			fmt.Sprintf("ssh-host-key: %q", filepath.Join(moved["/var/lib/agentbe"], "ssh_host_ed25519_key")),
		} {
			if !strings.Contains(stdout, line+"\n") {
				t.Errorf("effective config lacks %s:\n%s", line, stdout)
			}
		}
	})
}

// ---- Kubernetes ---------------------------------------------------------

// decodeStrict decodes one Kubernetes object by its kind into the k8s.io/api
// type, refusing unknown and duplicate fields.
func decodeStrict(t *testing.T, name string, data []byte) any {
	t.Helper()
	if trimmed := bytes.TrimSpace(stripComments(data)); bytes.HasPrefix(trimmed, []byte("- ")) {
		// A JSON patch (RFC 6902) for a kustomize patches: entry; what it
		// adds is checked in the built output, decoded strictly below.
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := yaml.UnmarshalStrict(data, &ops); err != nil {
			t.Fatalf("%s: strict decode as a JSON patch: %v", name, err)
		}
		for i, op := range ops {
			if !slices.Contains([]string{"add", "remove", "replace"}, op.Op) || !strings.HasPrefix(op.Path, "/") {
				t.Fatalf("%s: operation %d: %q %q", name, i, op.Op, op.Path)
			}
		}
		return ops
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var obj any
	switch meta.APIVersion + "/" + meta.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "v1/Secret":
		obj = &corev1.Secret{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		obj = &types.Kustomization{}
	default:
		t.Fatalf("%s: unexpected %s %s (add it to decodeStrict)", name, meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: strict decode as %s: %v", name, meta.Kind, err)
	}
	return obj
}

// stripComments drops whole-line YAML comments.
func stripComments(data []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// TestManifestSourcesStrict decodes every YAML file under kubernetes/,
// patches included, so a misspelt field in a patch (which kustomize would
// carry into the output or silently drop) fails here.
func TestManifestSourcesStrict(t *testing.T) {
	n := 0
	err := filepath.WalkDir("kubernetes", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			t.Errorf("%s: unexpected file in kubernetes/", path)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte("\n---")) {
			t.Errorf("%s: one object per file, please", path)
		}
		decodeStrict(t, path, data)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("only %d manifest files found", n)
	}
}

// build runs kustomize (the library kubectl -k uses) on a directory and
// decodes the output strictly.
func build(t *testing.T, dir string) (*appsv1.Deployment, []any) {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var dep *appsv1.Deployment
	var all []any
	for _, r := range rm.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj := decodeStrict(t, dir+": "+r.GetKind()+"/"+r.GetName(), data)
		all = append(all, obj)
		if d, ok := obj.(*appsv1.Deployment); ok {
			if dep != nil {
				t.Fatalf("%s: more than one Deployment", dir)
			}
			dep = d
		}
	}
	if dep == nil {
		t.Fatalf("%s: no Deployment", dir)
	}
	return dep, all
}

func sidecar(t *testing.T, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == sidecarName {
			return &spec.InitContainers[i]
		}
	}
	for _, c := range spec.Containers {
		if c.Name == sidecarName {
			t.Fatalf("%s is a regular container, not a native sidecar (an init container with restartPolicy: Always)", sidecarName)
		}
	}
	t.Fatalf("no init container %s", sidecarName)
	return nil
}

func argValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%s with a value not found in args %q", flag, args)
	}
	return args[i+1]
}

func volume(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Volume {
	t.Helper()
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	t.Fatalf("no volume %q", name)
	return nil
}

// mountFor returns the mount of c that contains path, the deepest one.
func mountFor(t *testing.T, c *corev1.Container, path string) *corev1.VolumeMount {
	t.Helper()
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			if best == nil || len(m.MountPath) > len(best.MountPath) {
				best = &c.VolumeMounts[i]
			}
		}
	}
	if best == nil {
		t.Fatalf("container %s: %s is on no volume mount", c.Name, path)
	}
	return best
}

// probeURL returns the URL a probe checks: an exec probe must run
// `agent-backend health --url U`; an httpGet probe is read as its URL.
func probeURL(t *testing.T, name string, p *corev1.Probe) *url.URL {
	t.Helper()
	if p == nil {
		t.Fatalf("no %s probe", name)
	}
	switch {
	case p.Exec != nil:
		cmd := p.Exec.Command
		if len(cmd) < 2 || cmd[0] != "agent-backend" || cmd[1] != "health" {
			t.Fatalf("%s probe runs %q, want agent-backend health", name, cmd)
		}
		u, err := url.Parse(argValue(t, cmd, "--url"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	case p.HTTPGet != nil:
		return &url.URL{Scheme: strings.ToLower(string(p.HTTPGet.Scheme)), Host: net.JoinHostPort(p.HTTPGet.Host, p.HTTPGet.Port.String()), Path: p.HTTPGet.Path}
	}
	t.Fatalf("%s probe is neither exec nor httpGet", name)
	return nil
}

// checkHardened asserts what every container must have, whatever the
// overlay: not root, a read-only root, no privilege escalation, no
// capabilities, a seccomp profile (its own or the pod's), resources.
func checkHardened(t *testing.T, pod *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("container %s has no securityContext", c.Name)
	}
	nonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
	if sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		t.Errorf("container %s: runAsNonRoot is not true", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("container %s is privileged", c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container %s: capabilities must drop ALL and add none: %+v", c.Name, sc.Capabilities)
	}
	if sc.SeccompProfile == nil && (pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil) {
		t.Errorf("container %s has no seccomp profile", c.Name)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			t.Errorf("container %s: %s request and limit must both be set", c.Name, r)
		} else if req.Cmp(lim) > 0 {
			t.Errorf("container %s: %s request %s exceeds the limit %s", c.Name, r, req.String(), lim.String())
		}
	}
	for _, e := range c.Env {
		if strings.Contains(e.Name, "TOKEN") && e.Name != "AGENTBE_TOKEN_FILE" {
			t.Errorf("container %s has %s in its environment: the token must be a file", c.Name, e.Name)
		}
	}
}

// checkBase asserts the sidecar layout that every overlay keeps.
func checkBase(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	pod := &dep.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != imageUID {
		t.Errorf("pod runAsUser is not the image's uid %d", imageUID)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false")
	}

	d := sidecar(t, pod)
	if d.RestartPolicy == nil || *d.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("init container %s has restartPolicy %v: not a native sidecar", d.Name, d.RestartPolicy)
	}
	if len(pod.Containers) == 0 {
		t.Fatal("no agent container")
	}
	for i := range pod.InitContainers {
		checkHardened(t, pod, &pod.InitContainers[i])
	}
	for i := range pod.Containers {
		checkHardened(t, pod, &pod.Containers[i])
	}
	if len(d.Command) != 0 {
		t.Errorf("the sidecar overrides the image's ENTRYPOINT: %q", d.Command)
	}
	if len(d.Args) == 0 || d.Args[0] != "daemon" {
		t.Fatalf("sidecar args %q do not start with daemon", d.Args)
	}

	// Loopback only, on the port the agent and the probes use.
	if got := argValue(t, d.Args, "--bind"); got != "127.0.0.1" {
		t.Errorf("--bind %s: the sidecar should listen on loopback only", got)
	}
	if got := argValue(t, d.Args, "--port"); got != strconv.Itoa(daemonPort) {
		t.Errorf("--port %s, want %d", got, daemonPort)
	}
	for _, name := range []string{"startup", "readiness", "liveness"} {
		p := map[string]*corev1.Probe{"startup": d.StartupProbe, "readiness": d.ReadinessProbe, "liveness": d.LivenessProbe}[name]
		u := probeURL(t, name, p)
		if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(daemonPort) || u.Path != "/health" {
			t.Errorf("%s probe checks %s, want http://127.0.0.1:%d/health", name, u, daemonPort)
		}
		if p.TimeoutSeconds <= 0 || p.PeriodSeconds <= 0 || p.FailureThreshold <= 0 {
			t.Errorf("%s probe leaves timeout/period/failureThreshold to defaults: %+v", name, p)
		}
	}

	// The token: a read-only file from a Secret, named by --auth-token-file.
	if slices.Contains(d.Args, "--auth-token") {
		t.Error("the sidecar passes --auth-token: the token would be in the pod spec")
	}
	tokenPath := argValue(t, d.Args, "--auth-token-file")
	m := mountFor(t, d, tokenPath)
	if !m.ReadOnly {
		t.Errorf("the token mount %s is not readOnly", m.MountPath)
	}
	v := volume(t, pod, m.Name)
	if v.Secret == nil {
		t.Fatalf("the token file %s is not on a Secret volume (volume %q)", tokenPath, m.Name)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(tokenPath, m.MountPath), "/")
	if !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
		t.Errorf("secret volume %q has no item at %q: items %+v", m.Name, rel, v.Secret.Items)
	}
	if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
		t.Errorf("secret volume %q is readable by others: defaultMode %v", m.Name, v.Secret.DefaultMode)
	}

	// The workspace: shared with the agent, writable.
	root := argValue(t, d.Args, "--root")
	wm := mountFor(t, d, root)
	if wm.ReadOnly || wm.MountPath != root {
		t.Errorf("--root %s: mounted at %s readOnly=%v", root, wm.MountPath, wm.ReadOnly)
	}
	shared := false
	for i := range pod.Containers {
		for _, am := range pod.Containers[i].VolumeMounts {
			shared = shared || am.Name == wm.Name
		}
	}
	if !shared {
		t.Errorf("no agent container mounts the workspace volume %q", wm.Name)
	}
	// The host key from a Secret: one identity across pods.
	keyPath := argValue(t, d.Args, "--ssh-host-key")
	km := mountFor(t, d, keyPath)
	kv := volume(t, pod, km.Name)
	if !km.ReadOnly || kv.Secret == nil {
		t.Fatalf("--ssh-host-key %s is not on a read-only Secret volume (mount %s)", keyPath, km.MountPath)
	}
	if rel := strings.TrimPrefix(strings.TrimPrefix(keyPath, km.MountPath), "/"); !slices.ContainsFunc(kv.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
		t.Errorf("secret volume %q has no item at %q: items %+v", km.Name, rel, kv.Secret.Items)
	}
	if kv.Secret.DefaultMode == nil || *kv.Secret.DefaultMode&0o007 != 0 {
		t.Errorf("the host key's secret volume %q is readable by others: defaultMode %v", km.Name, kv.Secret.DefaultMode)
	}
	checkStorage(t, pod)

	// The agent finds the daemon on loopback.
	agentURL := ""
	for _, e := range pod.Containers[0].Env {
		if e.Name == "AGENTBE_URL" {
			agentURL = e.Value
		}
	}
	if agentURL != fmt.Sprintf("http://127.0.0.1:%d", daemonPort) {
		t.Errorf("the agent's AGENTBE_URL is %q", agentURL)
	}
}

// storageHeadroom is what the containers' ephemeral-storage limits must
// leave beyond the emptyDirs' size limits (their own writes, logs).
var storageHeadroom = resource.MustParse("512Mi")

// checkStorage: every disk-backed emptyDir is bounded, and the containers'
// ephemeral-storage limits (whose sum is the pod's, against which emptyDir
// usage counts) cover those bounds, so a workspace filled to its sizeLimit
// does not get the pod evicted; every container has a limit, without which
// the pod has none.
func checkStorage(t *testing.T, pod *corev1.PodSpec) {
	t.Helper()
	need := storageHeadroom.DeepCopy()
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		if v.EmptyDir.SizeLimit == nil {
			t.Errorf("emptyDir %q has no sizeLimit", v.Name)
			continue
		}
		need.Add(*v.EmptyDir.SizeLimit)
	}
	var have resource.Quantity
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		lim, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if !ok {
			t.Errorf("container %s has no ephemeral-storage limit (then the pod has none)", c.Name)
			continue
		}
		if req, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; ok && req.Cmp(lim) > 0 {
			t.Errorf("container %s requests more ephemeral-storage (%s) than its limit (%s)", c.Name, req.String(), lim.String())
		}
		have.Add(lim)
	}
	if have.Cmp(need) < 0 {
		t.Errorf("the containers' ephemeral-storage limits add up to %s, under the emptyDirs' size limits plus %s (%s): the pod would be evicted before the workspace is full",
			have.String(), storageHeadroom.String(), need.String())
	}
}

func envValue(c *corev1.Container, name string) (string, int) {
	v, n := "", 0
	for _, e := range c.Env {
		if e.Name == name {
			v, n = e.Value, n+1
		}
	}
	return v, n
}

func TestKustomizeBase(t *testing.T) {
	dep, all := build(t, "kubernetes/base")
	if len(all) != 2 {
		t.Errorf("the base has %d objects, want the Deployment and its NetworkPolicy (the Secrets are created by hand)", len(all))
	}
	checkBase(t, dep)
	pod := &dep.Spec.Template.Spec
	if volume(t, pod, "workspace").EmptyDir == nil {
		t.Error("the base workspace is not an emptyDir")
	}
	d := sidecar(t, pod)
	if v, n := envValue(d, "AGENTBE_ISOLATION"); v != "auto" || n != 1 {
		t.Errorf("base AGENTBE_ISOLATION=%q (%d times), want auto once", v, n)
	}
	if d.SecurityContext.SeccompProfile == nil || d.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the base sidecar's seccomp profile is not RuntimeDefault")
	}
}

// TestKustomizeImageOverride: the base names the image in one place, its
// images: entry, and an overlay's images: entry replaces it.
func TestKustomizeImageOverride(t *testing.T) {
	dep, _ := build(t, "kubernetes/base")
	if img := sidecar(t, &dep.Spec.Template.Spec).Image; img != "agentbe-daemon:latest" {
		t.Errorf("the base's image is %q", img)
	}
	base, err := filepath.Abs("kubernetes/base")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base) // kustomize takes no absolute resource roots
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n  - " + rel + "\nimages:\n  - name: agentbe-daemon\n    newName: registry.example.com/team/agentbe-daemon\n    newTag: v1.2.3\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	dep, _ = build(t, dir)
	if img := sidecar(t, &dep.Spec.Template.Spec).Image; img != "registry.example.com/team/agentbe-daemon:v1.2.3" {
		t.Errorf("an overlay's images: entry gave %q", img)
	}
}

// TestKustomizeSSHPortOverlay: the SSH port listens on the pod's address
// for a Service, with authorized_keys from a read-only Secret; HTTP stays
// on loopback.
func TestKustomizeSSHPortOverlay(t *testing.T) {
	dep, all := build(t, "kubernetes/overlays/ssh-port")
	checkBase(t, dep)
	pod := &dep.Spec.Template.Spec
	d := sidecar(t, pod)
	if got := argValue(t, d.Args, "--ssh-listen"); got != "0.0.0.0:2222" {
		t.Errorf("--ssh-listen %s", got)
	}
	keys := argValue(t, d.Args, "--ssh-authorized-keys")
	m := mountFor(t, d, keys)
	v := volume(t, pod, m.Name)
	if !m.ReadOnly || v.Secret == nil || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
		t.Errorf("--ssh-authorized-keys %s is not on a read-only, non-world-readable Secret volume", keys)
	}
	if !slices.ContainsFunc(d.Ports, func(p corev1.ContainerPort) bool { return p.Name == "ssh" && p.ContainerPort == 2222 }) {
		t.Errorf("no container port ssh/2222: %+v", d.Ports)
	}
	var svc *corev1.Service
	for _, o := range all {
		if s, ok := o.(*corev1.Service); ok {
			svc = s
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 2222 || svc.Spec.Ports[0].TargetPort.String() != "ssh" ||
		svc.Spec.Selector["app.kubernetes.io/name"] != dep.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Errorf("the SSH Service: %+v", svc)
	}
}

func TestKustomizePVCOverlay(t *testing.T) {
	dep, all := build(t, "kubernetes/overlays/pvc")
	checkBase(t, dep)
	ws := volume(t, &dep.Spec.Template.Spec, "workspace")
	if ws.EmptyDir != nil || ws.PersistentVolumeClaim == nil {
		t.Fatalf("the pvc overlay's workspace volume is %+v, want only a persistentVolumeClaim", ws.VolumeSource)
	}
	var pvc *corev1.PersistentVolumeClaim
	for _, o := range all {
		if p, ok := o.(*corev1.PersistentVolumeClaim); ok {
			pvc = p
		}
	}
	if pvc == nil || pvc.Name != ws.PersistentVolumeClaim.ClaimName {
		t.Fatalf("no PersistentVolumeClaim named %q in the overlay's output", ws.PersistentVolumeClaim.ClaimName)
	}
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("PVC access modes %v", pvc.Spec.AccessModes)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) < 0 {
		t.Errorf("PVC requests %s", q.String())
	}
	// A ReadWriteOnce volume cannot be shared by the old and new pod of a
	// rolling update.
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || dep.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("strategy %+v, want Recreate", dep.Spec.Strategy)
	}
}

func TestKustomizeBwrapOverlay(t *testing.T) {
	dep, _ := build(t, "kubernetes/overlays/bwrap")
	checkBase(t, dep)
	pod := &dep.Spec.Template.Spec
	if pod.HostUsers == nil || *pod.HostUsers {
		t.Error("hostUsers is not false: the pod needs a user namespace of its own")
	}
	d := sidecar(t, pod)
	if v, n := envValue(d, "AGENTBE_ISOLATION"); v != "bwrap" || n != 1 {
		t.Errorf("AGENTBE_ISOLATION=%q (%d times), want bwrap once", v, n)
	}
	sc := d.SecurityContext
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		t.Error("the sidecar's procMount is not Unmasked: bwrap cannot mount a fresh /proc")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the sidecar keeps RuntimeDefault seccomp, which refuses CLONE_NEWUSER without CAP_SYS_ADMIN")
	}
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		t.Error("the sidecar's AppArmor profile is not Unconfined")
	}
	// Only the daemon gets the relaxed settings.
	for _, c := range pod.Containers {
		if c.SecurityContext.SeccompProfile == nil || c.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || c.SecurityContext.ProcMount != nil {
			t.Errorf("container %s lost its RuntimeDefault seccomp profile or default procMount", c.Name)
		}
	}
}

// sidecarCommand turns the sidecar's args and env into a command line for
// the built binary: every volume mount becomes a scratch directory (Secret
// items become files holding a test token), and the env keeps only literal
// values.
func sidecarCommand(t *testing.T, pod *corev1.PodSpec, d *corev1.Container) (args, env []string) {
	t.Helper()
	tmp := t.TempDir()
	moved := map[string]string{}
	for i, m := range d.VolumeMounts {
		dir := filepath.Join(tmp, fmt.Sprintf("mount%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if v := volume(t, pod, m.Name); v.Secret != nil {
			for _, it := range v.Secret.Items {
				p := filepath.Join(dir, it.Path)
				if err := os.WriteFile(p, secretContent(t, it.Key), 0o400); err != nil {
					t.Fatal(err)
				}
			}
		}
		moved[m.MountPath] = dir
	}
	move := func(s string) string {
		best := ""
		for from := range moved {
			if (s == from || strings.HasPrefix(s, from+"/")) && len(from) > len(best) {
				best = from
			}
		}
		if best == "" {
			return s
		}
		return moved[best] + strings.TrimPrefix(s, best)
	}
	for _, a := range d.Args {
		args = append(args, move(a))
	}
	env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp}
	for _, e := range d.Env {
		if e.ValueFrom != nil {
			t.Fatalf("sidecar env %s uses valueFrom, which this test cannot resolve", e.Name)
		}
		env = append(env, e.Name+"="+move(e.Value))
	}
	return args, env
}

// secretContent is what a Secret item holds, by its key: an SSH host key
// (OpenSSH's private key format) or an authorized_keys line, or a token.
func secretContent(t *testing.T, key string) []byte {
	t.Helper()
	switch key {
	case "ssh_host_ed25519_key", "authorized_keys":
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if key == "authorized_keys" {
			sp, err := ssh.NewPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			return ssh.MarshalAuthorizedKey(sp)
		}
		block, err := ssh.MarshalPrivateKey(priv, "test")
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(block)
	}
	return []byte("0123456789abcdef0123456789abcdef\n")
}

// TestSidecarCheckConfig: the sidecar's args and env, in base and every
// overlay, are a configuration the binary accepts.
func TestSidecarCheckConfig(t *testing.T) {
	bin := daemonBin(t)
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/pvc", "kubernetes/overlays/bwrap", "kubernetes/overlays/ssh-port"} {
		t.Run(dir, func(t *testing.T) {
			dep, _ := build(t, dir)
			pod := &dep.Spec.Template.Spec
			d := sidecar(t, pod)
			args, env := sidecarCommand(t, pod, d)
			if i := slices.Index(args, "--ssh-listen"); i >= 0 {
				// --check-config binds it to see that it is free: on
				// loopback here, not every address.
				args[i+1] = "127.0.0.1:" + strconv.Itoa(freePort(t))
			}
			cmd := exec.Command(bin, append(args, "--check-config")...)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("agent-backend %q --check-config: %v\n%s", args, err, stderr.String())
			}
			want := []string{`bind: "127.0.0.1"`, fmt.Sprintf("port: %d", daemonPort), `auth-token: "[redacted]"`, `log-format: "json"`}
			if v, _ := envValue(d, "AGENTBE_ISOLATION"); v != "" {
				want = append(want, fmt.Sprintf("isolation: %q", v))
			}
			for _, line := range want {
				if !strings.Contains(stdout.String(), line+"\n") {
					t.Errorf("effective config lacks %s:\n%s", line, stdout.String())
				}
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSidecarProbesAgainstDaemon starts the daemon with the base sidecar's
// args and env (on a free port instead of 3001) and runs each probe's exact
// command against it: the probes' flags are ones `agent-backend health`
// accepts, and they pass against a running daemon and fail against none.
func TestSidecarProbesAgainstDaemon(t *testing.T) {
	bin := daemonBin(t)
	dep, _ := build(t, "kubernetes/base")
	pod := &dep.Spec.Template.Spec
	d := sidecar(t, pod)
	args, env := sidecarCommand(t, pod, d)
	port := strconv.Itoa(freePort(t))
	args[slices.Index(args, "--port")+1] = port

	probe := func(p *corev1.Probe) error {
		cmd := slices.Clone(p.Exec.Command)
		for i, w := range cmd {
			cmd[i] = strings.Replace(w, fmt.Sprintf("127.0.0.1:%d/", daemonPort), "127.0.0.1:"+port+"/", 1)
		}
		if cmd[0] != "agent-backend" {
			t.Fatalf("probe runs %q", cmd)
		}
		out, err := exec.Command(bin, cmd[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%q: %v: %s", cmd, err, out)
		}
		return nil
	}
	probes := map[string]*corev1.Probe{"startup": d.StartupProbe, "readiness": d.ReadinessProbe, "liveness": d.LivenessProbe}

	for name, p := range probes {
		if p.Exec == nil {
			t.Fatalf("%s probe is not an exec probe", name)
		}
		if err := probe(p); err == nil {
			t.Fatalf("%s probe passed with no daemon running", name)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	daemon := exec.CommandContext(ctx, bin, args...)
	daemon.Env = env
	var logs bytes.Buffer
	daemon.Stdout, daemon.Stderr = &logs, &logs
	daemon.Cancel = func() error { return daemon.Process.Signal(syscall.SIGTERM) }
	daemon.WaitDelay = 15 * time.Second
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// The startup probe's budget: periodSeconds × failureThreshold.
	sp := d.StartupProbe
	deadline := time.Now().Add(time.Duration(sp.PeriodSeconds*sp.FailureThreshold) * time.Second)
	for {
		err := probe(sp)
		if err == nil {
			break
		}
		select {
		case werr := <-done:
			done <- werr
			t.Fatalf("the daemon exited (%v) before the startup probe passed:\n%s", werr, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the startup probe did not pass within its budget: %v\ndaemon log:\n%s", err, logs.String())
		}
		time.Sleep(time.Duration(sp.PeriodSeconds) * time.Second / 4)
	}
	for name, p := range probes {
		if err := probe(p); err != nil {
			t.Errorf("%s probe against the running daemon: %v", name, err)
		}
	}
}

// TestSidecarReadsSecretsAsKubeletMountsThem runs the sidecar's arguments
// through --check-config as the pod's user (runAsUser, runAsGroup, and the
// fsGroup as a supplementary group), against volumes laid out as the kubelet
// lays them out: each Secret on a tmpfs mount point (1777), its files in a
// timestamped directory with the volume's defaultMode, "..data" a symlink to
// that directory and each key a symlink through "..data"; with the fsGroup,
// everything group-owned by it, directories setgid and files at least 0440;
// emptyDirs 0777 (2777 with the fsGroup). The daemon's strict reader
// (internal/opfile) must accept the token and the SSH keys through these
// symlinks. The control: without the fsGroup the same layout leaves the
// 0440 root-owned token unreadable to uid 10001, so the manifests' fsGroup
// is what makes the token readable.
func TestSidecarReadsSecretsAsKubeletMountsThem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kubelet's layout is root-owned, and the daemon must run as the pod's uid")
	}
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/ssh-port"} {
		dep, _ := build(t, dir)
		pod := &dep.Spec.Template.Spec
		d := sidecar(t, pod)
		sc := pod.SecurityContext
		if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || sc.FSGroup == nil {
			t.Fatalf("%s: the pod's securityContext lacks runAsUser, runAsGroup or fsGroup", dir)
		}
		for _, withFSGroup := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/fsGroup=%v", dir, withFSGroup), func(t *testing.T) {
				var fsGroup *int64
				if withFSGroup {
					fsGroup = sc.FSGroup
				}
				args, env, bin := kubeletLayout(t, pod, d, fsGroup)
				cred := &syscall.Credential{Uid: uint32(*sc.RunAsUser), Gid: uint32(*sc.RunAsGroup)}
				if fsGroup != nil {
					cred.Groups = []uint32{uint32(*fsGroup)}
				}
				if i := slices.Index(args, "--ssh-listen"); i >= 0 {
					args[i+1] = "127.0.0.1:" + strconv.Itoa(freePort(t))
				}
				cmd := exec.Command(bin, append(args, "--check-config")...)
				cmd.Env = env
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
				out, err := cmd.CombinedOutput()
				if withFSGroup {
					if err != nil {
						t.Fatalf("--check-config as uid %d: %v\n%s", cred.Uid, err, out)
					}
					if !strings.Contains(string(out), `auth-token: "[redacted]"`) {
						t.Fatalf("the token was not loaded:\n%s", out)
					}
					return
				}
				if err == nil || !strings.Contains(string(out), "--auth-token-file") || !strings.Contains(string(out), "permission denied") {
					t.Fatalf("without the fsGroup, --check-config as uid %d: %v, want the token refused (permission denied)\n%s", cred.Uid, err, out)
				}
			})
		}
	}
}

// kubeletLayout makes the sidecar's volumes in a scratch directory the pod's
// user can reach, as the kubelet would (see
// TestSidecarReadsSecretsAsKubeletMountsThem), and returns the sidecar's
// args and env pointed at them and a copy of the binary the user may run.
func kubeletLayout(t *testing.T, pod *corev1.PodSpec, d *corev1.Container, fsGroup *int64) (args, env []string, bin string) {
	t.Helper()
	top, err := os.MkdirTemp("", "agentbe-kubelet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// own sets the owner and mode the kubelet leaves: root, the fsGroup
	// as group when there is one, and the group bits it adds.
	own := func(p string, mode os.FileMode, dirBits bool) {
		if fsGroup != nil {
			must(os.Lchown(p, 0, int(*fsGroup)))
			mode |= 0o440
			if dirBits {
				mode |= 0o110 | os.ModeSetgid
			}
		}
		must(os.Chmod(p, mode))
	}
	must(os.Chmod(top, 0o755))
	bin = filepath.Join(top, "agent-backend")
	data, err := os.ReadFile(daemonBin(t))
	must(err)
	must(os.WriteFile(bin, data, 0o755))
	home := filepath.Join(top, "home")
	must(os.Mkdir(home, 0o777))

	moved := map[string]string{}
	for i, m := range d.VolumeMounts {
		dir := filepath.Join(top, fmt.Sprintf("mount%d", i))
		must(os.Mkdir(dir, 0o700))
		v := volume(t, pod, m.Name)
		switch {
		case v.Secret != nil:
			ts := "..2026_11_28_05_30_00.1234567890"
			must(os.Mkdir(filepath.Join(dir, ts), 0o700))
			mode := os.FileMode(0o644)
			if v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			}
			must(os.Symlink(ts, filepath.Join(dir, "..data")))
			for _, it := range v.Secret.Items {
				if strings.Contains(it.Path, "/") {
					t.Fatalf("secret item path %q: this layout makes flat keys only", it.Path)
				}
				m := mode
				if it.Mode != nil {
					m = os.FileMode(*it.Mode)
				}
				p := filepath.Join(dir, ts, it.Path)
				must(os.WriteFile(p, secretContent(t, it.Key), 0o600))
				own(p, m, false)
				must(os.Symlink(filepath.Join("..data", it.Path), filepath.Join(dir, it.Path)))
			}
			own(filepath.Join(dir, ts), 0o755, true)
			own(dir, 0o777|os.ModeSticky, true)
		case v.EmptyDir != nil:
			own(dir, 0o777, true)
		default:
			t.Fatalf("volume %s: neither a Secret nor an emptyDir", m.Name)
		}
		moved[m.MountPath] = dir
	}
	move := func(s string) string {
		best := ""
		for from := range moved {
			if (s == from || strings.HasPrefix(s, from+"/")) && len(from) > len(best) {
				best = from
			}
		}
		if best == "" {
			return s
		}
		return moved[best] + strings.TrimPrefix(s, best)
	}
	for _, a := range d.Args {
		args = append(args, move(a))
	}
	env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	for _, e := range d.Env {
		if e.ValueFrom != nil {
			t.Fatalf("sidecar env %s uses valueFrom, which this test cannot resolve", e.Name)
		}
		env = append(env, e.Name+"="+move(e.Value))
	}
	return args, env, bin
}

// TestKustomizeNetworkPolicy: a NetworkPolicy selects the pod in the base
// and every overlay. Ingress: nothing in the base, where the daemon listens
// on loopback, so a server a command of the agent starts on the pod's
// address (a dev server on 0.0.0.0) is not reachable from other pods; in
// the ssh-port overlay, TCP 2222 only. Egress: everything but the cloud
// metadata address (169.254.169.254, fd00:ec2::254), where a command would
// otherwise read the node's credentials; DNS and other pods stay reachable
// on CNIs whose ipBlock rules leave out cluster endpoints (a namespace
// selector allows those).
func TestKustomizeNetworkPolicy(t *testing.T) {
	for _, c := range []struct {
		dir     string
		ingress []int32
	}{
		{"kubernetes/base", nil},
		{"kubernetes/overlays/pvc", nil},
		{"kubernetes/overlays/bwrap", nil},
		{"kubernetes/overlays/ssh-port", []int32{2222}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dep, all := build(t, c.dir)
			var np *networkingv1.NetworkPolicy
			for _, o := range all {
				if p, ok := o.(*networkingv1.NetworkPolicy); ok {
					if np != nil {
						t.Fatal("more than one NetworkPolicy")
					}
					np = p
				}
			}
			if np == nil {
				t.Fatal("no NetworkPolicy: every pod in the cluster reaches servers the agent's commands start on the pod's address, and the commands reach the cloud metadata service")
			}
			for k, v := range np.Spec.PodSelector.MatchLabels {
				if dep.Spec.Template.Labels[k] != v {
					t.Errorf("the NetworkPolicy's podSelector %v does not select the pod (labels %v)", np.Spec.PodSelector.MatchLabels, dep.Spec.Template.Labels)
				}
			}
			if len(np.Spec.PodSelector.MatchLabels) == 0 || len(np.Spec.PodSelector.MatchExpressions) != 0 {
				t.Errorf("podSelector %+v: want the pod's name label only", np.Spec.PodSelector)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
				t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
			}
			var ports []int32
			for _, r := range np.Spec.Ingress {
				if len(r.From) != 0 && c.ingress == nil {
					t.Errorf("ingress rule with peers %+v", r.From)
				}
				if len(r.Ports) == 0 {
					t.Errorf("an ingress rule allows every port: %+v", r)
				}
				for _, p := range r.Ports {
					if p.Port == nil || p.EndPort != nil || p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
						t.Errorf("ingress port %+v: want one TCP port", p)
						continue
					}
					ports = append(ports, p.Port.IntVal)
				}
			}
			if !slices.Equal(ports, c.ingress) {
				t.Errorf("ingress allows ports %v, want %v", ports, c.ingress)
			}
			metadata := map[string]bool{"169.254.169.254/32": false, "fd00:ec2::254/128": false}
			for _, r := range np.Spec.Egress {
				if len(r.Ports) != 0 {
					t.Errorf("an egress rule is limited to ports %+v: commands need any port (git over ssh, package registries)", r.Ports)
				}
				if len(r.To) == 0 {
					t.Errorf("an egress rule without peers allows the metadata address too: %+v", r)
				}
				for _, peer := range r.To {
					if peer.IPBlock == nil {
						if peer.PodSelector != nil || peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) != 0 {
							t.Errorf("egress peer %+v: want an ipBlock, or every pod (namespaceSelector: {})", peer)
						}
						continue
					}
					switch peer.IPBlock.CIDR {
					case "0.0.0.0/0", "::/0":
					default:
						t.Errorf("egress ipBlock %s: want 0.0.0.0/0 or ::/0 with the metadata address excepted", peer.IPBlock.CIDR)
					}
					for _, e := range peer.IPBlock.Except {
						if _, ok := metadata[e]; !ok {
							t.Errorf("egress ipBlock excepts %s too", e)
						}
						metadata[e] = true
					}
				}
			}
			for cidr, excepted := range metadata {
				if !excepted {
					t.Errorf("egress does not except the metadata address %s", cidr)
				}
			}
		})
	}
}

// TestDockerignoreKeepsSecretsOut: the build stage copies the whole context
// (COPY . .), and its layers stay in the builder's cache, and in a registry
// with `--cache-to … mode=max`. docs/deploy.md has the operator create the
// token file and the SSH host key in the directory the image is built from
// (the repository root); the .dockerignore must keep them, and the local
// workspace, out of the context, while the Go sources (one of them named
// token.go) stay in. It is matched the way BuildKit matches it.
func TestDockerignoreKeepsSecretsOut(t *testing.T) {
	f, err := os.Open("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	for path, wantOut := range map[string]bool{
		"token":                         true,
		"ssh_host_ed25519_key":          true,
		"ssh_host_ed25519_key.pub":      true,
		"workspace/notes.txt":           true,
		".git/config":                   true,
		"go.mod":                        false,
		"go.sum":                        false,
		"cmd/agent-backend/main.go":     false,
		"internal/httpguard/token.go":   false,
		"config/tokenref.go":            false,
		"deploy/kubernetes/base/x.yaml": false,
	} {
		out, err := pm.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		if out != wantOut {
			t.Errorf("%s: left out of the build context = %v, want %v", path, out, wantOut)
		}
	}
}
