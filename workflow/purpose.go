package workflow

// Purpose says which command plans, and so which facts the plan is made
// with and which choices are made for it.
type Purpose int

const (
	// ForPlan is pipe plan: every fact but the torch probe, so that a
	// plan is shown without starting Python.
	ForPlan Purpose = iota
	// ForRun is pipe run: every fact; a GPU found by device auto is kept
	// only when the torch engine starts (else the CPU trains, with a
	// warning), and data parallelism defaults to every local GPU.
	ForRun
	// ForServe is pipe serve: the serving plan, with every fact but the
	// torch probe, which the engine's set-up makes (Workflow.Engine).
	ForServe
	// ForExport is pipe export: the plan only says which batchnorms fold
	// into their conv, the same on every device and for any data, so it
	// is made for the CPU without reading the data.
	ForExport
	// ForEditor is the language server, which plans on every edit: the
	// host is measured once a Workflow, and the data's facts come from a
	// cache filled in the background (editorfacts.go), so that no edit
	// waits on counting a large data set.
	ForEditor
)

// runs says the purpose runs the plan it makes, so that a run's choices
// are made on top of the planner's (decideRun): every local GPU, and a
// GPU only when the torch engine's Python starts.
func (p Purpose) runs() bool { return p == ForRun }

// device is the device the purpose plans for, whatever the file and the
// flags say; "" leaves the choice to them.
func (p Purpose) device() string {
	if p == ForExport {
		return "cpu"
	}
	return ""
}
