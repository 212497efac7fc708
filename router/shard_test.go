package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sluice-rl/sluice/lua"
)

// Faults are counted by a bounded set of kinds, never by their messages.
func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), "timeout"},
		{errors.New("no reply within the timeout"), "timeout"},
		{&lua.Error{Msg: "CLUSTERDOWN The cluster is down"}, "clusterdown"},
		{&lua.Error{Msg: "ERR Script attempted to execute a write command while the cluster is down"}, "clusterdown"},
		{&lua.Error{Msg: "TRYAGAIN Multiple keys request during rehashing of slot"}, "tryagain"},
		{&lua.Error{Msg: "LOADING Redis is loading the dataset in memory"}, "loading"},
		{&lua.Error{Msg: "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."}, "busy"},
		{&lua.Error{Msg: "READONLY You can't write against a read only replica."}, "replica"},
		{&lua.Error{Msg: "ERR Script attempted to access a non local key in a cluster node"}, "redirect"},
		{errors.New("WRONGPASS invalid username-password pair or user is disabled."), "auth"},
		{errors.New("NOAUTH Authentication required."), "auth"},
		{io.EOF, "connection"},
		{errors.New("write tcp: broken pipe: connection reset by peer"), "connection"},
		{errors.New("something else"), "other"},
	} {
		if got := errorKind(tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
