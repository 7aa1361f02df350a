package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, root, name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2, own cgroup", map[string]string{"proc/self/cgroup": "0::/system.slice/corekube.service\n",
			"sys/fs/cgroup/system.slice/corekube.service/memory.max": "2147483648\n"}, 2 << 30},
		{"v2, unlimited", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"v2, in a container (namespaced root)", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824"}, 1 << 30},
		{"v1", map[string]string{"proc/self/cgroup": "12:memory:/docker/abc\n3:cpu:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n"}, 512 << 20},
		{"v1, unlimited", map[string]string{"proc/self/cgroup": "12:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"nothing", map[string]string{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				write(t, root, name, content)
			}
			if got, from := cgroupMemoryLimit(root); got != tc.want {
				t.Fatalf("limit %d (from %q), want %d", got, from, tc.want)
			}
		})
	}
}
