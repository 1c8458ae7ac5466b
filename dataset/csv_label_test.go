package dataset

import (
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"strings"
	"testing"
)

// A numeric label column with one bad cell is a regression target with a
// mistake in it, not a class label with a class per distinct value.
func TestCSVNumericLabelWithBadCell(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "nan.csv", []byte("dose,response\n1,0.5\n2,NaN\n3,1.5\n"))
	datatest.WriteFile(t, dir, "word.csv", []byte("dose,response\n1,0.5\n2,1.0\n3,n/a\n"))
	datatest.WriteFile(t, dir, "empty.csv", []byte("dose,response\n1,0.5\n2,\n3,1.5\n"))
	cases := []struct{ file, want string }{
		{"nan.csv", `nan.csv: row 3, column 'response': "NaN" is not a number, though 2 of its 3 rows hold numbers; fix the cell, or list 'response' in categorical`},
		{"word.csv", `word.csv: row 4, column 'response': "n/a" is not a number`},
		{"empty.csv", `empty.csv: row 3, column 'response': the cell is empty`},
	}
	for _, c := range cases {
		_, err := Open(progtest.Source(t, `source x csv { path "`+c.file+`"  label response }`), WithBase(dir))
		datatest.WantErr(t, err, c.want)
	}
	// Listed as categorical, the same column is a class label.
	ds, err := Open(progtest.Source(t, `source x csv { path "word.csv"  label response  categorical [response] }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Classes() != 3 {
		t.Fatalf("Classes %d, want 3", ds.Classes())
	}
}

// Values beyond float32's range would train as infinities: they are
// refused at their cell, in the label as in a feature.
func TestCSVValuesBeyondFloat32(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "label.csv", []byte("dose,response\n1,0.5\n2,1e39\n3,1.5\n"))
	datatest.WriteFile(t, dir, "feature.csv", []byte("dose,response\n1,0.5\n-1e300,1\n3,1.5\n"))
	datatest.WantErr(t, openErr(t, dir, "label.csv"), `label.csv: row 3, column 'response': 1e39 is too large: models train in float32`)
	err := openErr(t, dir, "feature.csv")
	datatest.WantErr(t, err, `feature.csv: row 3, column 'dose': -1e300 is too large`)
	if strings.Contains(err.Error(), "categorical") {
		t.Errorf("a number too large is not a category: %v", err)
	}
}

func openErr(t *testing.T, dir, file string) error {
	t.Helper()
	_, err := Open(progtest.Source(t, `source x csv { path "`+file+`"  label response }`), WithBase(dir))
	return err
}
