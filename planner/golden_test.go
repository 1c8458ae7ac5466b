package planner

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/engine/costs"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner/plan"
	"pipe/stdlib"
)

var update = flag.Bool("update", false, "rewrite the golden plans that changed")

// testCosts gives every plan of these tests the engines' cost models, as
// the planner's callers do.
var testCosts = WithCosts(costs.Engines()...)

// testHost is the fixed machine of every golden plan: 24 GiB and 2 cores,
// no GPU, per-core rates assumed.
var testHost = HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}

// goldenDevices are the devices every example is planned for.
var goldenDevices = []string{"cpu", "a100-80gb"}

// load parses, checks and decodes a file, naming it as display.
func load(t testing.TB, path, display string) (*stdlib.Program, []byte) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return check(t, display, src), src
}

// check parses, checks and decodes src as the planner's callers do.
func check(t testing.TB, name string, src []byte) *stdlib.Program {
	t.Helper()
	f, ds := lang.Parse(name, src)
	p, cds := lang.Check(f, stdlib.Schema())
	ds = append(ds, cds...)
	if ds.HasErrors() {
		t.Fatalf("%s does not check:\n%v", name, ds)
	}
	return progtest.Decoded(t, p)
}

func examples(t testing.TB) []string {
	paths, _ := filepath.Glob("../examples/*.pipe")
	if len(paths) < 6 {
		t.Fatalf("found %d examples", len(paths))
	}
	return paths
}

// TestGoldenPlans plans every example on the fixed CPU and on an A100 80GB
// and compares the JSON with testdata/NAME.DEVICE.plan.json; -update
// rewrites the files that differ, and only those. The CPU plans are a cgo
// build's: without cgo the native engine has no Winograd kernels, and its
// cost model prices im2col's scratch instead.
func TestGoldenPlans(t *testing.T) {
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		prog, src := load(t, path, "examples/"+name+".pipe")
		for _, dev := range goldenDevices {
			t.Run(name+"/"+dev, func(t *testing.T) {
				p, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice(dev), WithSource(src))
				if ds.HasErrors() || p == nil {
					t.Fatalf("plan failed:\n%v", ds)
				}
				if !p.Fits {
					t.Errorf("the example does not fit on %s", dev)
				}
				got, err := p.MarshalIndent()
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", name+"."+dev+".plan.json")
				want, err := os.ReadFile(golden)
				if bytes.Equal(got, want) {
					return
				}
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					t.Logf("rewrote %s", golden)
					return
				}
				if err != nil {
					t.Fatalf("%v (run go test ./planner -update to create it)", err)
				}
				t.Errorf("%s differs from the plan (run go test ./planner -update and review the diff):\n%s", golden, firstDiff(want, got))
			})
		}
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  golden: " + x + "\n  plan:   " + y
		}
	}
	return ""
}

// TestGoldenPlansLoad reads every golden file back and verifies it against
// its example: what pipe plan --out writes, pipe run will accept.
func TestGoldenPlansLoad(t *testing.T) {
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dev := range goldenDevices {
			p, err := Load(filepath.Join("testdata", name+"."+dev+".plan.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(src); err != nil {
				t.Errorf("%s on %s: %v", name, dev, err)
			}
			if p.Device.Name != dev || p.Version != plan.Version {
				t.Errorf("%s: device %q version %d", name, p.Device.Name, p.Version)
			}
		}
	}
}

// diagAt reports whether ds holds a diagnostic with the code on the line.
func diagAt(ds diag.Diagnostics, code string, line int) bool {
	for _, d := range ds {
		if d.Code == code && (line == 0 || d.Subject != nil && d.Subject.Start.Line == line) {
			return true
		}
	}
	return false
}

// TestImports keeps the planner and the cost contract the engines
// implement free of the executor and its libraries, and package plan free
// of everything but the standard library and the specs it carries.
func TestImports(t *testing.T) {
	for _, pkg := range []string{"pipe/planner", "pipe/planner/cost"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"gorgonia", "godal", "netlib", "pipe/engine", "pipe/run", "pipe/dataset", "pipe/export", "pipe/workflow", "pipe/cmd"} {
				if strings.Contains(dep, banned) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "pipe/planner/plan").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		// The plan carries the typed source specs, which speak diagnostics.
		if dep != "pipe/planner/plan" && dep != "pipe/spec" && dep != "pipe/diag" {
			t.Errorf("package plan depends on %s", dep)
		}
	}
}
