package shell

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// result is what a command did: its status and its output.
type result struct {
	status int
	stdout strings.Builder
	stderr strings.Builder
}

func (r *result) errorf(status int, format string, args ...any) {
	fmt.Fprintf(&r.stderr, format+"\n", args...)
	r.status = status
}

type builtin func(p *Process, args []string, r *result)

var builtins map[string]builtin

func init() {
	noop := func(*Process, []string, *result) {}
	builtins = map[string]builtin{
		":":      noop,
		"true":   noop,
		"false":  func(_ *Process, _ []string, r *result) { r.status = 1 },
		"exit":   (*Process).builtinExit,
		"sleep":  (*Process).builtinSleep,
		"echo":   builtinEcho,
		"printf": builtinPrintf,
		"touch":  (*Process).builtinTouch,
		"rm":     (*Process).builtinRm,
		"cat":    (*Process).builtinCat,
		"test":   (*Process).builtinTest,
		"[":      (*Process).builtinTest,
		"cp":     (*Process).builtinCopy,
		"mv":     (*Process).builtinCopy,
		"date": func(p *Process, _ []string, r *result) {
			r.stdout.WriteString(p.now.UTC().Format(time.UnixDate) + "\n")
		},
		"hostname": func(p *Process, _ []string, r *result) { r.stdout.WriteString(p.env.Vars["HOSTNAME"] + "\n") },
		"env":      (*Process).builtinEnv,
		"printenv": (*Process).builtinEnv,
		"export":   (*Process).builtinExport,
		"unset":    func(p *Process, args []string, _ *result) { unsetVars(p, args[1:]) },
		"stress":   (*Process).builtinStress,
		"tail":     (*Process).builtinTail,
		"yes":      func(p *Process, _ []string, _ *result) { p.block() },
		// Commands that succeed without an effect the simulation tracks.
		"cd": noop, "mkdir": noop, "set": noop, "trap": noop, "ulimit": noop, "umask": noop,
		"wait": noop, "sync": noop, "chmod": noop, "chown": noop, "ls": noop, "ln": noop,
		"wc": noop, "grep": noop, "sed": noop, "awk": noop, "kill": noop, "shift": noop,
		"source": noop, ".": noop, "read": noop, "tee": noop, "id": noop, "whoami": noop,
		"uname": noop, "ps": noop, "nslookup": noop, "wget": noop, "curl": noop,
		"exec": (*Process).builtinExec,
	}
}

// exec runs one simple command.
func (p *Process) exec(c *simpleCmd) {
	args := make([]string, 0, len(c.args))
	for _, w := range c.args {
		args = append(args, p.expand(w))
	}
	if len(args) == 0 {
		for _, a := range c.assigns {
			p.env.Vars[a.name] = p.expand(a.value)
		}
		p.status = 0
		return
	}
	// Prefix assignments apply to this command only; the builtins only
	// read HOSTNAME, so they are set for the call and restored.
	if len(c.assigns) > 0 {
		saved := map[string]*string{}
		for _, a := range c.assigns {
			if old, ok := p.env.Vars[a.name]; ok {
				saved[a.name] = &old
			} else {
				saved[a.name] = nil
			}
			p.env.Vars[a.name] = p.expand(a.value)
		}
		defer func() {
			for name, old := range saved {
				if old == nil {
					delete(p.env.Vars, name)
				} else {
					p.env.Vars[name] = *old
				}
			}
		}()
	}
	r := &result{}
	p.run(args, r)
	p.status = r.status
	p.output(c, r)
}

// run dispatches a command line to its builtin; unknown commands run
// until stopped (a server), or succeed at once inside an exec.
func (p *Process) run(args []string, r *result) {
	fn, ok := builtins[path.Base(args[0])]
	if !ok {
		if p.env.Exec {
			return
		}
		p.block()
		return
	}
	fn(p, args, r)
}

// block makes the process run until it is stopped.
func (p *Process) block() {
	if p.env.Exec {
		p.sleeping, p.sleepUntil = true, time.Time{}
		return
	}
	p.blocked = true
}

