package proxy_test

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router"
)

// INFO cpu gives the process's CPU time as Redis's does, which make
// bench reads to set sluice's cost per decision beside the nodes'.
func TestInfoCPU(t *testing.T) {
	conn, err := net.Dial("tcp", serve(t, router.NewMemory(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	v, ok := roundTrip(t, conn, r, "INFO", "cpu").(string)
	if !ok {
		t.Fatalf("INFO cpu answered %v", v)
	}
	var total float64
	for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		_, rest, found := strings.Cut(v, "\r\n"+field)
		if !found {
			t.Fatalf("INFO cpu without %s: %q", field, v)
		}
		line, _, _ := strings.Cut(rest, "\r\n")
		f, err := strconv.ParseFloat(line, 64)
		if err != nil || f < 0 {
			t.Fatalf("%s%q", field, line)
		}
		total += f
	}
	if total == 0 {
		t.Fatalf("INFO cpu says the process has used no CPU: %q", v)
	}
}
