package engine

import (
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"

	"pipe/planner/plan"
)

// Setup is how a run starts an engine beyond what its plan says: the
// interpreter of an engine that computes in a worker, where its log
// goes, and this process's place among several.
type Setup struct {
	// Python is the worker's interpreter (--python, else PIPE_PYTHON,
	// else python3).
	Python string
	// Log receives the engine's set-up and its workers' stderr.
	Log   hclog.Logger
	Place Place
}

// Place is this process's place in a data-parallel run (torchrun's
// names): NProcPerNode workers a machine (0 or 1: one), NNodes machines
// (0 or 1: this one), NodeRank this machine's among them, MasterAddr and
// MasterPort where rank 0 meets the others; LocalRank is this process's
// first device on its machine under a launcher that starts one process
// a device, and AgentStore says the launcher's agent holds the
// rendezvous store.
type Place struct {
	NProcPerNode, NNodes, NodeRank int
	MasterAddr                     string
	MasterPort                     int
	LocalRank                      int
	AgentStore                     bool
}

// Runtime is what an engine's worker says of itself before a run: the
// interpreter it resolved to, its library's version, and the GPUs it can
// use.
type Runtime struct {
	Executable string
	Version    string
	GPU        bool
	GPUs       int
}

// Registration is how an engine makes itself available to a run, from
// its package's init (as it registers its cost model): its name as plans
// spell it, how it starts, and, for an engine that computes in a worker,
// how its worker is asked what it has before any data is read.
type Registration struct {
	Name string
	New  func(Setup) Backend
	// Probe, when set, starts the engine's worker with this interpreter
	// and returns what it says, or why it cannot start.
	Probe func(python string) (Runtime, error)
	// Version, when set, says the engine's plans depend on its library's
	// version, which pipe plan may be given (--NAME-version) instead of
	// asking a worker.
	Version *VersionFlag
	// SharedMemory, when set, is what one rank's workers take in
	// /dev/shm running p, which a pod must be given.
	SharedMemory func(p *plan.Plan) int64
}

// VersionFlag is an engine's version flag: its help, and what is wrong
// with a value (nil: nothing).
type VersionFlag struct {
	Usage string
	Check func(v string) error
}

// PythonFor is the interpreter an engine's workers run with: flag (the
// command's --python), else $PIPE_PYTHON, else python3.
func PythonFor(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if getenv != nil {
		if v := getenv("PIPE_PYTHON"); v != "" {
			return v
		}
	}
	return "python3"
}

var backends = struct {
	sync.Mutex
	byName map[string]Registration
}{byName: map[string]Registration{}}

// Register adds an engine's registration. A second one of the same name
// is a programming error, and panics at start-up.
func Register(r Registration) {
	backends.Lock()
	defer backends.Unlock()
	if _, ok := backends.byName[r.Name]; ok {
		panic(fmt.Sprintf("engine: %q registered twice", r.Name))
	}
	backends.byName[r.Name] = r
}

// Registered returns the registered engines, by name.
func Registered() []Registration {
	backends.Lock()
	defer backends.Unlock()
	out := make([]Registration, 0, len(backends.byName))
	for _, r := range backends.byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the registration of the engine named name.
func Lookup(name string) (Registration, bool) {
	backends.Lock()
	defer backends.Unlock()
	r, ok := backends.byName[name]
	return r, ok
}
