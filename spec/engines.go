package spec

import (
	"slices"
	"sync"
)

// engineNames holds the names of the engines linked into this program:
// the words the engine field and a plan's engine accept. It lives in this
// leaf so that stdlib's schema and the plan, which the engines import,
// read them without naming an engine (docs/design/engines.md).
var engineNames struct {
	sync.Mutex
	names []string
}

// RegisterEngine adds an engine's name; cost.Register calls it for each
// engine descriptor, from the engine's init. A name registered again is
// kept once. The function returned takes the name off again if this call
// added it, for tests.
func RegisterEngine(name string) (unregister func()) {
	engineNames.Lock()
	defer engineNames.Unlock()
	if slices.Contains(engineNames.names, name) {
		return func() {}
	}
	engineNames.names = append(engineNames.names, name)
	slices.Sort(engineNames.names)
	return func() {
		engineNames.Lock()
		defer engineNames.Unlock()
		engineNames.names = slices.DeleteFunc(engineNames.names, func(n string) bool { return n == name })
	}
}

// Engines returns the registered engines' names, sorted; empty in a
// program that links no engine.
func Engines() []string {
	engineNames.Lock()
	defer engineNames.Unlock()
	return slices.Clone(engineNames.names)
}
