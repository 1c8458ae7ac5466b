package folder

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Checkpoint files. A checkpoint is one file: a 64-byte header (magic
// "PIPECKPT", the format version, the lengths of the metadata and of the
// tensor data, and the sha256 of both), a gob of the run's metadata,
// then the tensors' float32 values, little-endian. A file whose length or
// checksum does not match its header is refused, so a torn or damaged
// file is never resumed. Package run says what the metadata holds; the
// framing is here. Layout: docs/design/checkpoint-files.md.

const (
	ckptMagic   = "PIPECKPT"
	ckptVersion = 1
	ckptHeader  = 64
	// LastCheckpoint is the file a run resumes from.
	LastCheckpoint = "last.ckpt"
	// BestCheckpoint holds the epoch with the best validation loss.
	BestCheckpoint = "best.ckpt"
)

// ErrBadCheckpoint is wrapped by the errors that refuse a checkpoint file:
// truncated, corrupt, or not a checkpoint.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// EncodeCheckpoint writes a checkpoint of meta (gob-encoded) and the
// tensors' values, in order, to w.
func EncodeCheckpoint(w io.Writer, meta any, tensors [][]float32) error {
	var mb bytes.Buffer
	if err := gob.NewEncoder(&mb).Encode(meta); err != nil {
		return fmt.Errorf("encoding the checkpoint's metadata: %w", err)
	}
	var dlen uint64
	for _, t := range tensors {
		dlen += uint64(len(t)) * 4
	}
	h := sha256.New()
	h.Write(mb.Bytes())
	buf := make([]byte, 0, 1<<16)
	each := func(f func([]byte) error) error {
		for _, t := range tensors {
			for i := 0; i < len(t); {
				buf = buf[:0]
				for ; i < len(t) && len(buf) < cap(buf); i++ {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(t[i]))
				}
				if err := f(buf); err != nil {
					return err
				}
			}
		}
		return nil
	}
	_ = each(func(b []byte) error { h.Write(b); return nil })
	hdr := make([]byte, ckptHeader)
	copy(hdr, ckptMagic)
	binary.LittleEndian.PutUint32(hdr[8:], ckptVersion)
	binary.LittleEndian.PutUint64(hdr[16:], uint64(mb.Len()))
	binary.LittleEndian.PutUint64(hdr[24:], dlen)
	copy(hdr[32:], h.Sum(nil))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if _, err := w.Write(mb.Bytes()); err != nil {
		return err
	}
	return each(func(b []byte) error { _, err := w.Write(b); return err })
}

// ReadCheckpoint reads and verifies the checkpoint at path, decodes its
// metadata into meta (a pointer) and returns its tensor data, the
// float32 values little-endian, for the caller to split as its metadata
// says. A file that is not whole, or not a checkpoint, is refused with
// an error wrapping ErrBadCheckpoint that says how.
func ReadCheckpoint(path string, meta any) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if n := min(len(b), len(ckptMagic)); string(b[:n]) != ckptMagic[:n] {
		return nil, Bad(path, "not a pipe checkpoint")
	}
	if len(b) < ckptHeader {
		return nil, Bad(path, "truncated: %d bytes, shorter than the header", len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != ckptVersion {
		return nil, Bad(path, "format version %d; this pipe reads version %d", v, ckptVersion)
	}
	mlen := binary.LittleEndian.Uint64(b[16:])
	dlen := binary.LittleEndian.Uint64(b[24:])
	body := b[ckptHeader:]
	if want := mlen + dlen; uint64(len(body)) != want || mlen > want {
		if uint64(len(body)) < want {
			return nil, Bad(path, "truncated: %d bytes, the header says %d (an interrupted copy, or a full disk?)", len(b), want+ckptHeader)
		}
		return nil, Bad(path, "%d bytes, the header says %d", len(b), want+ckptHeader)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], b[32:64]) {
		return nil, Bad(path, "corrupt: the checksum does not match its contents")
	}
	if err := gob.NewDecoder(bytes.NewReader(body[:mlen])).Decode(meta); err != nil {
		return nil, Bad(path, "unreadable metadata: %v", err)
	}
	return body[mlen:], nil
}

// ReadMeta decodes a checkpoint's metadata alone into meta (a pointer),
// without its tensors and so without the checksum, which covers both:
// enough to tell whose a checkpoint is before a run writes beside it.
// meta may hold fewer fields than were written: gob fills those it has.
func ReadMeta(path string, meta any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := make([]byte, ckptHeader)
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:len(ckptMagic)]) != ckptMagic ||
		binary.LittleEndian.Uint32(hdr[8:]) != ckptVersion {
		return fmt.Errorf("%s: %w", path, ErrBadCheckpoint)
	}
	mlen := binary.LittleEndian.Uint64(hdr[16:])
	if st, err := f.Stat(); err != nil || mlen > uint64(st.Size()) {
		return fmt.Errorf("%s: truncated: %w", path, ErrBadCheckpoint)
	}
	if err := gob.NewDecoder(io.LimitReader(f, int64(mlen))).Decode(meta); err != nil {
		return fmt.Errorf("%s: unreadable metadata: %v: %w", path, err, ErrBadCheckpoint)
	}
	return nil
}

// Bad is the error that refuses the checkpoint at path, saying why.
func Bad(path, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", path, fmt.Sprintf(format, args...), ErrBadCheckpoint)
}
