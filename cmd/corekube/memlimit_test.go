package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestSoftMemoryLimit: --memory-limit wins over GOMEMLIMIT and the cgroup;
// GOMEMLIMIT (already applied by the runtime) over the cgroup; bad values
// are refused with the flag's name.
func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		flag       string
		env        bool
		cgroup     int64
		want       int64
		wantSource string
		wantErr    string
	}{
		{flag: "1536Mi", env: true, cgroup: 4 << 30, want: 1536 << 20, wantSource: "flag"},
		{flag: "2G", want: 2e9, wantSource: "flag"},
		{env: true, cgroup: 4 << 30},
		{cgroup: 1000 << 20, want: 900 << 20, wantSource: "cgroup"},
		{},
		{flag: "lots", wantErr: `--memory-limit "lots": quantities must match`},
		{flag: "0", wantErr: `--memory-limit "0": must be more than 0`},
		{flag: "-1Gi", wantErr: `--memory-limit "-1Gi": must be more than 0`},
	} {
		got, source, err := softMemoryLimit(tc.flag, tc.env, tc.cgroup)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("%+v: error %v, want %q", tc, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || source != tc.wantSource {
			t.Errorf("%+v: %d, %q, %v; want %d, %q", tc, got, source, err, tc.want, tc.wantSource)
		}
	}
}
