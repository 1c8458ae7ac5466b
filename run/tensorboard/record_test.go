package tensorboard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// The expected values come from a bitwise CRC-32C written apart from Go's
// hash/crc32 (0xe3069283 is CRC-32C's published check value).
func TestMaskedCRC(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want uint32
	}{
		{[]byte("123456789"), 0xc78ab0e5},
		{nil, 0xa282ead8},
		{[]byte("hello"), 0x191c1fbb},
		{binary.LittleEndian.AppendUint64(nil, 5), 0x3e04b2ea},
	} {
		if got := MaskedCRC(c.data); got != c.want {
			t.Errorf("MaskedCRC(%q) = %#x, want %#x", c.data, got, c.want)
		}
	}
	// One record of "hello": its length, the masked CRCs of the length
	// and of the data, little-endian around the data.
	want := []byte{5, 0, 0, 0, 0, 0, 0, 0, 0xea, 0xb2, 0x04, 0x3e, 'h', 'e', 'l', 'l', 'o', 0xbb, 0x1f, 0x1c, 0x19}
	if got := AppendRecord(nil, []byte("hello")); !bytes.Equal(got, want) {
		t.Errorf("AppendRecord(hello) = % x\nwant % x", got, want)
	}
}

// A record cut anywhere, or with any byte changed, ends the file: the
// records before it are read, and the error says why it stopped.
func TestReadRecordsStopsAtATornRecord(t *testing.T) {
	recs := [][]byte{[]byte("first"), {}, []byte("the third and last record")}
	var file []byte
	for _, r := range recs {
		file = AppendRecord(file, r)
	}
	got, err := ReadRecords(bytes.NewReader(file))
	if err != nil || len(got) != 3 || string(got[2]) != string(recs[2]) {
		t.Fatalf("whole file: %d records, %v", len(got), err)
	}
	last := len(file) - (headerLen + len(recs[2]) + footerLen)
	for cut := last + 1; cut < len(file); cut++ {
		got, err := ReadRecords(bytes.NewReader(file[:cut]))
		if len(got) != 2 || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %d records, %v", cut, len(file), len(got), err)
		}
	}
	for i := last; i < len(file); i++ {
		bad := bytes.Clone(file)
		bad[i] ^= 0x20
		got, err := ReadRecords(bytes.NewReader(bad))
		if len(got) != 2 || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d changed: %d records, %v", i, len(got), err)
		}
	}
}
