package dataset

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"pipe/spec"
)

// A csv source is read whole into memory: its features in the block's
// order, a categorical feature one-hot in place, the label a class index
// or a regression value. normalize standard or scale is computed over the
// training part only and applied to every row. Errors name the file and
// the line. Details: docs/design/dataset-sources.md.

// SampleNamer is implemented by datasets whose samples are files: the
// images of an images source. Predictions name them.
type SampleNamer interface {
	// SampleName is sample i's file, as the source block's path names it.
	SampleName(i int) string
}

// LabelCounter is implemented by datasets of one class label a sample
// that hold their labels in memory: how many samples have each label, by
// class index. The executor shows the labels a model's output cannot
// score.
type LabelCounter interface {
	LabelCounts() []int
}

// ClassNamer is implemented by datasets whose class indices stand for
// names: the categories of a csv label, the class folders of images.
type ClassNamer interface {
	// ClassNames returns the name of each class index.
	ClassNames() []string
}

// Tabular is implemented by csv datasets.
type Tabular interface {
	// Columns names each input position: a feature's name, or
	// "feature=category" for a one-hot column.
	Columns() []string
}

type csvDataset struct {
	n, f       int
	x          []float32 // n × f, normalised
	y          []float32 // n, class index or value
	classes    int
	classNames []string
	columns    []string
	norm       Norm
}

func openCSV(b *spec.Source, c *config) (Dataset, error) {
	ds, err := readCSV(b, c)
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	return ds, nil
}