// output routes a command's output: to the log unless redirected to a
// file, /dev/null, or into a pipe.
func (p *Process) output(c *simpleCmd, r *result) {
	outs := [3]string{1: r.stdout.String(), 2: r.stderr.String()}
	targets := [3]*redirect{}
	for i := range c.redirs {
		rd := &c.redirs[i]
		if rd.fd == 0 || rd.dup {
			continue
		}
		if rd.op == "&>" || rd.op == "&>>" {
			targets[1], targets[2] = rd, rd
			continue
		}
		targets[rd.fd] = rd
	}
	for fd := 1; fd <= 2; fd++ {
		text := outs[fd]
		rd := targets[fd]
		if rd != nil {
			file := p.expand(rd.target)
			switch file {
			case "/dev/null":
				continue
			case "/dev/stdout", "/dev/stderr", "/proc/1/fd/1", "/proc/1/fd/2":
			default:
				if rd.op == ">>" || rd.op == "&>>" {
					p.env.Files[file] += text
				} else if fd == 1 || targets[1] != rd {
					p.env.Files[file] = text
				} else {
					p.env.Files[file] += text // &> file: stderr after stdout
				}
				continue
			}
		} else if fd == 1 && c.piped {
			continue
		}
		if text != "" && p.env.Output != nil {
			p.env.Output(p.now, text)
		}
	}
}

// expand substitutes $NAME, ${NAME}, $? and $$ outside single quotes.
func (p *Process) expand(w word) string {
	var b strings.Builder
	for _, pt := range w {
		if pt.quote == '\'' {
			b.WriteString(pt.text)
			continue
		}
		s := pt.text
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == 0 && i+1 < len(s) && s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if c != '$' || i+1 >= len(s) {
				b.WriteByte(c)
				continue
			}
			n := s[i+1]
			switch {
			case n == '?':
				b.WriteString(strconv.Itoa(p.status))
				i++
			case n == '$':
				b.WriteString("1")
				i++
			case n == '{':
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					b.WriteByte(c)
					continue
				}
				name := s[i+2 : i+end]
				if k := strings.Index(name, ":-"); k >= 0 {
					if v := p.env.Vars[name[:k]]; v != "" {
						b.WriteString(v)
					} else {
						b.WriteString(name[k+2:])
					}
				} else {
					b.WriteString(p.env.Vars[name])
				}
				i += end
			case n == '_' || n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z':
				j := i + 1
				for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
					j++
				}
				b.WriteString(p.env.Vars[s[i+1:j]])
				i = j - 1
			case n >= '0' && n <= '9':
				i++ // positional parameters are empty
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

func (p *Process) builtinExit(args []string, r *result) {
	code := p.status
	if len(args) > 1 {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			r.errorf(2, "exit: Illegal number: %s", args[1])
			code = 2
		} else {
			code = n & 0xff
		}
	}
	r.status = code
	p.exit(p.now, code)
}

// parseDuration reads sleep's arguments: seconds with an optional fraction
// and an s/m/h/d suffix, or "infinity".
func parseDuration(s string) (time.Duration, bool, error) {
	if s == "infinity" || s == "inf" {
		return 0, true, nil
	}
	mult := float64(time.Second)
	switch {
	case strings.HasSuffix(s, "s"):
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		s, mult = s[:len(s)-1], float64(time.Minute)
	case strings.HasSuffix(s, "h"):
		s, mult = s[:len(s)-1], float64(time.Hour)
	case strings.HasSuffix(s, "d"):
		s, mult = s[:len(s)-1], float64(24*time.Hour)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false, fmt.Errorf("invalid number '%s'", s)
	}
	if f*mult > float64(math.MaxInt64/2) {
		return 0, true, nil
	}
	return time.Duration(f * mult), false, nil
}

func (p *Process) builtinSleep(args []string, r *result) {
	if len(args) < 2 {
		r.errorf(1, "sleep: missing operand")
		return
	}
	var total time.Duration
	for _, a := range args[1:] {
		d, forever, err := parseDuration(a)
		if err != nil {
			r.errorf(1, "sleep: %v", err)
			return
		}
		if forever {
			p.sleeping, p.sleepUntil = true, time.Time{}
			return
		}
		total += d
	}
	p.sleeping, p.sleepUntil = true, p.now.Add(total)
}

func builtinEcho(_ *Process, args []string, r *result) {
	args = args[1:]
	newline, escapes := true, false
	for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-ne" || args[0] == "-en") {
		if strings.Contains(args[0], "n") {
			newline = false
		}
		if strings.Contains(args[0], "e") {
			escapes = true
		}
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if escapes {
		s = unescape(s)
	}
	r.stdout.WriteString(s)
	if newline {
		r.stdout.WriteString("\n")
	}
}

