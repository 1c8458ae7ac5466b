package torch

import (
	"fmt"
	"os"
	"path/filepath"
)

// TorchScript is what a torch-engine model is asked to save as a
// TorchScript file (Model.TorchScript).
type TorchScript struct {
	// Path is the file written; it appears whole or not at all.
	Path string
	// Extra are the file's extra files, by name (torch.jit.save's
	// _extra_files): pipe's metadata.
	Extra map[string]string
	// TargetMean and TargetStd, when set, restore the output to the
	// target's units (y·std + mean, per output channel or one for all).
	TargetMean, TargetStd []float64
}

// TorchScriptResult is how the file was made: Method is "trace" (traced
// in evaluation mode and checked on a second input) or "script"; Nodes
// counts the saved graph's nodes; Torch is the torch that wrote it.
type TorchScriptResult struct {
	Method string
	Nodes  int
	Torch  string
}

// TorchScripter is a model that saves itself as TorchScript: the torch
// engine's. An op that torch cannot trace or script comes back as an
// error wrapping engine.ErrUnsupported that names the node, its op and
// the reason.
type TorchScripter interface {
	TorchScript(TorchScript) (TorchScriptResult, error)
}

var _ TorchScripter = (*model)(nil)

// TorchScript implements TorchScripter on rank 0's model: the worker
// writes a temporary file beside ts.Path, renamed to it once saved.
func (m *model) TorchScript(ts TorchScript) (TorchScriptResult, error) {
	if err := m.usable(); err != nil {
		return TorchScriptResult{}, err
	}
	if err := m.drainAll(); err != nil {
		return TorchScriptResult{}, err
	}
	abs, err := filepath.Abs(ts.Path)
	if err != nil {
		return TorchScriptResult{}, err
	}
	f, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*.tmp")
	if err != nil {
		return TorchScriptResult{}, err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	r, err := m.callK(0, torchscriptRequest{Path: tmp, Extra: ts.Extra, TargetMean: ts.TargetMean, TargetStd: ts.TargetStd})
	if err != nil {
		return TorchScriptResult{}, err
	}
	rep, err := decodeReply[torchscriptReply](r)
	if err != nil {
		return TorchScriptResult{}, fmt.Errorf("torch worker: the torchscript reply: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return TorchScriptResult{}, err
	}
	if err := os.Rename(tmp, abs); err != nil {
		return TorchScriptResult{}, err
	}
	return TorchScriptResult{Method: rep.Method, Nodes: rep.Nodes, Torch: rep.Torch}, nil
}
