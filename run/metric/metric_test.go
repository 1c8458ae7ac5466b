package metric

import (
	"math"
	"testing"
)

func values(t *testing.T, s *Set) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, v := range s.Values() {
		m[v.Name] = v.Value
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestClassIndices(t *testing.T) {
	s, err := New([]string{"accuracy", "miou", "f1"}, Task{Kind: Classes, OutShape: []int64{3}, YShape: []int64{}})
	if err != nil {
		t.Fatal(err)
	}
	// Four samples: predictions 0, 1, 2, 1; targets 0, 1, 1, 2.
	out := []float32{
		5, 1, 0,
		0, 3, 1,
		0, 1, 2,
		0, 9, 1,
	}
	y := []float32{0, 1, 1, 2}
	if err := s.Add(4, out, y, nil); err != nil {
		t.Fatal(err)
	}
	m := values(t, s)
	if !near(m["accuracy"], 0.5) {
		t.Errorf("accuracy %v, want 0.5", m["accuracy"])
	}
	// IoU: class 0 1/1, class 1 1/3 (tp 1, fp 1, fn 1), class 2 0/2.
	if want := (1 + 1.0/3 + 0) / 3; !near(m["miou"], want) {
		t.Errorf("miou %v, want %v", m["miou"], want)
	}
	// F1: class 0 1, class 1 2/4, class 2 0.
	if want := (1 + 0.5 + 0) / 3; !near(m["f1"], want) {
		t.Errorf("f1 %v, want %v", m["f1"], want)
	}
}

func TestPerPixelClassesWithMask(t *testing.T) {
	// One sample, 2 classes over 2x2 pixels, class-index targets [1, 2, 2].
	s, err := New([]string{"accuracy"}, Task{Kind: Classes, OutShape: []int64{2, 2, 2}, YShape: []int64{1, 2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Channel 0 then channel 1; predictions per pixel: 0, 1, 1, 0.
	out := []float32{1, 0, 0, 1, 0, 1, 1, 0}
	y := []float32{0, 1, 0, 1} // right, right, wrong, wrong
	mask := []float32{1, 1, 0, 1}
	if err := s.Add(1, out, y, mask); err != nil {
		t.Fatal(err)
	}
	if m := values(t, s); !near(m["accuracy"], 2.0/3) {
		t.Errorf("accuracy %v, want 2/3 (the masked pixel left out)", m["accuracy"])
	}
}

func TestBinaryAndRegression(t *testing.T) {
	b, err := New([]string{"f1", "miou", "accuracy"}, Task{Kind: Binary, OutShape: []int64{1, 2, 2}, YShape: []int64{1, 2, 2}, Threshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// predictions 1 0 1 1, targets 1 0 0 1: tp 2, fp 1, fn 0, tn 1.
	if err := b.Add(1, []float32{0.9, 0.1, 0.6, 0.7}, []float32{1, 0, 0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	m := values(t, b)
	if !near(m["f1"], 4.0/5) || !near(m["accuracy"], 0.75) || !near(m["miou"], (2.0/3+1.0/2)/2) {
		t.Errorf("binary metrics %v", m)
	}
	r, err := New([]string{"mae", "rmse"}, Task{Kind: Regression, OutShape: []int64{1}, YShape: []int64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(3, []float32{1, 2, 3}, []float32{2, 2, 0}, []float32{1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	m = values(t, r)
	if !near(m["mae"], 4.0/3) || !near(m["rmse"], math.Sqrt(10.0/3)) {
		t.Errorf("regression metrics %v", m)
	}
}

func TestMetricMustFitTask(t *testing.T) {
	if _, err := New([]string{"accuracy"}, Task{Kind: Regression, OutShape: []int64{1}, YShape: []int64{1}}); err == nil {
		t.Error("accuracy on a regression task was accepted")
	}
	if _, err := New([]string{"rmse"}, Task{Kind: Classes, OutShape: []int64{10}, YShape: []int64{}}); err == nil {
		t.Error("rmse on a classification task was accepted")
	}
	if _, err := New(nil, Task{Kind: Classes, OutShape: []int64{10}, YShape: []int64{3}}); err == nil {
		t.Error("targets of the wrong size were accepted")
	}
}

func TestEmptyIsNaN(t *testing.T) {
	s, _ := New([]string{"accuracy", "miou"}, Task{Kind: Classes, OutShape: []int64{2}, YShape: []int64{}})
	for _, v := range s.Values() {
		if !math.IsNaN(v.Value) {
			t.Errorf("%s over nothing is %v, want NaN", v.Name, v.Value)
		}
	}
}

// TestPSNR: 10·log10(R²/MSE) over the valid positions, R the range of
// their targets, in batches as in one; a masked position counts in
// neither.
func TestPSNR(t *testing.T) {
	r, err := New([]string{"psnr", "rmse"}, Task{Kind: Regression, OutShape: []int64{1, 2}, YShape: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	// targets 10, 30 | 20, 90 (masked): range 20; errors 1, -2, 3.
	if err := r.Add(1, []float32{11, 28}, []float32{10, 30}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(1, []float32{23, 0}, []float32{20, 90}, []float32{1, 0}); err != nil {
		t.Fatal(err)
	}
	m := values(t, r)
	if want := 10 * math.Log10(400/(14.0/3)); !near(m["psnr"], want) || !near(m["rmse"], math.Sqrt(14.0/3)) {
		t.Errorf("psnr %v, want %v (rmse %v)", m["psnr"], want, m["rmse"])
	}
	if _, err := New([]string{"psnr"}, Task{Kind: Classes, OutShape: []int64{3}}); err == nil {
		t.Error("psnr accepted for a classifier")
	}
}
