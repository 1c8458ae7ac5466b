package spec

// Source kinds, as the source block's second label names them.
const (
	KindIDX       = "idx"
	KindCSV       = "csv"
	KindImages    = "images"
	KindGeoTIFF   = "geotiff"
	KindSynthetic = "synthetic"
	KindVolume    = "volume"
	KindZarr      = "zarr"
)

// Source is a decoded source block: its name and kind, the fields every
// kind shares, and the spec of its kind (exactly one of the kind
// pointers is set; volume and zarr share Volume). Fields a block does not
// give keep their zero value, or nil for those whose absence means
// something.
type Source struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Split holds the training fraction; nil when the block has no split.
	Split *Split `json:"split,omitempty" pipe:"split"`
	// Augment lists the training transforms (flip_h, rot90, ...).
	Augment []string `json:"augment,omitempty" pipe:"augment"`

	IDX       *IDX       `json:"idx,omitempty"`
	CSV       *CSV       `json:"csv,omitempty"`
	Images    *Images    `json:"images,omitempty"`
	GeoTIFF   *GeoTIFF   `json:"geotiff,omitempty"`
	Synthetic *Synthetic `json:"synthetic,omitempty"`
	Volume    *Volume    `json:"volume,omitempty"`

	At Where `json:"at,omitzero"`
}

// Split is a source's split field: the fraction of samples that trains,
// the seed of the shuffle (the file's when nil) and, for a geotiff, the
// side of the square blocks it splits by (nil: by tile).
type Split struct {
	Fraction float64 `json:"fraction" pipe:"split"`
	Seed     *int64  `json:"seed,omitempty" pipe:"seed"`
	Blocks   *int64  `json:"blocks,omitempty" pipe:"blocks"`
}

// IDX is an idx source: MNIST-layout image and label files.
type IDX struct {
	Images    string `json:"images" pipe:"images"`
	Labels    string `json:"labels" pipe:"labels"`
	Normalize string `json:"normalize,omitempty" pipe:"normalize"`
}

// CSV is a csv source: one sample a row.
type CSV struct {
	Path        string   `json:"path" pipe:"path"`
	Features    []string `json:"features,omitempty" pipe:"features"`
	Categorical []string `json:"categorical,omitempty" pipe:"categorical"`
	Label       string   `json:"label" pipe:"label"`
	Normalize   string   `json:"normalize,omitempty" pipe:"normalize"`
	Delimiter   string   `json:"delimiter,omitempty" pipe:"delimiter"`
	// Header defaults to true (NewSource sets it).
	Header bool `json:"header" pipe:"header"`
}

// Images is an images source: a folder of class folders, or images and
// their masks.
type Images struct {
	Path  string `json:"path" pipe:"path"`
	Masks string `json:"masks,omitempty" pipe:"masks"`
	// Resize is [H, W]; nil keeps each image's size.
	Resize []int64 `json:"resize,omitempty" pipe:"resize"`
	// Channels is nil when the block does not say (the model may decide).
	Channels *int64 `json:"channels,omitempty" pipe:"channels"`
	// Strict defaults to true (NewSource sets it).
	Strict    bool   `json:"strict" pipe:"strict"`
	Normalize string `json:"normalize,omitempty" pipe:"normalize"`
}

// GeoTIFF is a geotiff source: a scene cut into tiles, with a target
// raster or target bands.
type GeoTIFF struct {
	Path string `json:"path" pipe:"path"`
	// Bands are 1-based; nil for all.
	Bands           []int  `json:"bands,omitempty" pipe:"bands"`
	Target          string `json:"target,omitempty" pipe:"target"`
	TargetBands     []int  `json:"target_bands,omitempty" pipe:"target_bands"`
	Downsample      *int64 `json:"downsample,omitempty" pipe:"downsample"`
	TargetNormalize string `json:"target_normalize,omitempty" pipe:"target_normalize"`
	// Tile is [H, W]; nil for one tile of the whole scene. Stride is nil
	// for the tile's size.
	Tile      []int64  `json:"tile,omitempty" pipe:"tile"`
	Stride    *int64   `json:"stride,omitempty" pipe:"tile.stride"`
	Normalize string   `json:"normalize,omitempty" pipe:"normalize"`
	Nodata    *float64 `json:"nodata,omitempty" pipe:"nodata"`
}

// Synthetic is a synthetic source: random samples from a seed.
type Synthetic struct {
	Samples int64   `json:"samples" pipe:"samples"`
	Shape   []int64 `json:"shape" pipe:"shape"`
	// Classes is 0 for a regression target.
	Classes int64 `json:"classes,omitempty" pipe:"classes"`
	// Seed is nil for the file's.
	Seed *int64 `json:"seed,omitempty" pipe:"seed"`
}

// Volume is a volume (multi-page TIFF) or zarr source, cut into
// [C, D, H, W] windows.
type Volume struct {
	Path   string `json:"path" pipe:"path"`
	Target string `json:"target,omitempty" pipe:"target"`
	// Window is [D, H, W], nil for the whole volume; Stride nil for the
	// window.
	Window          []int64 `json:"window,omitempty" pipe:"window"`
	Stride          []int64 `json:"stride,omitempty" pipe:"window.stride"`
	Normalize       string  `json:"normalize,omitempty" pipe:"normalize"`
	TargetNormalize string  `json:"target_normalize,omitempty" pipe:"target_normalize"`
}

// NewSource is a Source of the given kind with its kind's spec allocated
// and its defaults set, ready to be decoded into; nil for an unknown
// kind.
func NewSource(name, kind string) *Source {
	s := &Source{Name: name, Kind: kind}
	switch kind {
	case KindIDX:
		s.IDX = &IDX{}
	case KindCSV:
		s.CSV = &CSV{Header: true}
	case KindImages:
		s.Images = &Images{Strict: true}
	case KindGeoTIFF:
		s.GeoTIFF = &GeoTIFF{}
	case KindSynthetic:
		s.Synthetic = &Synthetic{}
	case KindVolume, KindZarr:
		s.Volume = &Volume{}
	default:
		return nil
	}
	return s
}

// KindSpec is the spec of the source's kind (a *IDX, *CSV, ...), the
// value to decode the kind's fields into.
func (s *Source) KindSpec() any {
	switch {
	case s.IDX != nil:
		return s.IDX
	case s.CSV != nil:
		return s.CSV
	case s.Images != nil:
		return s.Images
	case s.GeoTIFF != nil:
		return s.GeoTIFF
	case s.Synthetic != nil:
		return s.Synthetic
	case s.Volume != nil:
		return s.Volume
	}
	return nil
}

// Paths are the files and folders the source reads, as written.
func (s *Source) Paths() []string {
	var ps []string
	for _, f := range s.PathFields() {
		ps = append(ps, f.Path)
	}
	return ps
}
