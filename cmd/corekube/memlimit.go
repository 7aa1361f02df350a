package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryLimitRatio is the share of the cgroup's memory limit given to the
// Go runtime as its soft limit (GOMEMLIMIT): the rest is for what the
// runtime does not count (etcd's bbolt mmap, the binary, stacks of cgo
// threads), as automemlimit's default.
const memoryLimitRatio = 0.9

// setMemoryLimit gives the Go runtime its soft memory limit (GOMEMLIMIT):
// flag (--memory-limit) when set, else the environment's GOMEMLIMIT (which
// the runtime has read already), else memoryLimitRatio of the process's
// cgroup limit, else none. Near the limit the garbage collector works
// harder instead of letting GOGC's headroom (up to twice the live heap)
// grow the process, so that it is not killed, or, when set lower, so that
// it holds less memory for some CPU.
func setMemoryLimit(log *slog.Logger, flag string) error {
	_, env := os.LookupEnv("GOMEMLIMIT")
	cgroup, from := int64(0), ""
	if flag == "" && !env {
		cgroup, from = cgroupMemoryLimit("/")
	}
	limit, source, err := softMemoryLimit(flag, env, cgroup)
	if err != nil || limit <= 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	if source == "cgroup" {
		log.Info("GOMEMLIMIT from the cgroup's memory limit", "cgroupLimit", cgroup, "from", from, "GOMEMLIMIT", limit)
	} else {
		log.Info("GOMEMLIMIT from --memory-limit", "GOMEMLIMIT", limit)
	}
	return nil
}

// softMemoryLimit picks the soft memory limit to set, and where it comes
// from ("flag", "cgroup"); 0 leaves the runtime's own (GOMEMLIMIT from the
// environment, or none).
func softMemoryLimit(flag string, env bool, cgroup int64) (int64, string, error) {
	switch {
	case flag != "":
		q, err := resource.ParseQuantity(flag)
		if err != nil {
			return 0, "", fmt.Errorf("--memory-limit %q: %w", flag, err)
		}
		if q.Sign() <= 0 {
			return 0, "", fmt.Errorf("--memory-limit %q: must be more than 0", flag)
		}
		return q.Value(), "flag", nil
	case env || cgroup <= 0:
		return 0, "", nil
	}
	return int64(float64(cgroup) * memoryLimitRatio), "cgroup", nil
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