func readCSV(b *spec.Source, c *config) (*csvDataset, error) {
	p := b.CSV.Path
	delim := ','
	if s := b.CSV.Delimiter; s != "" {
		switch s {
		case `\t`, "tab":
			delim = '\t'
		default:
			r, size := utf8.DecodeRuneInString(s)
			if size != len(s) || r == '"' || r == '\r' || r == '\n' {
				return nil, blockErr(b, "delimiter", fmt.Errorf("delimiter %q: write one character other than a quote or a line break", s))
			}
			delim = r
		}
	}
	header := b.CSV.Header

	f, err := openFile(c, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReaderSize(f, 1<<16))
	cr.Comma = delim
	cr.FieldsPerRecord = -1 // ragged rows are reported below, with names

	var names []string
	var rows [][]string
	var lines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s: row %d, character %d: %v", p, pe.Line, pe.Column, pe.Err)
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		line, _ := cr.FieldPos(0)
		if names == nil {
			if header {
				names = make([]string, len(rec))
				for i, s := range rec {
					names[i] = strings.TrimSpace(s)
				}
				continue
			}
			names = make([]string, len(rec))
			for i := range rec {
				names[i] = fmt.Sprintf("c%d", i+1)
			}
		}
		if len(rec) != len(names) {
			return nil, fmt.Errorf("%s: row %d has %d columns but the %s has %d", p, line, len(rec), firstRow(header), len(names))
		}
		rows = append(rows, rec)
		lines = append(lines, line)
	}
	if names == nil {
		return nil, fmt.Errorf("%s: the file is empty", p)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows after the header", p)
	}
	col := map[string]int{}
	for i, nm := range names {
		if j, dup := col[nm]; dup {
			return nil, fmt.Errorf("%s: columns %d and %d are both named '%s'", p, j+1, i+1, nm)
		}
		col[nm] = i
	}
	find := func(field, nm string) (int, error) {
		if i, ok := col[nm]; ok {
			return i, nil
		}
		return 0, blockErr(b, field, fmt.Errorf("%s: no column '%s' (the columns are %s)", p, nm, strings.Join(names, ", ")))
	}
	label := b.CSV.Label
	li, err := find("label", label)
	if err != nil {
		return nil, err
	}
	features := b.CSV.Features
	if features == nil {
		for _, nm := range names {
			if nm != label {
				features = append(features, nm)
			}
		}
	}
	if len(features) == 0 {
		return nil, blockErr(b, "features", fmt.Errorf("%s: no feature columns besides the label '%s'", p, label))
	}
	categorical := map[string]bool{}
	for _, nm := range b.CSV.Categorical {
		if _, err := find("categorical", nm); err != nil {
			return nil, err
		}
		if nm != label && !slices.Contains(features, nm) {
			return nil, blockErr(b, "categorical", fmt.Errorf("categorical column '%s' is not among the features", nm))
		}
		categorical[nm] = true
	}

	// Each feature column is numeric or a one-hot group.
	type group struct {
		name   string
		col    int
		cats   []string
		catIdx map[string]int
	}
	d := &csvDataset{n: len(rows)}
	groups := make([]group, len(features))
	for gi, nm := range features {
		ci, err := find("features", nm)
		if err != nil {
			return nil, err
		}
		if ci == li {
			return nil, blockErr(b, "features", fmt.Errorf("the label '%s' cannot also be a feature", nm))
		}
		g := group{name: nm, col: ci}
		if categorical[nm] {
			g.cats, g.catIdx = categories(rows, ci)
			for _, cat := range g.cats {
				d.columns = append(d.columns, nm+"="+cat)
			}
		} else {
			d.columns = append(d.columns, nm)
		}
		groups[gi] = g
	}
	d.f = len(d.columns)

	// The label: classes when categorical or when no cell is a number. A
	// column of numbers with a stray word, an empty cell or a NaN is a
	// regression target with a bad cell, not thousands of classes.
	classLabel := categorical[label]
	if !classLabel {
		bad, numbers := -1, 0
		var badErr error
		for i, r := range rows {
			_, err := parseNum(r[li])
			if err != nil && bad < 0 {
				bad, badErr = i, err
			}
			if err == nil || errors.Is(err, errOutOfRange) {
				numbers++
			}
		}
		switch {
		case bad >= 0 && numbers == 0:
			classLabel = true
		case bad >= 0 && errors.Is(badErr, errOutOfRange):
			return nil, blockErr(b, "label", cellErr(p, lines[bad], label, rows[bad][li], badErr))
		case bad >= 0:
			err := cellErr(p, lines[bad], label, rows[bad][li], badErr)
			return nil, blockErr(b, "label", fmt.Errorf("%w, though %d of its %d rows hold numbers; fix the cell, or list '%s' in categorical if it holds classes",
				err, numbers, len(rows), label))
		}
	}
	d.y = make([]float32, d.n)
	if classLabel {
		var idx map[string]int
		d.classNames, idx = categories(rows, li)
		d.classes = len(d.classNames)
		for i, r := range rows {
			d.y[i] = float32(idx[strings.TrimSpace(r[li])])
		}
	} else {
		for i, r := range rows {
			v, err := parseNum(r[li])
			if err != nil {
				return nil, cellErr(p, lines[i], label, r[li], err)
			}
			d.y[i] = float32(v)
		}
	}

	// Raw inputs, as float64 until normalised.
	raw := make([]float64, d.n*d.f)
	numeric := make([]bool, d.f)
	for i, r := range rows {
		k := i * d.f
		for _, g := range groups {
			if g.cats != nil {
				raw[k+g.catIdx[strings.TrimSpace(r[g.col])]] = 1
				k += len(g.cats)
				continue
			}
			v, err := parseNum(r[g.col])
			if err != nil {
				cerr := cellErr(p, lines[i], g.name, r[g.col], err)
				if strings.TrimSpace(r[g.col]) != "" && !errors.Is(err, errOutOfRange) {
					cerr = fmt.Errorf("%w; list '%s' in categorical if it holds categories", cerr, g.name)
				}
				return nil, cerr
			}
			raw[k] = v
			numeric[k-i*d.f] = true
			k++
		}
	}

	mode := b.CSV.Normalize
	if mode == "" {
		mode = "standard"
	}
	if mode != "none" {
		if c.norm != nil && len(c.norm.Mean) == d.f {
			d.norm = *c.norm
		} else {
			d.norm = tableNorm(raw, d.n, d.f, numeric, trainIndices(b, c, d.n), mode)
		}
	}
	d.x = make([]float32, len(raw))
	for i, v := range raw {
		if d.norm.Mean != nil {
			j := i % d.f
			v = (v - d.norm.Mean[j]) / d.norm.Std[j]
		}
		d.x[i] = float32(v)
	}
	return d, nil
}

func firstRow(header bool) string {
	if header {
		return "header"
	}
	return "first row"
}

