package folder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// SettingsFile is the file in a run's folder that records what the run
// was started with besides its file (Settings), so that a --resume
// reproduces the run rather than whatever its command line now says.
// Reasons: docs/design/run-identity.md.
const SettingsFile = "settings.json"

// Settings are a run's --set overrides, in the order given, and the
// flags that shaped what it trains, by name without dashes, as given
// (batch, device, engine, nnodes, nproc-per-node, plan, threads). The
// caller decides which flags those are; the folder only keeps them.
type Settings struct {
	Overrides []string          `json:"overrides,omitempty"`
	Flags     map[string]string `json:"flags,omitempty"`
}

// Equal reports whether s and o record the same overrides and flags.
func (s *Settings) Equal(o *Settings) bool {
	return slices.Equal(s.Overrides, o.Overrides) && len(s.Flags) == len(o.Flags) && func() bool {
		for k, v := range s.Flags {
			if w, ok := o.Flags[k]; !ok || w != v {
				return false
			}
		}
		return true
	}()
}

// ReadSettings is the Settings dir's SettingsFile records; nil and no
// error when it has none (a run of an older pipe, or a fresh folder).
func ReadSettings(dir string) (*Settings, error) {
	path := filepath.Join(dir, SettingsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Settings
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// RecordSettings writes s into dir's SettingsFile, atomically, unless
// the folder records them already.
func RecordSettings(dir string, s *Settings) error {
	if had, err := ReadSettings(dir); err == nil && had != nil && had.Equal(s) {
		return nil
	}
	return WriteFileAtomic(filepath.Join(dir, SettingsFile), func(w io.Writer) error {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	})
}
