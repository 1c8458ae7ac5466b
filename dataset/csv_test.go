package dataset

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pipe/dataset/internal/datatest"
	"pipe/dataset/source"
	"pipe/internal/progtest"
)

const assays = `dose,weight,site,response
1,50,b,0.5
2,60,a,1.5
3,70,c,2.5
4,80,b,3.5
5,90,a,4.5
6,100,b,5.5
7,110,c,6.5
8,120,a,7.5
9,130,b,8.5
10,140,c,9.5
`

func TestCSV(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "data/assays.csv", []byte(assays))
	b := progtest.Source(t, `source a csv { path "data/assays.csv"  features [dose, site, weight]  categorical [site]  label response  split 0.8 seed 3 }`)
	ds, err := Open(b, WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	// dose, then site one-hot (a, b, c), then weight: XShape grows by 2.
	if got := ds.XShape(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("XShape %v, want [5]", got)
	}
	if got := ds.(Tabular).Columns(); !slices.Equal(got, []string{"dose", "site=a", "site=b", "site=c", "weight"}) {
		t.Fatalf("Columns %v", got)
	}
	if ds.Classes() != 0 || len(ds.YShape()) != 1 {
		t.Fatalf("Classes %d YShape %v: response is a regression target", ds.Classes(), ds.YShape())
	}
	// Statistics come from the training rows only.
	train, val := source.SplitIndices(10, 0.8, 3)
	if len(train) != 8 || len(val) != 2 {
		t.Fatalf("split %v %v", train, val)
	}
	var s, ss float64
	for _, i := range train {
		s += float64(i + 1)
	}
	mean := s / 8
	for _, i := range train {
		ss += (float64(i+1) - mean) * (float64(i+1) - mean)
	}
	std := math.Sqrt(ss / 8)
	nm := ds.(Normalized).Norm()
	if !near(nm.Mean[0], mean, 1e-12) || !near(nm.Std[0], std, 1e-12) {
		t.Fatalf("dose norm %v %v, want %v %v (train rows only)", nm.Mean[0], nm.Std[0], mean, std)
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	for i := range xs {
		if want := float32((float64(i+1) - mean) / std); math.Abs(float64(xs[i][0]-want)) > 1e-6 {
			t.Fatalf("row %d dose %v, want %v", i, xs[i][0], want)
		}
		site := strings.Split(strings.Split(assays, "\n")[i+1], ",")[2]
		hot := map[string]int{"a": 1, "b": 2, "c": 3}[site]
		for j := 1; j <= 3; j++ {
			if want := b2f(j == hot); xs[i][j] != want {
				t.Fatalf("row %d one-hot %v for site %s", i, xs[i][1:4], site)
			}
		}
		if ys[i][0] != float32(i)+0.5 {
			t.Fatalf("row %d response %v", i, ys[i][0])
		}
	}
	sp, err := OpenSplit(b, WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if sp.Train.Len() != 8 || sp.Val.Len() != 2 {
		t.Fatalf("split %d/%d", sp.Train.Len(), sp.Val.Len())
	}
}

func TestCSVClassLabel(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "x.tsv", []byte("a;b;kind\n1;2;dog\n3;4;cat\n5;6;dog\n7;8;eel\n"))
	ds, err := Open(progtest.Source(t, `source x csv { path "x.tsv"  delimiter ";"  label kind  normalize none }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Classes() != 3 || len(ds.YShape()) != 0 {
		t.Fatalf("Classes %d YShape %v", ds.Classes(), ds.YShape())
	}
	if got := ds.(ClassNamer).ClassNames(); !slices.Equal(got, []string{"cat", "dog", "eel"}) {
		t.Fatalf("ClassNames %v", got)
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	if fmt.Sprint(xs[1], ys[1]) != "[3 4] [0]" || ys[3][0] != 2 {
		t.Fatalf("rows %v %v", xs, ys)
	}
}

func TestCSVNoHeader(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "x.csv", []byte("1,10,0\n2,20,1\n"))
	ds, err := Open(progtest.Source(t, `source x csv { path "x.csv"  header false  label c3  categorical [c3]  normalize scale }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	if fmt.Sprint(xs, ys) != "[[0 0] [1 1]] [[0] [1]]" || ds.Classes() != 2 {
		t.Fatalf("got %v %v classes %d", xs, ys, ds.Classes())
	}
}

func TestCSVErrors(t *testing.T) {
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(assays), "\n")
	bad := slices.Clone(lines)
	bad[3] = "abc,70,c,2.5"
	datatest.WriteFile(t, dir, "data/x.csv", []byte(strings.Join(bad, "\n")))
	ragged := slices.Clone(lines)
	ragged[5] = "5,90,a"
	datatest.WriteFile(t, dir, "ragged.csv", []byte(strings.Join(ragged, "\n")))
	empty := slices.Clone(lines)
	empty[2] = "2,,a,1.5"
	datatest.WriteFile(t, dir, "empty.csv", []byte(strings.Join(empty, "\n")))
	datatest.WriteFile(t, dir, "quote.csv", []byte("dose,response\n1,\"2\n"))
	cases := []struct{ src, want string }{
		{`path "data/x.csv"  features [dose, weight]  label response`, `data/x.csv: row 4, column 'dose': "abc" is not a number`},
		{`path "ragged.csv"  label response`, `ragged.csv: row 6 has 3 columns but the header has 4`},
		{`path "empty.csv"  categorical [site]  label response`, `empty.csv: row 3, column 'weight': the cell is empty`},
		{`path "empty.csv"  label resp`, `empty.csv: no column 'resp' (the columns are dose, weight, site, response)`},
		{`path "data/x.csv"  features [dose, weight]  categorical [site]  label response`, `categorical column 'site' is not among the features`},
		{`path "data/x.csv"  label response`, `data/x.csv: row 2, column 'site': "b" is not a number; list 'site' in categorical`},
		{`path "missing.csv"  label response`, `missing.csv: file not found`},
		{`path "quote.csv"  label response`, `quote.csv: row 2`},
	}
	for _, c := range cases {
		_, err := Open(progtest.Source(t, `source x csv { `+c.src+` }`), WithBase(dir))
		datatest.WantErr(t, err, c.want)
	}
}
