package shell

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func TestMainProcess(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		memLimit int64
		// expectations after running long enough (1h)
		server   bool // FromArgv says server (nil program)
		exited   bool
		code     int
		after    time.Duration // exit time relative to start
		oom      bool
		log      string
		handles  bool // HandlesSIGTERM while running
		wakeSoon bool
	}{
		{name: "no command is a server", argv: nil, server: true, handles: true},
		{name: "unknown command is a server", argv: []string{"/server"}, server: true, handles: true},
		{name: "nginx", argv: []string{"nginx", "-g", "daemon off;"}, server: true, handles: true},
		{name: "sh without -c", argv: []string{"sh"}, server: true, handles: true},
		{name: "exit 0", argv: []string{"sh", "-c", "exit 0"}, exited: true},
		{name: "exit 1", argv: []string{"sh", "-c", "exit 1"}, exited: true, code: 1},
		{name: "exit 300 wraps", argv: []string{"sh", "-c", "exit 300"}, exited: true, code: 44},
		{name: "bash -ec", argv: []string{"/bin/bash", "-ec", "false"}, exited: true, code: 1},
		{name: "busybox sh", argv: []string{"busybox", "sh", "-c", "exit 7"}, exited: true, code: 7},
		{name: "plain sleep", argv: []string{"sleep", "5"}, exited: true, after: 5 * time.Second},
		{name: "plain /bin/sleep fraction", argv: []string{"/bin/sleep", "0.25"}, exited: true, after: sec(0.25)},
		{name: "sleep then exit", argv: []string{"sh", "-c", "sleep 2; exit 3"}, exited: true, code: 3, after: 2 * time.Second},
		{name: "sleep units", argv: []string{"sh", "-c", "sleep 1m 1s"}, exited: true, after: 61 * time.Second},
		{name: "sleep infinity", argv: []string{"sleep", "infinity"}},
		{name: "echo", argv: []string{"echo", "hello", "world"}, exited: true, log: "hello world\n"},
		{name: "and chain stops", argv: []string{"sh", "-c", "true && false && echo no"}, exited: true, code: 1},
		{name: "or chain", argv: []string{"sh", "-c", "false || echo yes"}, exited: true, log: "yes\n"},
		{name: "and or", argv: []string{"sh", "-c", "false && echo a || echo b"}, exited: true, log: "b\n"},
		{name: "negate", argv: []string{"sh", "-c", "! false"}, exited: true},
		{name: "files", argv: []string{"sh", "-c", "touch /tmp/a; test -f /tmp/a && echo ok; rm /tmp/a; cat /tmp/a"}, exited: true, code: 1,
			log: "ok\ncat: can't open '/tmp/a': No such file or directory\n"},
		{name: "rm -f missing", argv: []string{"sh", "-c", "rm -f /nope"}, exited: true},
		{name: "rm missing", argv: []string{"sh", "-c", "rm /nope"}, exited: true, code: 1, log: "rm: can't remove '/nope': No such file or directory\n"},
		{name: "redirect and cat", argv: []string{"sh", "-c", "echo hi > /tmp/f; echo there >> /tmp/f; cat /tmp/f"}, exited: true, log: "hi\nthere\n"},
		{name: "dev null", argv: []string{"sh", "-c", "echo hidden > /dev/null; cat /missing 2>/dev/null"}, exited: true, code: 1},
		{name: "quotes", argv: []string{"sh", "-c", `echo "a  b" 'c;d' e\;f`}, exited: true, log: "a  b c;d e;f\n"},
		{name: "vars", argv: []string{"sh", "-c", `X=1; Y="two"; echo "$X ${Y} ${Z:-z} '$X'" '$X' \$X`}, exited: true, log: "1 two z '1' $X $X\n"},
		{name: "status var", argv: []string{"sh", "-c", "false; echo $?"}, exited: true, log: "1\n"},
		{name: "while loop counts", argv: []string{"sh", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"}, exited: true, after: 3 * time.Second, log: "1\n2\n3\n"},
		{name: "if else", argv: []string{"sh", "-c", "if test -f /x; then echo yes; elif [ 1 -eq 1 ]; then echo elif; else echo no; fi"}, exited: true, log: "elif\n"},
		{name: "multi line", argv: []string{"sh", "-c", "echo a\n# comment\necho b \\\n  c\n"}, exited: true, log: "a\nb c\n"},
		{name: "while true forever", argv: []string{"sh", "-c", "while true; do echo tick; sleep 10; done"}, wakeSoon: true},
		{name: "until", argv: []string{"sh", "-c", "touch /c; until [ -f /done ]; do if [ -f /c ]; then touch /done; fi; sleep 1; done; echo out"}, exited: true, after: time.Second, log: "out\n"},
		{name: "busy loop does not hang", argv: []string{"sh", "-c", "while :; do :; done"}},
		{name: "server in script ignores TERM", argv: []string{"sh", "-c", "echo start; nginx"}, log: "start\n"},
		{name: "exec server handles TERM", argv: []string{"sh", "-c", "echo start; exec nginx"}, log: "start\n", handles: true},
		{name: "exec builtin ends", argv: []string{"sh", "-c", "exec false; echo never"}, exited: true, code: 1},
		{name: "exec sleep", argv: []string{"sh", "-c", "exec sleep 2; echo never"}, exited: true, after: 2 * time.Second},
		{name: "stress over limit OOM", argv: []string{"stress", "--vm", "1", "--vm-bytes", "250M", "--vm-hang", "1"}, memLimit: 100 << 20,
			exited: true, code: 137, oom: true},
		{name: "stress under limit runs", argv: []string{"stress", "--vm", "1", "--vm-bytes", "150M", "--vm-hang", "1"}, memLimit: 200 << 20},
		{name: "stress no limit runs", argv: []string{"stress", "--vm-bytes", "10G"}},
		{name: "stress timeout", argv: []string{"stress", "--vm-bytes", "1M", "--timeout", "3s"}, exited: true, after: 3 * time.Second},
		{name: "tail -f", argv: []string{"tail", "-f", "/dev/null"}},
		{name: "docs liveness", argv: []string{"/bin/sh", "-c", "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600"}, exited: true, after: 630 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := FromArgv(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			if (prog == nil) != tc.server {
				t.Fatalf("server = %v, want %v", prog == nil, tc.server)
			}
			var log strings.Builder
			p := prog.Start(t0, &Env{MemoryLimit: tc.memLimit, Output: func(_ time.Time, s string) { log.WriteString(s) }})
			p.Advance(t0)
			if !tc.exited && p.HandlesSIGTERM() != tc.handles {
				t.Errorf("HandlesSIGTERM = %v, want %v", p.HandlesSIGTERM(), tc.handles)
			}
			p.Advance(t0.Add(time.Hour))
			if p.Exited() != tc.exited {
				t.Fatalf("exited = %v, want %v (log %q)", p.Exited(), tc.exited, log.String())
			}
			if tc.exited {
				if p.ExitCode() != tc.code {
					t.Errorf("exit code = %d, want %d (log %q)", p.ExitCode(), tc.code, log.String())
				}
				if got := p.ExitTime().Sub(t0); got != tc.after {
					t.Errorf("exited after %v, want %v", got, tc.after)
				}
				if p.OOMKilled() != tc.oom {
					t.Errorf("oom = %v, want %v", p.OOMKilled(), tc.oom)
				}
			}
			if log.String() != tc.log && !tc.wakeSoon {
				t.Errorf("log = %q, want %q", log.String(), tc.log)
			}
			if tc.wakeSoon && p.WakeAt().IsZero() {
				t.Errorf("WakeAt is zero for a sleeping loop")
			}
		})
	}
}

// TestAdvanceInSteps checks that running in small steps gives the same
// timeline as one big step, and that the state in between is right.
func TestAdvanceInSteps(t *testing.T) {
	prog, err := FromArgv([]string{"sh", "-c", "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 10; exit 2"})
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{}
	p := prog.Start(t0, env)
	p.Advance(t0.Add(29 * time.Second))
	if _, ok := env.Files["/tmp/healthy"]; !ok || p.Exited() {
		t.Fatalf("at 29s: files %v exited %v", env.Files, p.Exited())
	}
	if got := p.WakeAt(); !got.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("WakeAt = %v", got)
	}
	p.Advance(t0.Add(30 * time.Second))
	if _, ok := env.Files["/tmp/healthy"]; ok {
		t.Fatalf("at 30s the file should be gone")
	}
	p.Advance(t0.Add(39 * time.Second))
	if p.Exited() {
		t.Fatal("exited too early")
	}
	p.Advance(t0.Add(100 * time.Second))
	if !p.Exited() || p.ExitCode() != 2 || !p.ExitTime().Equal(t0.Add(40*time.Second)) {
		t.Fatalf("exit: %v %d %v", p.Exited(), p.ExitCode(), p.ExitTime())
	}
}

