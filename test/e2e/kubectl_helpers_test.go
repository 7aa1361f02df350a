package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kc runs one kubectl binary against a corekube process on behalf of one
// (sub)test, so that several subtests can share a process.
type kc struct {
	t   *testing.T
	p   *process
	bin string
}

func (p *process) kc(t *testing.T, bin string) *kc { return &kc{t: t, p: p, bin: bin} }

// start starts kubectl without waiting for it.
func (k *kc) start(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	k.t.Helper()
	cmd := exec.CommandContext(ctx, k.bin, append(k.p.kubectlFlags(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // kubectl diff's diff must not hold the pipes open
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

// runTimeout bounds one kubectl run, so that a server that stops answering
// fails the test with the command rather than the package with a timeout.
const runTimeout = 30 * time.Second

// run runs kubectl and returns its stdout and stderr apart, each without
// its final newline; err is non-nil when kubectl exits non-zero.
func (k *kc) run(args ...string) (stdout, stderr string, err error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd, out, errOut := k.start(ctx, args...)
	err = cmd.Wait()
	if ctx.Err() != nil {
		err = fmt.Errorf("did not finish within %v: %w", runTimeout, err)
	}
	return strings.TrimSuffix(out.String(), "\n"), strings.TrimSuffix(errOut.String(), "\n"), err
}

// ok runs kubectl, which must succeed without writing to stderr, and
// returns its stdout.
func (k *kc) ok(args ...string) string {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err != nil || stderr != "" {
		k.t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// expect runs kubectl, which must succeed, print want (ages normalized,
// see ages) and nothing on stderr.
func (k *kc) expect(want string, args ...string) {
	k.t.Helper()
	k.expectOut(want, "", args...)
}

// expectOut runs kubectl, which must succeed and print exactly wantOut on
// stdout (ages normalized) and wantErr on stderr.
func (k *kc) expectOut(wantOut, wantErr string, args ...string) {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err != nil {
		k.t.Errorf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
		return
	}
	k.compare(args, "stdout", ages(stdout), wantOut)
	k.compare(args, "stderr", stderr, wantErr)
}

// expectFail runs kubectl, which must fail, print nothing on stdout and
// exactly wantErr on stderr.
func (k *kc) expectFail(wantErr string, args ...string) {
	k.t.Helper()
	k.expectFailOut("", wantErr, args...)
}

// expectFailOut runs kubectl, which must fail and print exactly wantOut and
// wantErr.
func (k *kc) expectFailOut(wantOut, wantErr string, args ...string) {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err == nil {
		k.t.Errorf("kubectl %s succeeded, want a failure\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
		return
	}
	k.compare(args, "stdout", ages(stdout), wantOut)
	k.compare(args, "stderr", stderr, wantErr)
}

func (k *kc) compare(args []string, stream, got, want string) {
	k.t.Helper()
	if got != want {
		k.t.Errorf("kubectl %s: %s:\n%s\nwant:\n%s", strings.Join(args, " "), stream, got, want)
	}
}

// file writes a manifest into a temporary directory and returns its path.
func (k *kc) file(name, content string) string {
	k.t.Helper()
	path := filepath.Join(k.t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		k.t.Fatal(err)
	}
	return path
}

// eventually runs kubectl until its stdout is want, for state that another
// process (a controller, a concurrent kubectl) changes; it fails after a
// deadline.
func (k *kc) eventually(want string, args ...string) {
	k.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, _ := k.run(args...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("kubectl %s: still %q after 30s, want %q", strings.Join(args, " "), got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state, with a deadline
	}
}

// lines joins lines with newlines.
func lines(l ...string) string { return strings.Join(l, "\n") }

// ageCell is an AGE cell of less than 100s; objects here are read soon
// after they are created.
var ageCell = regexp.MustCompile(`(?m)  [0-9]{1,2}s(  |$)`)

// ages writes every AGE as 0s, so that tables compare exactly. A two-digit
// age is as wide as the AGE header, so it is padded to keep the columns
// that follow where kubectl put them.
func ages(s string) string {
	return ageCell.ReplaceAllStringFunc(s, func(cell string) string {
		if strings.HasSuffix(cell, "s  ") {
			return "  0s" + strings.Repeat(" ", len(cell)-6) + "  "
		}
		return "  0s" // at the end of a line
	})
}

// readFile returns a file's content.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
