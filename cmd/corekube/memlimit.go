package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitRatio is the share of the cgroup's memory limit given to the
// Go runtime as its soft limit (GOMEMLIMIT): the rest is for what the
// runtime does not count (etcd's bbolt mmap, the binary, stacks of cgo
// threads), as automemlimit's default.
const memoryLimitRatio = 0.9

// setMemoryLimit gives the Go runtime a soft memory limit from the
// process's cgroup when the environment sets none (GOMEMLIMIT), so that
// the garbage collector works harder as the process nears its limit
// instead of letting GOGC's headroom (up to twice the live heap) get it
// killed. Without a cgroup limit it changes nothing.
func setMemoryLimit(log *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	limit, source := cgroupMemoryLimit("/")
	if limit <= 0 {
		return
	}
	soft := int64(float64(limit) * memoryLimitRatio)
	debug.SetMemoryLimit(soft)
	log.Info("GOMEMLIMIT from the cgroup's memory limit", "cgroupLimit", limit, "from", source, "GOMEMLIMIT", soft)
}

// cgroupMemoryLimit returns the memory limit in bytes of this process's
// cgroup under root ("/" but in tests), and the file it read: cgroup v2's
// memory.max of the process's own cgroup, else cgroup v1's
// memory.limit_in_bytes. 0 means no limit (or none found).
func cgroupMemoryLimit(root string) (int64, string) {
	var v2Path string
	if data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			// v2: "0::/path"; v1: "N:memory:/path" among others.
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) == 3 && parts[0] == "0" && parts[1] == "" {
				v2Path = parts[2]
			}
		}
	}
	candidates := []string{}
	if v2Path != "" {
		candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup", v2Path, "memory.max"))
	}
	candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup/memory.max"),
		filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
	for _, file := range candidates {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, file
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 says "no limit" with a huge page-aligned number.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, file
		}
		return n, file
	}
	return 0, ""
}
