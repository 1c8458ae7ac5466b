package workflow

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"pipe/planner"
	"pipe/spec"
)

// The language server plans on every edit, and counting a large data set
// can take seconds, so its data facts come from a cache: the first plan of
// a set of sources starts their count in the background and waits for it
// a moment (editorWait); plans after it have the facts pipe plan has. An
// entry is keyed by the sources as decoded and the files' sizes and
// modification times, so an edit of a source or a changed file counts
// afresh; the cache keeps the newest editorEntries.
const (
	editorWait    = 250 * time.Millisecond
	editorEntries = 8
)

type factCache struct {
	mu      sync.Mutex
	entries map[string]*factEntry
	order   []string // keys, oldest first
}

type factEntry struct {
	ready chan struct{}
	opts  []planner.Option
}

// editorFacts are the data's facts for prog from the Workflow's cache;
// nil while they are being gathered.
func (w *Workflow) editorFacts(prog *spec.Program) []planner.Option {
	key := factKey(prog)
	c := &w.facts
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		if c.entries == nil {
			c.entries = map[string]*factEntry{}
		}
		e = &factEntry{ready: make(chan struct{})}
		c.entries[key] = e
		c.order = append(c.order, key)
		if len(c.order) > editorEntries {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
		go func() {
			e.opts, _ = dataOptions(prog, nil)
			close(e.ready)
		}()
	}
	c.mu.Unlock()
	t := time.NewTimer(editorWait)
	defer t.Stop()
	select {
	case <-e.ready:
		return e.opts
	case <-t.C:
		return nil
	}
}

// factKey identifies what the data's facts depend on: the sources, the
// file's seed and which sources evaluate and predict read, and the size
// and time of every file and folder they name (for a folder, its entries'
// too: an images source's class folders).
func factKey(prog *spec.Program) string {
	type sources struct {
		Seed     *int64
		Train    string
		Evaluate string
		Predict  *string
		Sources  []spec.Source
	}
	k := sources{Seed: prog.Seed}
	if t := prog.TrainSource(); t != nil {
		k.Train = t.Name
	}
	if prog.Evaluate != nil {
		k.Evaluate = prog.Evaluate.Source
	}
	if prog.Predict != nil {
		k.Predict = &prog.Predict.Source
	}
	var b strings.Builder
	for _, s := range prog.Sources {
		c := *s
		c.At = spec.Where{}
		k.Sources = append(k.Sources, c)
		for _, p := range s.Paths() {
			stamp(&b, p)
		}
	}
	j, _ := json.Marshal(k)
	return string(j) + b.String()
}

// stamp writes path's size and modification time, and for a folder its
// entries', to b.
func stamp(b *strings.Builder, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(b, "|%s:-", path)
		return
	}
	fmt.Fprintf(b, "|%s:%d:%d", path, fi.Size(), fi.ModTime().UnixNano())
	if !fi.IsDir() {
		return
	}
	des, _ := os.ReadDir(path)
	for _, de := range des {
		if fi, err := de.Info(); err == nil {
			fmt.Fprintf(b, "|%s:%d:%d", filepath.Join(path, de.Name()), fi.Size(), fi.ModTime().UnixNano())
		}
	}
}
