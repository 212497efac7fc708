package router

import (
	"testing"

	"github.com/sluice-rl/sluice/lua"
)

func TestIsInternal(t *testing.T) {
	sub := (&lua.Split{Tags: []string{"a"}, Gen: "g1"}).SubKey(0, "user")
	for key, want := range map[string]bool{
		KeyPrefix + "user":  true,
		KeyPrefix:           true,
		sub:                 true,
		instancesKey:        true,
		scriptsKey:          true,
		probePrefix + "{x}": true,
		"sluice":            false,
		"sluicex":           false,
		"user:sluice:1":     false,
		"Sluice:user":       false,
		"rate:{tag}:1":      false,
		"sluice_instances":  false,
		"":                  false,
	} {
		if got := IsInternal(key); got != want {
			t.Errorf("IsInternal(%q) = %v, want %v", key, got, want)
		}
	}
}
