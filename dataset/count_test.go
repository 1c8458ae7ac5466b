package dataset

import (
	"os"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"strings"
	"testing"
)

// TestCountSamples: the cheap count agrees with what opening the source
// gives, for every kind that can be counted exactly.
func TestCountSamples(t *testing.T) {
	dir := t.TempDir()
	var csv strings.Builder
	csv.WriteString("a,b,y\n")
	for i := range 37 {
		csv.WriteString("1,2,")
		csv.WriteString([]string{"0", "1"}[i%2])
		csv.WriteString("\n")
	}
	csv.WriteString("\n\n") // trailing blank lines are no rows
	os.WriteFile(filepath.Join(dir, "t.csv"), []byte(csv.String()), 0o644)
	idx := datatest.WriteFile(t, dir, "l.idx.gz", gz(idxBytes([]int{11}, make([]byte, 11))))
	datatest.WriteFile(t, dir, "i.idx", idxBytes([]int{11, 2, 2}, make([]byte, 44)))
	_ = idx
	for _, src := range []string{
		"source syn synthetic { samples 300  shape [4]  classes 2 }",
		"source tab csv {\n  path \"t.csv\"\n  features [a, b]\n  label y\n  split 0.8 seed 2\n}",
		"source num idx {\n  images \"i.idx\"\n  labels \"l.idx.gz\"\n}",
	} {
		b := progtest.Source(t, src)
		name := b.Name
		ct, err := CountSamples(b, WithBase(dir))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := OpenSplit(b, WithBase(dir))
		if err != nil {
			t.Fatal(err)
		}
		if ct.All != sp.All.Len() || ct.Train != sp.Train.Len() || !ct.Exact {
			t.Errorf("%s: counted %+v, opened %d (train %d)", name, ct, sp.All.Len(), sp.Train.Len())
		}
		sp.All.Close()
	}
}
