package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
)

// idxBytes encodes an IDX file of unsigned bytes.
func idxBytes(dims []int, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(data)
	return b.Bytes()
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
