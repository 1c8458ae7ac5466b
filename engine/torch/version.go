package torch

import (
	"fmt"
	"regexp"
)

// AssumedGPUTorch is the torch a GPU plan is priced for when its worker's
// is not known (pipe plan starts no Python) and --torch-version is not
// given: the GPU machines' PyTorch, which make gpu-smoke ran on the H100.
// The attention path, torch.compile (Inductor's autotuning buffer) and the
// fused optimizers depend on it; the plan names it (plan.Engine.Torch).
const AssumedGPUTorch = "2.11"

// gpuTorch is the torch version a GPU plan's terms are priced for, and
// whether it was assumed: ver itself when known, else AssumedGPUTorch.
func gpuTorch(ver string) (string, bool) {
	if ver == "" {
		return AssumedGPUTorch, true
	}
	return ver, false
}

// versionForm is a torch version as torch.__version__ writes it:
// "2.11", "1.13.1", "2.11.0+cu130", "1.13.0a0".
var versionForm = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?([a-z]+[0-9]*)?(\+[A-Za-z0-9.]+)?$`)

// CheckVersion says what is wrong with v as a torch version to plan for
// (pipe plan --torch-version), nil when nothing: it must read as
// torch.__version__ does, and be one pipe's worker accepts (MinTorch).
func CheckVersion(v string) error {
	if !versionForm.MatchString(v) {
		return fmt.Errorf("%q is not a torch version (MAJOR.MINOR[.PATCH], as torch.__version__ writes it: 2.11, 1.13.1, 2.11.0+cu130)", v)
	}
	if !versionAtLeast(v, MinTorch) {
		return fmt.Errorf("torch %s: pipe's worker needs %d.%d or later", v, MinTorch[0], MinTorch[1])
	}
	return nil
}

// fusedIn says whether torch ver has the fused kernel of optimizer kind
// on CUDA, which the worker asks for and falls back from
// (pipe_torch/net.py, make_optimizer): Adam's fused argument from 1.13,
// AdamW's from 2.0, SGD's from 2.3.
func fusedIn(kind, ver string) bool {
	switch kind {
	case "adam":
		return versionAtLeast(ver, [3]int{1, 13, 0})
	case "adamw":
		return versionAtLeast(ver, [3]int{2, 0, 0})
	case "sgd":
		return versionAtLeast(ver, [3]int{2, 3, 0})
	}
	return false
}
