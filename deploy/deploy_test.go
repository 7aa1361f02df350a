// Package deploy_test proves what can be proven of deploy/ without a
// container engine: the binary the Dockerfile builds (same command, same
// environment) is static and runs; every flag compose.yaml and the systemd
// units give corekube or etcd exists in that binary's (or etcd's own)
// --help; the compose topology is consistent (etcd members, API servers
// behind the balancer, the etcd image at go.mod's version); systemd-analyze
// verify accepts the units; and haproxy, run with compose/haproxy.cfg in
// front of two real API servers, balances them and takes a dead one out.
// The tools that are not installed (systemd-analyze, haproxy) skip their
// part with a message.
package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/testserver"
	"sigs.k8s.io/yaml"
)

// dockerfile is deploy/Dockerfile, parsed as far as the tests need.
type dockerfile struct {
	globalArgs map[string]string // ARGs before the first FROM, with defaults
	stages     []*stage
}

type stage struct {
	from, name string
	env        map[string]string
	runs       []string // RUN commands without their --mount options
	user       string
	entrypoint string
}

// readDockerfile parses deploy/Dockerfile: instructions (continuation lines
// joined), per stage.
func readDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := &dockerfile{globalArgs: map[string]string{}}
	var lines []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var st *stage
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "ARG":
			if st == nil {
				for _, kv := range strings.Fields(rest) {
					k, v, _ := strings.Cut(kv, "=")
					df.globalArgs[k] = v
				}
			}
		case "FROM":
			words := strings.Fields(rest)
			words = slices.DeleteFunc(words, func(w string) bool { return strings.HasPrefix(w, "--platform=") })
			st = &stage{from: words[0], env: map[string]string{}}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				st.name = words[2]
			}
			df.stages = append(df.stages, st)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				st.env[k] = v
			}
		case "RUN":
			words := strings.Fields(rest)
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				words = words[1:]
			}
			st.runs = append(st.runs, strings.Join(words, " "))
		case "USER":
			st.user = rest
		case "ENTRYPOINT":
			st.entrypoint = rest
		}
	}
	if st == nil {
		t.Fatal("Dockerfile has no FROM")
	}
	return df
}

// goBuild is the Dockerfile's `go build` command and its stage.
func (df *dockerfile) goBuild(t *testing.T) (*stage, string) {
	t.Helper()
	for _, st := range df.stages {
		for _, run := range st.runs {
			if strings.HasPrefix(run, "go build ") {
				return st, run
			}
		}
	}
	t.Fatal("Dockerfile runs no `go build`")
	return nil, ""
}

