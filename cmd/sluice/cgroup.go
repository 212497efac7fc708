package main

import (
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// busyPollUnder is the busy polling o asks for on the root file system
// fsys, and the CPU quota found there: --busy-poll's default is 0 under a
// quota, a value given anywhere is kept.
func busyPollUnder(o options, fsys fs.FS) (time.Duration, float64) {
	cores, ok := cpuQuota(fsys)
	if ok && !o.busyPollSet {
		return 0, cores
	}
	return o.busyPoll, cores
}

// cpuQuota is the CPU bandwidth limit (cores) of the cgroups this process
// runs in, as a container's CPU limit sets it; ok is false when none is
// set or none can be read. fsys is the root file system.
//
// Why: busy polling spends CPU that would otherwise be idle, but under a
// quota idle CPU is not free: it is the quota, and a process past it is
// stopped until the next period (100 ms by default). So a quota turns the
// default off (busyPollUnder).
//
// Both hierarchies are read: v2's cpu.max and v1's cpu.cfs_quota_us, in
// the process's own cgroup and each one above it (the lowest limit binds),
// as far as the mounted tree shows them. In a container the tree is
// usually the container's own, its cgroup at the mount's root.
func cpuQuota(fsys fs.FS) (cores float64, ok bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controllers:path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			eachLevel(fsys, "sys/fs/cgroup", f[2], func(dir string) {
				if q, ok := quotaV2(fsys, dir); ok && (cores == 0 || q < cores) {
					cores = q
				}
			})
		case hasController(f[1], "cpu"):
			for _, mount := range []string{"sys/fs/cgroup/" + f[1], "sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct"} {
				eachLevel(fsys, mount, f[2], func(dir string) {
					if q, ok := quotaV1(fsys, dir); ok && (cores == 0 || q < cores) {
						cores = q
					}
				})
			}
		}
	}
	return cores, cores > 0
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// eachLevel calls f for mount/p and for each directory above it up to
// mount, those that exist. A path the mount does not show (a v1 cgroup of
// the host's, seen from a container) leaves the mount's root. One outside
// the mount (a cgroup namespace's "/..": a process that entered the
// namespace but not its cgroup) is not under the mount's limits, so
// nothing is read, as Go's runtime reads nothing for it.
func eachLevel(fsys fs.FS, mount, p string, f func(dir string)) {
	dir := path.Join(mount, p)
	if dir != mount && !strings.HasPrefix(dir, mount+"/") {
		return
	}
	for ; ; dir = path.Dir(dir) {
		if st, err := fs.Stat(fsys, dir); err == nil && st.IsDir() {
			f(dir)
		}
		if dir == mount {
			return
		}
	}
}

// quotaV2 reads cpu.max: "max 100000" (no limit) or "<quota> <period>".
func quotaV2(fsys fs.FS, dir string) (float64, bool) {
	b, err := fs.ReadFile(fsys, dir+"/cpu.max")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	return ratio(f[0], f[1])
}

// quotaV1 reads cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us.
func quotaV1(fsys fs.FS, dir string) (float64, bool) {
	q, err1 := fs.ReadFile(fsys, dir+"/cpu.cfs_quota_us")
	p, err2 := fs.ReadFile(fsys, dir+"/cpu.cfs_period_us")
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func ratio(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}
