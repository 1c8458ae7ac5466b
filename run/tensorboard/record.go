package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// TFRecord framing, the container of TensorBoard's event files: each
// record is its length (uint64, little-endian), the masked CRC-32C of
// those 8 bytes, the data, and the masked CRC-32C of the data (both CRCs
// uint32, little-endian). Readers stop at the first record whose CRC
// does not match, so a record torn by a crash ends a file cleanly.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskDelta is TFRecord's constant for masking a CRC.
const maskDelta = 0xa282ead8

// MaskedCRC is TFRecord's masked CRC-32C of b: the CRC rotated right by
// 15 bits plus a constant, so that a CRC of data holding CRCs stays
// strong.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + maskDelta
}

// headerLen and footerLen are the bytes around a record's data.
const (
	headerLen = 12
	footerLen = 4
)

// AppendRecord appends data framed as one TFRecord to buf.
func AppendRecord(buf, data []byte) []byte {
	var h [headerLen]byte
	binary.LittleEndian.PutUint64(h[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(h[8:], MaskedCRC(h[:8]))
	buf = append(buf, h[:]...)
	buf = append(buf, data...)
	return binary.LittleEndian.AppendUint32(buf, MaskedCRC(data))
}

// ErrCorrupt is wrapped by ReadRecords' error for a record that is torn
// or whose CRC does not match.
var ErrCorrupt = errors.New("corrupt record")

// maxRecord bounds a record's length as read, so that a torn length does
// not ask for gigabytes.
const maxRecord = 1 << 30

// ReadRecords reads r's records, verifying both CRCs of each. At the
// first record that is cut short or fails a CRC it stops, returning the
// records before it and an error wrapping ErrCorrupt; at a clean end of
// file the error is nil.
func ReadRecords(r io.Reader) ([][]byte, error) {
	var recs [][]byte
	var h [headerLen]byte
	for off := int64(0); ; {
		n, err := io.ReadFull(r, h[:])
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("record at byte %d: %d-byte header: %w", off, n, ErrCorrupt)
		}
		size := binary.LittleEndian.Uint64(h[:8])
		if MaskedCRC(h[:8]) != binary.LittleEndian.Uint32(h[8:]) || size > maxRecord {
			return recs, fmt.Errorf("record at byte %d: length CRC: %w", off, ErrCorrupt)
		}
		data := make([]byte, size+footerLen)
		if _, err := io.ReadFull(r, data); err != nil {
			return recs, fmt.Errorf("record at byte %d: cut short: %w", off, ErrCorrupt)
		}
		data, crc := data[:size], binary.LittleEndian.Uint32(data[size:])
		if MaskedCRC(data) != crc {
			return recs, fmt.Errorf("record at byte %d: data CRC: %w", off, ErrCorrupt)
		}
		recs = append(recs, data)
		off += headerLen + int64(size) + footerLen
	}
}
