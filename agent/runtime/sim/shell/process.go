package shell

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// Program is a parsed container command.
type Program struct {
	code []instr
}

// Parse parses a script (the argument of sh -c).
func Parse(script string) (*Program, error) {
	l, err := parse(script)
	if err != nil {
		return nil, err
	}
	c := &compiler{}
	c.node(l)
	return &Program{code: c.code}, nil
}

var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true, "ksh": true, "zsh": true}

// FromArgv reads a container's command line (command followed by args, as
// the kubelet passes them to the runtime). It returns nil, nil when argv
// is empty or names no command the interpreter knows: such a container is a
// "server" that runs until it is stopped and stops at once on SIGTERM.
//
//   - ["sh", "-c", SCRIPT] (also bash/ash/dash, /bin/sh, flags like -ec, and
//     a leading "busybox") runs SCRIPT;
//   - [CMD, ARGS...] with CMD one of the interpreter's commands runs it
//     directly (["sleep", "5"], ["echo", "hi"]);
//   - anything else is a server.
func FromArgv(argv []string) (*Program, error) {
	if len(argv) > 0 && path.Base(argv[0]) == "busybox" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return nil, nil
	}
	name := path.Base(argv[0])
	if shells[name] {
		for i := 1; i < len(argv); i++ {
			a := argv[i]
			if !strings.HasPrefix(a, "-") || a == "-" {
				break
			}
			if strings.Contains(a[1:], "c") && !strings.HasPrefix(a, "--") {
				if i+1 >= len(argv) {
					return nil, fmt.Errorf("%s: %s requires an argument", name, a)
				}
				return Parse(argv[i+1])
			}
		}
		return nil, nil // an interactive shell or a script file: runs until stopped
	}
	if _, ok := builtins[name]; !ok {
		return nil, nil
	}
	cmd := &simpleCmd{}
	for _, a := range argv {
		cmd.args = append(cmd.args, word{{text: a, quote: '\''}})
	}
	return &Program{code: []instr{{op: opExec, cmd: cmd}}}, nil
}

// Failing is a program that writes message and exits with code: what a
// container whose script sh cannot parse does (sh reports the syntax error
// and exits 2).
func Failing(message string, code int) *Program {
	quoted := func(s string) word { return word{{text: s, quote: '\''}} }
	return &Program{code: []instr{
		{op: opExec, cmd: &simpleCmd{args: []word{quoted("echo"), quoted(message)}}},
		{op: opExec, cmd: &simpleCmd{args: []word{quoted("exit"), quoted(fmt.Sprint(code))}}},
	}}
}

// Env is what a process runs against: the container's file system and
// variables, where its output goes, and its memory limit.
type Env struct {
	// Files is the container's file system: path → content.
	Files map[string]string
	// Vars are the environment variables.
	Vars map[string]string
	// Output receives what the process writes to stdout and stderr, with
	// the (virtual) time it was written. Nil discards it.
	Output func(at time.Time, text string)
	// MemoryLimit is the container's memory limit in bytes (0: none).
	MemoryLimit int64
	// Exec marks a run inside an existing container (a probe or a hook):
	// commands the interpreter does not know succeed at once instead of
	// running until stopped.
	Exec bool
}

// maxSteps bounds the instructions one Advance runs without virtual time
// moving (a busy loop such as `while true; do :; done`); the rest of the
// interval counts as spent spinning.
const maxSteps = 10000

// Process is a running program. Time is virtual: Advance runs the program
// up to a given instant, so that a container's state at any moment is a
// function of its script and its start time, and nothing needs a goroutine
// or a timer per container.
type Process struct {
	prog *Program
	env  *Env

	pc     int
	status int
	now    time.Time // how far the program has run

	sleeping   bool
	sleepUntil time.Time // zero with sleeping: forever
	blocked    bool      // in a command that runs until stopped
	handlesTER bool      // blocked in an exec'd server: SIGTERM ends it

	exited   bool
	exitCode int
	exitAt   time.Time
	oom      bool
	// memory is what the process holds in bytes: stress's --vm-bytes
	// while it runs (released when it ends).
	memory int64
}

