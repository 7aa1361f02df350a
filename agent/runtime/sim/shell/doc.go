// Package shell is the tiny shell that simulated containers run: a
// container's command and args are read as sh would read them, for the
// subset that manifests from the Kubernetes documentation use.
//
// Supported: `sh -c SCRIPT` (also bash/ash/dash, flags like -ec) or a plain
// command; commands joined by `;`, `&&`, `||`, `|`, `&` (run in sequence) and
// newlines; `while`/`until ...; do ...; done`, `if/elif/else/fi`,
// `for X in WORDS; do ...; done`, `{ ...; }`, `( ... )`, `!`; quotes,
// backslashes, comments, $VAR/${VAR}/${VAR:-default}/$? expansion, NAME=value;
// redirections `>`, `>>`, `2>`, `&>`, `2>&1`.
//
// Commands: sleep N (fractions, s/m/h/d suffixes, infinity), exit N, true,
// false, :, echo, printf, touch, rm [-f] [-r], cat, cp, mv, test / [ with
// -f -e -d -s -z -n = != -eq ..., date, hostname, env, export, unset, exec,
// tail -f (runs until stopped), yes, stress --vm-bytes SIZE [--vm N]
// [--timeout T] (more than the memory limit is an OOM kill, exit 137), and a
// list of utilities that succeed without effect (mkdir, cd, ls, grep, ...).
// Each container has its own in-memory file system; output goes to the
// container's log.
//
// Time is virtual: a Process advances to a given instant on request, so the
// state of thousands of containers needs no goroutine or timer each. A
// command the interpreter does not know runs until the container is stopped
// (a server); inside an exec (probe or hook) it succeeds at once.
package shell