func cellErr(p string, line int, column, cell string, err error) error {
	if strings.TrimSpace(cell) == "" {
		return fmt.Errorf("%s: row %d, column '%s': the cell is empty (missing values are not supported)", p, line, column)
	}
	if errors.Is(err, errOutOfRange) {
		return fmt.Errorf("%s: row %d, column '%s': %s is too large: models train in float32, which ends at ±3.4e38", p, line, column, strings.TrimSpace(cell))
	}
	return fmt.Errorf("%s: row %d, column '%s': %q is not a number", p, line, column, cell)
}

func parseNum(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not finite")
	}
	if math.Abs(v) > math.MaxFloat32 {
		return 0, errOutOfRange // training computes in float32: it would be infinite
	}
	return v, nil
}

var errOutOfRange = errors.New("beyond float32's range")

// categories returns the distinct values of a column in their sort order
// (numeric when all are numbers) and each one's index.
func categories(rows [][]string, ci int) ([]string, map[string]int) {
	idx := map[string]int{}
	var cats []string
	for _, r := range rows {
		s := strings.TrimSpace(r[ci])
		if _, ok := idx[s]; !ok {
			idx[s] = 0
			cats = append(cats, s)
		}
	}
	allNum := true
	nums := map[string]float64{}
	for _, s := range cats {
		v, err := parseNum(s)
		if err != nil {
			allNum = false
			break
		}
		nums[s] = v
	}
	sort.Slice(cats, func(i, j int) bool {
		if allNum && nums[cats[i]] != nums[cats[j]] {
			return nums[cats[i]] < nums[cats[j]]
		}
		return cats[i] < cats[j]
	})
	for i, s := range cats {
		idx[s] = i
	}
	return cats, idx
}

// tableNorm computes per-column statistics over the rows in train (all
// rows when nil); columns that are not numeric keep the identity.
func tableNorm(raw []float64, n, f int, numeric []bool, train []int, mode string) Norm {
	nm := Norm{Mean: make([]float64, f), Std: make([]float64, f)}
	rows := train
	if rows == nil {
		rows = make([]int, n)
		for i := range rows {
			rows[i] = i
		}
	}
	for j := 0; j < f; j++ {
		nm.Mean[j], nm.Std[j] = 0, 1
		if !numeric[j] {
			continue
		}
		switch mode {
		case "scale":
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, i := range rows {
				v := raw[i*f+j]
				lo, hi = min(lo, v), max(hi, v)
			}
			nm.Mean[j] = lo
			if hi > lo {
				nm.Std[j] = hi - lo
			}
		default: // standard
			var s, ss float64
			for _, i := range rows {
				s += raw[i*f+j]
			}
			mean := s / float64(len(rows))
			for _, i := range rows {
				dv := raw[i*f+j] - mean
				ss += dv * dv
			}
			nm.Mean[j] = mean
			if std := math.Sqrt(ss / float64(len(rows))); std > 0 {
				nm.Std[j] = std
			}
		}
	}
	return nm
}

func (d *csvDataset) Len() int        { return d.n }
func (d *csvDataset) XShape() []int64 { return []int64{int64(d.f)} }
func (d *csvDataset) YShape() []int64 {
	if d.classes > 0 {
		return []int64{}
	}
	return []int64{1}
}
func (d *csvDataset) Classes() int         { return d.classes }
func (d *csvDataset) HasMask() bool        { return false }
func (d *csvDataset) Norm() Norm           { return d.norm }
func (d *csvDataset) Columns() []string    { return slices.Clone(d.columns) }
func (d *csvDataset) ClassNames() []string { return slices.Clone(d.classNames) }
func (d *csvDataset) Close() error         { return nil }
func (d *csvDataset) Read(i int, x, y, _ []float32) error {
	if i < 0 || i >= d.n {
		return fmt.Errorf("csv: sample %d out of range [0, %d)", i, d.n)
	}
	copy(x[:d.f], d.x[i*d.f:(i+1)*d.f])
	y[0] = d.y[i]
	return nil
}

// LabelCounts implements LabelCounter for a class label.
func (d *csvDataset) LabelCounts() []int {
	if d.classes == 0 {
		return nil
	}
	c := make([]int, d.classes)
	for _, v := range d.y[:d.n] {
		if i := int(v); i >= 0 && i < len(c) {
			c[i]++
		}
	}
	return c
}
