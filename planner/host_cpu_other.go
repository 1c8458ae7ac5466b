//go:build !linux || !amd64

package planner

// osTiles is false but on Linux on x86-64: the torch engine's CPU plan
// prices AMX only where it knows the OS gives a process the tiles.
func osTiles() bool { return false }