func TestRunExec(t *testing.T) {
	files := map[string]string{"/tmp/healthy": ""}
	tests := []struct {
		name     string
		argv     []string
		timeout  time.Duration
		code     int
		out      string
		timedOut bool
	}{
		{name: "cat present", argv: []string{"cat", "/tmp/healthy"}},
		{name: "cat missing", argv: []string{"cat", "/tmp/nope"}, code: 1, out: "cat: can't open '/tmp/nope': No such file or directory\n"},
		{name: "unknown succeeds", argv: []string{"/bin/grpc_health_probe", "-addr=:8080"}},
		{name: "sh test", argv: []string{"sh", "-c", "test -f /tmp/healthy"}},
		{name: "exit code", argv: []string{"sh", "-c", "echo bad; exit 3"}, code: 3, out: "bad\n"},
		{name: "sleep within timeout", argv: []string{"sh", "-c", "sleep 0.5"}, timeout: time.Second},
		{name: "sleep past timeout", argv: []string{"sh", "-c", "sleep 5"}, timeout: time.Second, code: -1, timedOut: true},
		{name: "tail -f times out", argv: []string{"tail", "-f", "/dev/null"}, timeout: time.Second, code: -1, timedOut: true},
		{name: "busy loop times out", argv: []string{"sh", "-c", "while :; do :; done"}, timeout: time.Second, code: -1, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := FromArgv(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			if prog == nil {
				prog, _ = Parse(strings.Join(tc.argv, " "))
			}
			code, out, _, timedOut := Run(prog, t0, Env{Files: files}, tc.timeout)
			if code != tc.code || out != tc.out || timedOut != tc.timedOut {
				t.Errorf("Run = %d %q %v, want %d %q %v", code, out, timedOut, tc.code, tc.out, tc.timedOut)
			}
		})
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, script := range []string{
		"echo 'unterminated",
		`echo "unterminated`,
		"while true; do echo",
		"if true; then echo; ",
		"echo hi; done",
		"for 1x in a; do :; done",
		"&& echo",
	} {
		if _, err := Parse(script); err == nil {
			t.Errorf("Parse(%q): no error", script)
		}
	}
}
