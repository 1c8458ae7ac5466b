package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"pipe/run/folder"
)

// MarshalJSON writes a trial with each metric that is not a number
// (an epoch a trial measured nothing at, or NaN) as null: JSON has no
// NaN, and a sweep.json that cannot be written loses the sweep.
func (t Trial) MarshalJSON() ([]byte, error) {
	type plain Trial
	ms := make([]*float64, len(t.Metrics))
	for i, v := range t.Metrics {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ms[i] = &v
		}
	}
	return json.Marshal(struct {
		plain
		Metrics []*float64 `json:"metrics"`
	}{plain(t), ms})
}

// UnmarshalJSON reads what MarshalJSON writes: null is NaN.
func (t *Trial) UnmarshalJSON(b []byte) error {
	type plain Trial
	var w struct {
		*plain
		Metrics []*float64 `json:"metrics"`
	}
	w.plain = (*plain)(t)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t.Metrics = make([]float64, len(w.Metrics))
	for i, m := range w.Metrics {
		t.Metrics[i] = math.NaN()
		if m != nil {
			t.Metrics[i] = *m
		}
	}
	return nil
}

// Load reads a sweep.json and checks it (Validate): a file edited by
// hand or written by another version is refused with the reason, not
// run.
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, t := range s.Runs {
		if t == nil {
			return nil, fmt.Errorf("%s: trial %d is null", path, i+1)
		}
	}
	s.Best = 0 // derived; an older pipe ranked stopped trials too
	if b := s.BestTrial(); b != nil {
		s.Best = b.ID
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// Save writes s to path atomically (a temporary file renamed over it),
// so that a sweep killed while saving leaves the state before.
func Save(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return folder.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// Validate checks what the sweep relies on: trials numbered 1, 2, …
// with one value per parameter, known statuses, a completed or stopped
// trial with its metric, a reason for each skip, stop and failure, Best
// the best completed trial, and Done only when every trial is finished.
func (s *State) Validate() error {
	if s.Goal != "min" && s.Goal != "max" {
		return fmt.Errorf("goal %q: want min or max", s.Goal)
	}
	if len(s.Runs) > s.Trials {
		return fmt.Errorf("%d trials recorded, %d asked for", len(s.Runs), s.Trials)
	}
	for i, t := range s.Runs {
		if t == nil {
			return fmt.Errorf("trial %d is null", i+1)
		}
		if t.ID != i+1 {
			return fmt.Errorf("trial %d is numbered %d", i+1, t.ID)
		}
		if len(t.Values) != len(s.Params) {
			return fmt.Errorf("trial %d has %d values for %d parameters", t.ID, len(t.Values), len(s.Params))
		}
		v, ok := t.Last()
		measured := ok && !math.IsNaN(v)
		switch t.Status {
		case Pending, Running, Interrupted:
		case Done, Stopped:
			if !measured {
				return fmt.Errorf("trial %d is %s without a %s", t.ID, t.Status, s.Metric)
			}
			if t.Status == Stopped && t.Reason == "" {
				return fmt.Errorf("trial %d is stopped without a reason", t.ID)
			}
		case Skipped, Failed:
			if t.Reason == "" {
				return fmt.Errorf("trial %d is %s without a reason", t.ID, t.Status)
			}
		default:
			return fmt.Errorf("trial %d: unknown status %q", t.ID, t.Status)
		}
		if s.Done && !t.Finished() {
			return fmt.Errorf("the sweep is done but trial %d is %s", t.ID, t.Status)
		}
	}
	if s.Done && len(s.Runs) < s.Trials {
		return fmt.Errorf("the sweep is done with %d of %d trials", len(s.Runs), s.Trials)
	}
	want := 0
	if b := s.BestTrial(); b != nil {
		want = b.ID
	}
	if s.Best != want {
		return fmt.Errorf("best is trial %d; the best completed trial is %d", s.Best, want)
	}
	return nil
}
