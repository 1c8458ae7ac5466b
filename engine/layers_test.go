package engine_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestEnginesAreSiblings keeps the engines siblings under the contract:
// neither imports the other, nor the run loop, the orchestration or the
// command line, and the contract imports no engine. The run loop imports
// no engine either: it is given a Backend.
func TestEnginesAreSiblings(t *testing.T) {
	banned := map[string][]string{
		"pipe/engine":         {"pipe/engine/native", "pipe/engine/torch", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/native":  {"pipe/engine/torch", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/torch":   {"pipe/engine/native", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/weights": {"pipe/engine/native", "pipe/engine/torch", "pipe/run"},
		"pipe/run":            {"pipe/engine/native", "pipe/engine/torch", "pipe/workflow", "pipe/cmd"},
	}
	for pkg, bad := range banned {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, b := range bad {
			if slices.Contains(deps, b) {
				t.Errorf("%s depends on %s", pkg, b)
			}
		}
	}
}

// TestEnginesLinkNoReaders: the contract and the engines take their
// batches from pipe/dataset/samples, not from the data readers, so that
// they build and link without GDAL (cgo), the object store's client or
// the image codecs.
func TestEnginesLinkNoReaders(t *testing.T) {
	banned := []string{"pipe/dataset", "github.com/airbusgeo/godal", "github.com/minio/minio-go/v7", "image/png", "image/jpeg", "golang.org/x/image/tiff"}
	for _, pkg := range []string{"pipe/engine", "pipe/engine/native", "pipe/engine/torch"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, b := range banned {
			if slices.Contains(deps, b) {
				t.Errorf("%s links %s", pkg, b)
			}
		}
	}
}