// shellWords splits a command as sh would for the plain words and double
// quotes the Dockerfile uses (no expansions).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// imageBinary builds corekube exactly as deploy/Dockerfile does (its `go
// build` words and its build stage's environment, $TARGETOS/$TARGETARCH
// being this machine's), once per test process.
func imageBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds corekube as the Dockerfile does")
	}
	buildOnce.Do(func() {
		st, run := readDockerfile(t).goBuild(t)
		dir, err := os.MkdirTemp("", "corekube-image-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "corekube")
		args := shellWords(run)[1:] // after "go"
		for i, a := range args {
			if a == "-o" && i+1 < len(args) {
				args[i+1] = built
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = ".." // the build context: the repository's top
		cmd.Env = os.Environ()
		for k, v := range st.env {
			v = strings.NewReplacer("$TARGETOS", runtime.GOOS, "$TARGETARCH", runtime.GOARCH).Replace(v)
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// goModLine is the first line of go.mod starting with prefix, without it.
func goModLine(t *testing.T, prefix string) string {
	t.Helper()
	f, err := os.Open("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	t.Fatalf("go.mod has no line %q", prefix)
	return ""
}

// TestDockerfile checks the image's recipe: a static, stripped,
// reproducible build with go.mod's Go, and a minimal non-root final stage
// whose entrypoint is corekube.
func TestDockerfile(t *testing.T) {
	df := readDockerfile(t)
	if got, want := df.globalArgs["GO_VERSION"], goModLine(t, "go "); got != want {
		t.Errorf("Dockerfile GO_VERSION %q, go.mod says go %s", got, want)
	}
	st, run := df.goBuild(t)
	if st.env["CGO_ENABLED"] != "0" {
		t.Errorf("build stage CGO_ENABLED=%q, want 0 (a static binary)", st.env["CGO_ENABLED"])
	}
	words := shellWords(run)
	for _, want := range [][]string{{"-trimpath"}, {"-ldflags", "-s -w"}, {"./cmd/corekube"}} {
		if !slices.ContainsFunc(words, func(w string) bool { return w == want[0] }) {
			t.Errorf("go build lacks %s: %s", want[0], run)
			continue
		}
		if len(want) == 2 {
			i := slices.Index(words, want[0])
			if i+1 >= len(words) || words[i+1] != want[1] {
				t.Errorf("go build: %s not followed by %q: %s", want[0], want[1], run)
			}
		}
	}
	final := df.stages[len(df.stages)-1]
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") || !strings.HasSuffix(final.from, ":nonroot") {
		t.Errorf("final stage FROM %s, want distroless static nonroot", final.from)
	}
	if final.user != "65532:65532" && final.user != "65532" {
		t.Errorf("final stage USER %q, want 65532", final.user)
	}
	if final.entrypoint != `["/usr/local/bin/corekube"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/usr/local/bin/corekube\"]", final.entrypoint)
	}

	// The build context: everything the build needs is in it.
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range strings.Split(string(ignore), "\n") {
		pattern = strings.TrimSpace(pattern)
		if pattern == "" || strings.HasPrefix(pattern, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "cmd/corekube/main.go", "server/server.go", "deploy/Dockerfile"} {
			if ok, _ := filepath.Match(strings.TrimPrefix(pattern, "**/"), filepath.Base(needed)); ok || strings.HasPrefix(needed, strings.TrimSuffix(pattern, "/")+"/") {
				t.Errorf(".dockerignore %q excludes %s, which the build needs", pattern, needed)
			}
		}
	}
}

// TestImageBinary builds corekube as the Dockerfile does and checks that
// it is static (no interpreter, no dynamic section: it runs on distroless
// static or scratch), stripped, and runs.
func TestImageBinary(t *testing.T) {
	bin := imageBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: the binary is dynamically linked", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Error("the binary has a .dynamic section")
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("imported libraries %v (%v), want none", libs, err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("symbol table present (%v): -ldflags -s did not apply", err)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("corekube --help: %v\n%s", err, out)
	}
	for _, sub := range []string{"apiserver", "agent", "scheduler", "controllers", "up"} {
		if !regexp.MustCompile(`(?m)^\s+` + sub + `\s`).Match(out) {
			t.Errorf("corekube --help lists no %s command:\n%s", sub, out)
		}
	}
}

// flagNames are the long flags a --help output lists.
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)

// helpFlags runs `bin args... --help` once per command line and returns
// the flags it lists.
var helpCache sync.Map

func helpFlags(t *testing.T, bin string, args ...string) map[string]bool {
	t.Helper()
	key := bin + " " + strings.Join(args, " ")
	if v, ok := helpCache.Load(key); ok {
		return v.(map[string]bool)
	}
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", key, err, out)
	}
	flags := map[string]bool{}
	for _, m := range flagLine.FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 3 {
		t.Fatalf("%s --help lists %d flags:\n%s", key, len(flags), out)
	}
	helpCache.Store(key, flags)
	return flags
}

// flagsOf are the long flag names among words.
func flagsOf(words []string) []string {
	var out []string
	for _, w := range words {
		if name, ok := strings.CutPrefix(w, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			out = append(out, name)
		}
	}
	return out
}

// flagValue is the value of --name among words ("--name=v" or "--name v").
func flagValue(words []string, name string) string {
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, "--"+name+"="); ok {
			return v
		}
		if w == "--"+name && i+1 < len(words) {
			return words[i+1]
		}
	}
	return ""
}

// checkCorekube asserts that a corekube command line (subcommand first)
// uses only flags of that subcommand.
func checkCorekube(t *testing.T, where string, words []string) {
	t.Helper()
	if len(words) == 0 {
		t.Errorf("%s: no corekube command", where)
		return
	}
	known := helpFlags(t, imageBinary(t), words[0])
	for _, f := range flagsOf(words[1:]) {
		if !known[f] {
			t.Errorf("%s: corekube %s has no flag --%s", where, words[0], f)
		}
	}
}

// checkEtcd asserts that etcd knows every flag of an etcd command line.
func checkEtcd(t *testing.T, where string, flags []string) {
	t.Helper()
	known := helpFlags(t, etcdcluster.Binary(t))
	for _, f := range flags {
		if !known[f] {
			t.Errorf("%s: etcd has no flag --%s", where, f)
		}
	}
}

// composeFile is the part of compose.yaml the test reads.
type composeFile struct {
	Services map[string]struct {
		Image      string   `json:"image"`
		Command    []string `json:"command"`
		Entrypoint []string `json:"entrypoint"`
		Hostname   string   `json:"hostname"`
		Volumes    []string `json:"volumes"`
		Build      *struct {
			Context    string `json:"context"`
			Dockerfile string `json:"dockerfile"`
		} `json:"build"`
	} `json:"services"`
}

// TestComposeTopology checks compose.yaml: every corekube and etcd flag
// exists, the etcd image is go.mod's etcd, three etcd members form one
// cluster that every API server names, the balancer sends to every API
// server, and the scheduler, controllers and agents run at least twice.
func TestComposeTopology(t *testing.T) {
	data, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	etcdVersion := goModLine(t, "go.etcd.io/etcd/server/v3 ")
	count := map[string]int{}
	var etcdMembers, etcdClientURLs []string
	var apiservers []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range c.Services {
			if !yield(k) {
				return
			}
		}
	}) {
		svc := c.Services[name]
		where := "compose.yaml service " + name
		switch {
		case strings.Contains(svc.Image, "/etcd:"):
			image, tag, _ := strings.Cut(svc.Image, ":")
			if image != "gcr.io/etcd-development/etcd" && image != "quay.io/coreos/etcd" {
				t.Errorf("%s: image %s is not the official etcd image", where, svc.Image)
			}
			if tag != etcdVersion {
				t.Errorf("%s: etcd %s, go.mod pins %s", where, tag, etcdVersion)
			}
			if len(svc.Command) == 0 || svc.Command[0] != "/usr/local/bin/etcd" {
				t.Errorf("%s: command %v does not run /usr/local/bin/etcd", where, svc.Command)
				continue
			}
			checkEtcd(t, where, flagsOf(svc.Command[1:]))
			etcdMembers = append(etcdMembers, flagValue(svc.Command, "name")+"="+flagValue(svc.Command, "initial-advertise-peer-urls"))
			etcdClientURLs = append(etcdClientURLs, flagValue(svc.Command, "advertise-client-urls"))
			if flagValue(svc.Command, "name") != name {
				t.Errorf("%s: --name %s, want the service name", where, flagValue(svc.Command, "name"))
			}
			count["etcd"]++
		case strings.HasPrefix(svc.Image, "corekube"):
			if svc.Build == nil || svc.Build.Dockerfile != "deploy/Dockerfile" {
				t.Errorf("%s: not built from deploy/Dockerfile", where)
			}
			checkCorekube(t, where, svc.Command)
			if len(svc.Command) == 0 {
				continue
			}
			count[svc.Command[0]]++
			if svc.Command[0] == "apiserver" {
				apiservers = append(apiservers, name)
				if got := flagValue(svc.Command, "data-dir"); got != "/var/lib/corekube" {
					t.Errorf("%s: --data-dir %q, want /var/lib/corekube (the shared volume)", where, got)
				}
				if !slices.Contains(strings.Split(flagValue(svc.Command, "tls-san"), ","), "lb") {
					t.Errorf("%s: the serving certificate does not name the balancer (--tls-san lb)", where)
				}
			}
		}
	}
	for _, want := range []struct {
		what string
		min  int
	}{{"etcd", 3}, {"apiserver", 2}, {"scheduler", 2}, {"controllers", 2}, {"agent", 1}} {
		if count[want.what] < want.min {
			t.Errorf("compose.yaml runs %d %s, want at least %d", count[want.what], want.what, want.min)
		}
	}
	slices.Sort(etcdMembers)
	for name, svc := range c.Services {
		if strings.Contains(svc.Image, "/etcd:") {
			got := strings.Split(flagValue(svc.Command, "initial-cluster"), ",")
			slices.Sort(got)
			if !slices.Equal(got, etcdMembers) {
				t.Errorf("service %s: --initial-cluster %v, want the members %v", name, got, etcdMembers)
			}
		}
		if strings.HasPrefix(svc.Image, "corekube") && len(svc.Command) > 0 && svc.Command[0] == "apiserver" {
			got := strings.Split(flagValue(svc.Command, "etcd-servers"), ",")
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(etcdClientURLs))) {
				t.Errorf("service %s: --etcd-servers %v, want every member %v", name, got, etcdClientURLs)
			}
		}
	}

	// The balancer: TCP passthrough to every API server, health-checked on
	// /readyz.
	lb, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode tcp", "uri /readyz", "bind :6443"} {
		if !bytes.Contains(lb, []byte(want)) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
	for _, name := range apiservers {
		if !regexp.MustCompile(`(?m)^\s*server ` + name + ` ` + name + `:6443\b`).Match(lb) {
			t.Errorf("haproxy.cfg sends nothing to %s:6443", name)
		}
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Log("haproxy is not installed: haproxy.cfg was not checked by haproxy -c")
		return
	}
	out, err := exec.Command(haproxy, "-c", "-f", "compose/haproxy.cfg").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Configuration file is valid")) {
		t.Errorf("haproxy -c -f haproxy.cfg: %v\n%s", err, out)
	}
	// The compose service names do not resolve here (init-addr none lets
	// haproxy start without them); any other warning is the file's.
	for _, line := range strings.Split(string(out), "\n") {
		if (strings.Contains(line, "[WARNING]") || strings.Contains(line, "[ALERT]")) && !strings.Contains(line, "could not resolve address") {
			t.Errorf("haproxy -c: %s", line)
		}
	}
}

// systemdUnit is one unit file: its ExecStart words and EnvironmentFile.
type systemdUnit struct {
	name      string
	execStart []string
	envFile   string
}

func readUnits(t *testing.T) []systemdUnit {
	t.Helper()
	paths, err := filepath.Glob("systemd/*.service")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no systemd units: %v", err)
	}
	var units []systemdUnit
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		u := systemdUnit{name: filepath.Base(path)}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				u.execStart = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(line, "EnvironmentFile="); ok {
				u.envFile = strings.TrimPrefix(v, "-")
			}
		}
		units = append(units, u)
	}
	return units
}

// readEnvFile reads a shipped EnvironmentFile (deploy/systemd/<base name>)
// as systemd does for the one form used: KEY=value or KEY="value" on one
// line (a continued line is refused: one form, read the same everywhere).
func readEnvFile(t *testing.T, unitPath string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("systemd", filepath.Base(unitPath)))
	if err != nil {
		t.Fatalf("the EnvironmentFile %s is not shipped in deploy/systemd: %v", unitPath, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if strings.HasSuffix(line, "\\") {
			t.Errorf("%s: %q is continued on the next line", unitPath, line)
		}
		if !ok {
			t.Errorf("%s: %q is not KEY=value", unitPath, line)
			continue
		}
		env[k] = strings.Trim(v, `"`)
	}
	return env
}

// TestSystemdUnits checks the units: each runs corekube or etcd with flags
// that exist (the corekube flags from $COREKUBE_ARGS in its
// EnvironmentFile, etcd's from ETCD_* variables), with the hardening and
// restart options an operator expects; and systemd-analyze verify, when
// installed, accepts them.
func TestSystemdUnits(t *testing.T) {
	units := readUnits(t)
	for _, u := range units {
		data, _ := os.ReadFile(filepath.Join("systemd", u.name))
		for _, want := range []string{"ProtectSystem=strict", "Restart=on-failure", "LimitNOFILE=", "TimeoutStopSec=", "StateDirectory=", "NoNewPrivileges=yes"} {
			if !bytes.Contains(data, []byte("\n"+want)) {
				t.Errorf("%s lacks %s", u.name, want)
			}
		}
		if !bytes.Contains(data, []byte("\nUser=")) && !bytes.Contains(data, []byte("\nDynamicUser=yes")) {
			t.Errorf("%s runs as root", u.name)
		}
		if u.envFile == "" || len(u.execStart) == 0 {
			t.Errorf("%s: no ExecStart or EnvironmentFile", u.name)
			continue
		}
		env := readEnvFile(t, u.envFile)
		switch filepath.Base(u.execStart[0]) {
		case "corekube":
			var words []string
			for _, w := range u.execStart[1:] {
				if v, ok := strings.CutPrefix(w, "$"); ok {
					val, set := env[strings.Trim(v, "{}")]
					if !set {
						t.Errorf("%s: %s is not set in %s", u.name, w, u.envFile)
					}
					words = append(words, strings.Fields(val)...)
					continue
				}
				words = append(words, w)
			}
			checkCorekube(t, u.name+" with "+u.envFile, words)
		case "etcd":
			var flags []string
			for k := range env {
				name, ok := strings.CutPrefix(k, "ETCD_")
				if !ok {
					t.Errorf("%s: %s is not an etcd variable", u.envFile, k)
					continue
				}
				flags = append(flags, strings.ReplaceAll(strings.ToLower(name), "_", "-"))
			}
			checkEtcd(t, u.name+" with "+u.envFile, flags)
		default:
			t.Errorf("%s runs %s", u.name, u.execStart[0])
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the units were not verified by systemd")
		return
	}
	// verify wants the executables to exist: a copy of the units runs the
	// binaries just built instead of /usr/local/bin's.
	dir := t.TempDir()
	corekube, etcd := imageBinary(t), etcdcluster.Binary(t)
	var paths []string
	for _, u := range units {
		data, _ := os.ReadFile(filepath.Join("systemd", u.name))
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/corekube"), []byte(corekube))
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/etcd"), []byte(etcd))
		path := filepath.Join(dir, u.name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...)
	out, err := cmd.CombinedOutput()
	// verify exits 0 on unknown keys and bad values, which it only prints.
	// Dependencies on units this machine lacks are not the units' fault.
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !regexp.MustCompile(`^Unit \S+ not found\.$`).MatchString(line) {
			problems = append(problems, line)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(problems, "\n"))
	}
}

// TestHaproxyBalancesAPIServers runs haproxy (when installed) with
// compose/haproxy.cfg, its server addresses pointed at two real `corekube
// apiserver` processes sharing a CA (--cert-dir), so that the file is
// proven as it is: TLS passes through (the client verifies the cluster
// CA), the /readyz health checks over TLS pass without credentials, and an
// API server that dies is taken out of the rotation, after which every
// request succeeds.
func TestHaproxyBalancesAPIServers(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed")
	}
	bin := imageBinary(t)
	certDir := t.TempDir()
	addrs := []string{etcdcluster.FreeAddr(t), etcdcluster.FreeAddr(t)}
	var servers []*exec.Cmd
	for i, addr := range addrs {
		cmd := exec.Command(bin, "apiserver", "--listen", addr, "--data-dir", t.TempDir(), "--cert-dir", certDir)
		out := &testserver.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
			if t.Failed() {
				t.Logf("apiserver-%d:\n%s", i+1, out.String())
			}
		})
		servers = append(servers, cmd)
		// One at a time: the first makes the CA in certDir, the second
		// loads it.
		waitHTTPS(t, certDir, "https://"+addr+"/readyz", 30*time.Second)
	}

	cfg, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	lbAddr := etcdcluster.FreeAddr(t)
	text := string(cfg)
	// Docker's DNS is not here: the servers are addresses.
	text = regexp.MustCompile(`(?m)^resolvers docker\n([ \t]+.*\n)*`).ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, " resolvers docker", "")
	text = strings.Replace(text, "bind :6443", "bind "+lbAddr, 1)
	text = strings.Replace(text, "apiserver-1:6443", addrs[0], 1)
	text = strings.Replace(text, "apiserver-2:6443", addrs[1], 1)
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	lb := exec.Command(haproxy, "-db", "-f", cfgPath)
	lbOut := &testserver.SyncBuffer{}
	lb.Stdout, lb.Stderr = lbOut, lbOut
	if err := lb.Start(); err != nil {
		t.Fatal(err)
	}
	lbDone := make(chan struct{})
	go func() { _ = lb.Wait(); close(lbDone) }()
	t.Cleanup(func() {
		_ = lb.Process.Kill()
		<-lbDone
		if t.Failed() {
			t.Logf("haproxy:\n%s", lbOut.String())
		}
	})

	// Both servers come up in haproxy's checks; requests pass through.
	url := "https://" + lbAddr + "/readyz"
	waitHTTPS(t, certDir, url, 30*time.Second)

	// Round robin: both servers get connections (tcplog names the
	// backend server of each).
	client := httpsClient(t, certDir)
	for i := 0; i < 4; i++ {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitLog(t, lbOut, "apiservers/apiserver-1 ", "apiservers/apiserver-2 ")

	// One dies: haproxy's checks take it out (2 failures 2 s apart),
	// then every new connection goes to the other.
	if err := servers[0].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitLog(t, lbOut, "apiserver-1 is DOWN")
	t.Logf("haproxy took apiserver-1 out %v after it died", time.Since(killed).Round(time.Millisecond))
	for i := 0; i < 20; i++ {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("request %d through haproxy after apiserver-1 went down: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d through haproxy: %s", i, resp.Status)
		}
	}
}

// httpsClient trusts the cluster CA in certDir and opens a new connection
// per request (as a new client would), so that each one is balanced.
func httpsClient(t *testing.T, certDir string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in ca.crt")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// waitHTTPS polls url (verifying the cluster CA, once certDir has it) until
// it answers 200.
func waitHTTPS(t *testing.T, certDir, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(certDir, "ca.crt")); err == nil {
			resp, err := httpsClient(t, certDir).Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
				last = resp.Status
			} else {
				last = err.Error()
			}
		}
		time.Sleep(50 * time.Millisecond) // polling another process's readiness, with a deadline
	}
	t.Fatalf("%s not answering 200 after %v: %s", url, d, last)
}