// Start starts prog at the given time. A nil prog is a server: it runs
// until stopped, and never reads env (which may be nil then).
func (prog *Program) Start(at time.Time, env *Env) *Process {
	if prog == nil {
		return &Process{env: env, now: at, blocked: true, handlesTER: true}
	}
	if env == nil {
		env = &Env{}
	}
	if env.Files == nil {
		env.Files = map[string]string{}
	}
	if env.Vars == nil {
		env.Vars = map[string]string{}
	}
	return &Process{prog: prog, env: env, now: at}
}

// Exited reports whether the process has exited (as of the last Advance).
func (p *Process) Exited() bool { return p.exited }

// ExitCode is the exit status once Exited.
func (p *Process) ExitCode() int { return p.exitCode }

// ExitTime is when the process exited.
func (p *Process) ExitTime() time.Time { return p.exitAt }

// OOMKilled reports whether the process was killed for exceeding its
// memory limit (exit code 137).
func (p *Process) OOMKilled() bool { return p.oom }

// MemoryUsage is the memory the process holds as of the last Advance, in
// bytes: what a running stress allocated (--vm-bytes times --vm), else 0.
func (p *Process) MemoryUsage() int64 { return p.memory }

// WakeAt is the end of the current sleep (zero when not sleeping or
// sleeping forever): the next instant at which the process does something
// by itself.
func (p *Process) WakeAt() time.Time {
	if p.exited || !p.sleeping {
		return time.Time{}
	}
	return p.sleepUntil
}

// HandlesSIGTERM reports whether SIGTERM ends the process at once: true for
// servers (a command the interpreter does not know, run as PID 1 directly or
// through exec). A shell or sleep as PID 1 ignores SIGTERM, as in a real
// container, and runs until killed.
func (p *Process) HandlesSIGTERM() bool { return !p.exited && p.blocked && p.handlesTER }

// Kill ends the process at t with the given exit code.
func (p *Process) Kill(t time.Time, code int) {
	if p.exited {
		return
	}
	p.exit(t, code)
}

func (p *Process) exit(t time.Time, code int) {
	p.exited, p.exitCode, p.exitAt = true, code, t
	p.sleeping, p.blocked = false, false
	p.memory = 0
}

// Advance runs the program up to time to.
func (p *Process) Advance(to time.Time) {
	steps := 0
	for !p.exited && !p.blocked {
		if p.sleeping {
			if p.sleepUntil.IsZero() || p.sleepUntil.After(to) {
				return
			}
			p.now, p.sleeping = p.sleepUntil, false
			// Only stress holds memory across a sleep (its --timeout).
			p.memory = 0
		}
		if p.pc >= len(p.prog.code) {
			p.exit(p.now, p.status)
			return
		}
		if steps++; steps > maxSteps {
			if to.After(p.now) {
				p.now = to
			}
			return
		}
		in := p.prog.code[p.pc]
		p.pc++
		switch in.op {
		case opExec:
			p.exec(in.cmd)
		case opJump:
			p.pc = in.target
		case opJumpIfOK:
			if p.status == 0 {
				p.pc = in.target
			}
		case opJumpIfErr:
			if p.status != 0 {
				p.pc = in.target
			}
		case opNot:
			if p.status == 0 {
				p.status = 1
			} else {
				p.status = 0
			}
		case opStatus0:
			p.status = 0
		}
	}
}

// Run runs prog to completion inside a container (an exec probe or hook)
// from time at, against env's files and variables. It returns the exit
// code, the output, the (virtual) time the run took, and whether it took
// longer than timeout (when timeout > 0; the run then stops there).
func Run(prog *Program, at time.Time, env Env, timeout time.Duration) (code int, output string, took time.Duration, timedOut bool) {
	var out strings.Builder
	env.Exec = true
	env.Output = func(_ time.Time, s string) { out.WriteString(s) }
	if prog == nil {
		return 0, "", 0, false
	}
	p := prog.Start(at, &env)
	// Exec runs never block; sleeps move virtual time.
	end := time.Time{}
	if timeout > 0 {
		end = at.Add(timeout)
	}
	for i := 0; !p.exited; i++ {
		if p.sleeping {
			if p.sleepUntil.IsZero() || (!end.IsZero() && p.sleepUntil.After(end)) {
				return -1, out.String(), timeout, true
			}
			p.Advance(p.sleepUntil)
			continue
		}
		if i > 100 { // a busy loop that never exits
			return -1, out.String(), timeout, true
		}
		p.Advance(p.now)
	}
	return p.exitCode, out.String(), p.exitAt.Sub(at), false
}
