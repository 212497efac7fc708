package main

import (
	"io"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"
)

func TestCPUQuota(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tt := range []struct {
		name  string
		fsys  fstest.MapFS
		cores float64
	}{
		{"v2, no limit", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("max 100000\n"),
		}, 0},
		{"v2, a container's limit at the mount's root", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("50000 100000\n"),
		}, 0.5},
		{"v2, the lowest of the own cgroup and those above", fstest.MapFS{
			"proc/self/cgroup":                        file("0::/kubepods/pod1/c1\n"),
			"sys/fs/cgroup/cpu.max":                   file("max 100000\n"),
			"sys/fs/cgroup/kubepods/pod1/cpu.max":     file("150000 100000\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/cpu.max":  file("max 100000\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/cpu.stat": file(""),
		}, 1.5},
		{"v1, no limit", fstest.MapFS{
			"proc/self/cgroup":                            file("4:memory:/\n3:cpu,cpuacct:/\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": file("100000\n"),
		}, 0},
		{"v1, a host path the container's mount does not show", fstest.MapFS{
			"proc/self/cgroup":                    file("3:cpu:/docker/abc\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("200000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 2},
		{"v2, a path outside the namespace's root: not under its limits", fstest.MapFS{
			"proc/self/cgroup":      file("0::/../../other\n"),
			"sys/fs/cgroup/cpu.max": file("25000 100000\n"),
			"sys/cpu.max":           file("1 100000\n"),
		}, 0},
		{"no cgroup file", fstest.MapFS{}, 0},
		{"garbage", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("lots\n"),
		}, 0},
	} {
		cores, ok := cpuQuota(tt.fsys)
		if cores != tt.cores || ok != (tt.cores > 0) {
			t.Errorf("%s: %v %v, want %v", tt.name, cores, ok, tt.cores)
		}
	}
}

// Under a CPU quota --busy-poll's default is off; a value given on the
// command line, in the environment or in the file is kept.
func TestBusyPollUnderAQuota(t *testing.T) {
	quota := fstest.MapFS{
		"proc/self/cgroup":      &fstest.MapFile{Data: []byte("0::/\n")},
		"sys/fs/cgroup/cpu.max": &fstest.MapFile{Data: []byte("50000 100000\n")},
	}
	none := fstest.MapFS{}
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, file, "busy-poll: 100us\n")
	for _, tt := range []struct {
		args []string
		env  map[string]string
		fsys fstest.MapFS
		want time.Duration
	}{
		{nil, nil, none, 200 * time.Microsecond},
		{nil, nil, quota, 0},
		{[]string{"--busy-poll", "200us"}, nil, quota, 200 * time.Microsecond},
		{nil, map[string]string{"SLUICE_BUSY_POLL": "50us"}, quota, 50 * time.Microsecond},
		{[]string{"--config", file}, nil, quota, 100 * time.Microsecond},
		{[]string{"--busy-poll", "0"}, nil, none, 0},
	} {
		o, err := parseFlags(tt.args, envOf(tt.env), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := busyPollUnder(o, tt.fsys); got != tt.want {
			t.Errorf("%v %v, quota %v: busy poll %v, want %v", tt.args, tt.env, len(tt.fsys) > 0, got, tt.want)
		}
	}
}