// waitLog polls haproxy's output until it holds every line part in want.
func waitLog(t *testing.T, out *testserver.SyncBuffer, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, w := range want {
			all = all && strings.Contains(out.String(), w)
		}
		if all {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling another process's log, with a deadline
	}
	t.Fatalf("haproxy never logged %q:\n%s", want, out.String())
}

// TestPKIInitEtcdTLS proves the etcd certificates pki-init.sh makes
// (COREKUBE_ETCD_MEMBERS) as etcd.env and apiserver.env use them: an etcd
// member serving clients and peers over TLS with client certificates
// required, and `corekube apiserver` reaching it with --etcd-cafile,
// --etcd-certfile and --etcd-keyfile.
func TestPKIInitEtcdTLS(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	bin := imageBinary(t)
	dir := t.TempDir()
	pkiInit := exec.Command("sh", "compose/pki-init.sh")
	pkiInit.Env = append(os.Environ(), "COREKUBE_DIR="+dir, "COREKUBE_ETCD_MEMBERS=etcd-1=127.0.0.1")
	if out, err := pkiInit.CombinedOutput(); err != nil {
		t.Fatalf("pki-init.sh: %v\n%s", err, out)
	}
	pki := filepath.Join(dir, "etcd")
	clientURL, peerURL := "https://"+etcdcluster.FreeAddr(t), "https://"+etcdcluster.FreeAddr(t)
	etcd := exec.Command(etcdcluster.Binary(t), "--name", "etcd-1", "--data-dir", t.TempDir(),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd-1="+peerURL, "--unsafe-no-fsync", "--log-level", "warn",
		// etcd.env's TLS variables.
		"--cert-file", filepath.Join(pki, "etcd-1.crt"), "--key-file", filepath.Join(pki, "etcd-1.key"),
		"--trusted-ca-file", filepath.Join(pki, "ca.crt"), "--client-cert-auth",
		"--peer-cert-file", filepath.Join(pki, "etcd-1.crt"), "--peer-key-file", filepath.Join(pki, "etcd-1.key"),
		"--peer-trusted-ca-file", filepath.Join(pki, "ca.crt"), "--peer-client-cert-auth")
	etcdOut := &testserver.SyncBuffer{}
	etcd.Stdout, etcd.Stderr = etcdOut, etcdOut
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	etcdDone := make(chan struct{})
	go func() { _ = etcd.Wait(); close(etcdDone) }()
	t.Cleanup(func() {
		_ = etcd.Process.Kill()
		<-etcdDone
		if t.Failed() {
			t.Logf("etcd:\n%s", etcdOut.String())
		}
	})

	addr := etcdcluster.FreeAddr(t)
	apiserver := exec.Command(bin, "apiserver", "--listen", addr, "--data-dir", filepath.Join(dir, "apiserver"),
		"--etcd-servers", clientURL, "--etcd-cafile", filepath.Join(pki, "ca.crt"),
		"--etcd-certfile", filepath.Join(pki, "apiserver-etcd-client.crt"), "--etcd-keyfile", filepath.Join(pki, "apiserver-etcd-client.key"))
	out := &testserver.SyncBuffer{}
	apiserver.Stdout, apiserver.Stderr = out, out
	if err := apiserver.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = apiserver.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = apiserver.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("apiserver:\n%s", out.String())
		}
	})
	// Ready means its watch caches listed from etcd over TLS.
	waitHTTPS(t, filepath.Join(dir, "apiserver", "pki"), "https://"+addr+"/readyz", 60*time.Second)

	// Without a client certificate etcd refuses (client-cert-auth).
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := anon.Post(clientURL+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"Lw=="}`))
	if err == nil {
		resp.Body.Close()
		t.Errorf("etcd answered %s to a client without a certificate, want a refused handshake", resp.Status)
	}
}