func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(s)
}

func builtinPrintf(_ *Process, args []string, r *result) {
	if len(args) < 2 {
		return
	}
	format, vals := unescape(args[1]), args[2:]
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 >= len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case '%':
			b.WriteByte('%')
		case 's', 'd':
			if len(vals) > 0 {
				b.WriteString(vals[0])
				vals = vals[1:]
			}
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	r.stdout.WriteString(b.String())
}

func (p *Process) builtinTouch(args []string, _ *result) {
	for _, f := range args[1:] {
		if strings.HasPrefix(f, "-") {
			continue
		}
		if _, ok := p.env.Files[f]; !ok {
			p.env.Files[f] = ""
		}
	}
}

func (p *Process) builtinRm(args []string, r *result) {
	force := false
	for _, f := range args[1:] {
		if strings.HasPrefix(f, "-") && len(f) > 1 {
			if strings.Contains(f, "f") {
				force = true
			}
			continue
		}
		if _, ok := p.env.Files[f]; ok {
			delete(p.env.Files, f)
			continue
		}
		// rm -r DIR removes what is under it.
		removed := false
		for name := range p.env.Files {
			if strings.HasPrefix(name, strings.TrimSuffix(f, "/")+"/") {
				delete(p.env.Files, name)
				removed = true
			}
		}
		if !removed && !force {
			r.errorf(1, "rm: can't remove '%s': No such file or directory", f)
		}
	}
}

func (p *Process) builtinCat(args []string, r *result) {
	for _, f := range args[1:] {
		if f == "-" {
			continue
		}
		content, ok := p.env.Files[f]
		if !ok {
			r.errorf(1, "cat: can't open '%s': No such file or directory", f)
			continue
		}
		r.stdout.WriteString(content)
	}
}

func (p *Process) builtinCopy(args []string, r *result) {
	var ops []string
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			ops = append(ops, a)
		}
	}
	if len(ops) != 2 {
		return
	}
	content, ok := p.env.Files[ops[0]]
	if !ok {
		r.errorf(1, "%s: can't stat '%s': No such file or directory", path.Base(args[0]), ops[0])
		return
	}
	p.env.Files[ops[1]] = content
	if path.Base(args[0]) == "mv" {
		delete(p.env.Files, ops[0])
	}
}

func (p *Process) exists(f string) bool {
	if _, ok := p.env.Files[f]; ok {
		return true
	}
	return p.isDir(f)
}

// isDir: directories are not tracked; the usual ones exist, and so does
// any path that has files under it.
func (p *Process) isDir(f string) bool {
	switch strings.TrimSuffix(f, "/") {
	case "", "/tmp", "/etc", "/var", "/usr", "/bin", "/dev", "/proc", "/root", "/home", "/run", "/var/log", "/data":
		return true
	}
	prefix := strings.TrimSuffix(f, "/") + "/"
	for name := range p.env.Files {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func (p *Process) builtinTest(args []string, r *result) {
	a := args[1:]
	if path.Base(args[0]) == "[" {
		if len(a) == 0 || a[len(a)-1] != "]" {
			r.errorf(2, "[: missing ]")
			return
		}
		a = a[:len(a)-1]
	}
	ok, err := p.evalTest(a)
	if err != nil {
		r.errorf(2, "test: %v", err)
		return
	}
	if !ok {
		r.status = 1
	}
}

func (p *Process) evalTest(a []string) (bool, error) {
	if len(a) > 0 && a[0] == "!" {
		ok, err := p.evalTest(a[1:])
		return !ok, err
	}
	switch len(a) {
	case 0:
		return false, nil
	case 1:
		return a[0] != "", nil
	case 2:
		switch a[0] {
		case "-f":
			_, ok := p.env.Files[a[1]]
			return ok, nil
		case "-e", "-r", "-w", "-x":
			return p.exists(a[1]), nil
		case "-d":
			return p.isDir(a[1]), nil
		case "-s":
			return p.env.Files[a[1]] != "", nil
		case "-z":
			return a[1] == "", nil
		case "-n":
			return a[1] != "", nil
		}
		return false, fmt.Errorf("%s: unknown operand", a[0])
	case 3:
		switch a[1] {
		case "=", "==":
			return a[0] == a[2], nil
		case "!=":
			return a[0] != a[2], nil
		case "-eq", "-ne", "-lt", "-le", "-gt", "-ge":
			x, err1 := strconv.Atoi(a[0])
			y, err2 := strconv.Atoi(a[2])
			if err1 != nil || err2 != nil {
				return false, fmt.Errorf("bad number")
			}
			switch a[1] {
			case "-eq":
				return x == y, nil
			case "-ne":
				return x != y, nil
			case "-lt":
				return x < y, nil
			case "-le":
				return x <= y, nil
			case "-gt":
				return x > y, nil
			}
			return x >= y, nil
		}
	}
	return false, fmt.Errorf("syntax error")
}

func (p *Process) builtinEnv(_ []string, r *result) {
	names := make([]string, 0, len(p.env.Vars))
	for n := range p.env.Vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&r.stdout, "%s=%s\n", n, p.env.Vars[n])
	}
}

