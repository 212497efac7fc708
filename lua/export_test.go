package lua

// ThrottleSource is throttle.lua, for the tests that run it beside the
// previous version.
func ThrottleSource() string { return throttleSrc }
