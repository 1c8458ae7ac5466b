package dataset

import (
	"fmt"
	"strings"

	"pipe/dataset/samples"
	"pipe/spec"
)

// DeviceForm is what a source's samples take on a device that keeps
// them and gathers batches by index there (plan.DataOnDevice): Bytes as
// the loader reads them before it normalises, and What they are; or
// Not, why the device cannot make the loader's batches from them exactly.
type DeviceForm struct {
	Bytes int64
	What  string
	Not   string
}

// DeviceFormOf says whether source b's samples can lie on a device, from
// its spec and headers alone. Only an idx source can: its samples are
// bytes, which the loader normalises by a table of 256 values (a device
// looks them up in the same table); an augmenting source draws each
// sample's transform on the host per epoch, and the other kinds' samples
// are decoded, warped or normalised per value as float32.
func DeviceFormOf(b *spec.Source, opts ...Option) (DeviceForm, error) {
	switch {
	case b == nil:
		return DeviceForm{Not: "the run has no training source"}, nil
	case len(b.Augment) > 0:
		return DeviceForm{Not: fmt.Sprintf("source %s augments each sample on the host (%s), drawn anew every epoch, which a gather by index cannot repeat", b.Name, strings.Join(b.Augment, ", "))}, nil
	case b.IDX == nil:
		return DeviceForm{Not: fmt.Sprintf("source %s is a %s source, whose samples the loader decodes into float32 value by value; only an idx source's bytes are normalised by one table a device can apply", b.Name, b.Kind)}, nil
	}
	r, err := ResidentBytes(b, 0, opts...)
	if err != nil {
		return DeviceForm{}, err
	}
	return DeviceForm{Bytes: r.Bytes, What: fmt.Sprintf("source %s, %s", b.Name, r.What)}, nil
}

// DeviceSamples is the samples of ds's root dataset (Root) as a device
// keeps them, with the loader's normalisation table; an error where the
// dataset's samples are not bytes (DeviceFormOf says which are).
func DeviceSamples(ds Dataset) (*samples.Resident, error) {
	root := ds
	for s, ok := root.(*Subset); ok; s, ok = root.(*Subset) {
		root = s.Parent
	}
	d, ok := root.(*idxDataset)
	if !ok {
		return nil, fmt.Errorf("data: a %T's samples cannot lie on a device; only an idx source's can", root)
	}
	return &samples.Resident{X: d.images, Per: d.size, Labels: d.labels, LUT: d.lut}, nil
}
