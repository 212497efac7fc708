package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// redis-py's info() reads a value with ',' and '=' as fields, each item
// split at its last '=' (parse_info's get_value): a caller's key or a
// node's error holding '=' must not rename or hide a field (a rate-limit
// key such as "ip=10.0.0.1" made hot gave {'key=ip': '10.0.0.1', ...} and
// no 'key').
func TestInfoFieldsSurviveEqualsSigns(t *testing.T) {
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	st := &router.ClusterStats{
		Shards:  []router.ShardStats{{Addr: "127.0.0.1:7001", Since: since, Errors: 1, LastError: "ERR a=b"}},
		HotKeys: 1,
		Hot:     []router.HotKeyStats{{Key: "ip=10.0.0.1", State: "detected", SubBuckets: 3}},
	}
	var b strings.Builder
	writeStats(&b, router.Stats{Cluster: st})
	want := map[string]string{
		"shard0": "addr state since errors last_error",
		"hot0":   "key state split rate split_ms_left held",
	}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		w, ok := want[name]
		if !ok {
			continue
		}
		var fields []string
		for _, item := range strings.Split(value, ",") {
			fields = append(fields, item[:strings.LastIndex(item, "=")])
		}
		if got := strings.Join(fields, " "); got != w {
			t.Errorf("%s: redis-py reads fields %q, want %q (line %q)", name, got, w, line)
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Fatalf("lines missing: %v in %q", want, b.String())
	}
}