func (p *Process) builtinExport(args []string, _ *result) {
	for _, a := range args[1:] {
		if name, value, ok := strings.Cut(a, "="); ok && isName(name) {
			p.env.Vars[name] = value
		}
	}
}

func unsetVars(p *Process, names []string) {
	for _, n := range names {
		delete(p.env.Vars, n)
	}
}

// builtinExec replaces the shell with the command: a server started with
// exec receives SIGTERM; a builtin's status ends the container.
func (p *Process) builtinExec(args []string, r *result) {
	if len(args) < 2 {
		return
	}
	if _, ok := builtins[path.Base(args[1])]; !ok {
		p.run(args[1:], r)
		if p.blocked {
			p.handlesTER = true
		}
		return
	}
	p.run(args[1:], r)
	if !p.exited && !p.blocked && !p.sleeping {
		p.exit(p.now, r.status)
		return
	}
	if !p.exited {
		// exec sleep N: the sleep ends the container.
		p.pc = len(p.prog.code)
	}
}

// parseSize reads stress's sizes: a number with an optional B, K, M or G
// suffix (powers of 1024).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'b', 'B':
			s = s[:n-1]
		case 'k', 'K':
			s, mult = s[:n-1], 1<<10
		case 'm', 'M':
			s, mult = s[:n-1], 1<<20
		case 'g', 'G':
			s, mult = s[:n-1], 1<<30
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return v * mult, nil
}

// builtinStress is stress(1) as the memory examples of the Kubernetes
// documentation use it: --vm-bytes above the memory limit is an OOM kill
// (exit 137); otherwise it runs for --timeout or until stopped.
func (p *Process) builtinStress(args []string, r *result) {
	var (
		vmBytes int64
		timeout time.Duration
		vms     int64 = 1
	)
	for i := 1; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		next := func() string {
			if hasValue {
				return value
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch flag {
		case "--vm-bytes":
			n, err := parseSize(next())
			if err != nil {
				r.errorf(1, "stress: FAIL: %v", err)
				return
			}
			vmBytes = n
		case "--vm", "-m":
			n, err := strconv.ParseInt(next(), 10, 64)
			if err == nil && n > 0 {
				vms = n
			}
		case "--timeout", "-t":
			d, _, err := parseDuration(next())
			if err == nil {
				timeout = d
			}
		case "--vm-hang", "--cpu", "-c", "--io", "-i", "--hdd", "-d", "--vm-keep", "--backoff":
			if flag != "--vm-keep" {
				next()
			}
		}
	}
	if vmBytes == 0 {
		vmBytes = 256 << 20 // stress's default
	}
	if limit := p.env.MemoryLimit; limit > 0 && vmBytes*vms > limit {
		p.oom = true
		p.exit(p.now, 137)
		r.status = 137
		return
	}
	p.memory = vmBytes * vms
	if timeout > 0 {
		p.sleeping, p.sleepUntil = true, p.now.Add(timeout)
		return
	}
	p.block()
}

// builtinTail: tail -f runs until stopped (the `tail -f /dev/null` idiom);
// otherwise it prints the end of a file.
func (p *Process) builtinTail(args []string, r *result) {
	var files []string
	for _, a := range args[1:] {
		if a == "-f" || a == "-F" {
			p.block()
			return
		}
		if !strings.HasPrefix(a, "-") {
			files = append(files, a)
		}
	}
	for _, f := range files {
		content, ok := p.env.Files[f]
		if !ok {
			r.errorf(1, "tail: can't open '%s': No such file or directory", f)
			continue
		}
		r.stdout.WriteString(content)
	}
}
