package tensorboard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"pipe/run/tensorboard/tbpb"
)

// FileVersion is the first event of every event file.
const FileVersion = "brain.Event:2"

// FilePrefix starts every event file's name; TensorBoard reads the files
// of a folder whose names hold "tfevents", in the order of their names.
const FilePrefix = "events.out.tfevents."

// Writer appends events to one event file of its own. Events are framed
// into a buffer and reach the file on Flush, whole records in one write;
// Sync also asks the OS to put them on disk. The file is only ever
// appended to, so a crash leaves at worst a torn last record, which
// readers drop (record.go).
type Writer struct {
	path string
	f    *os.File
	buf  []byte
}

// Create makes a new event file in dir: events.out.tfevents.SECONDS.HOST.PID.pipe,
// SECONDS now's Unix time (10 digits, so that a later file sorts after an
// earlier one), with .2, .3, ... added if the name is taken. It writes
// the file_version event at once, so that the file is a valid event file
// from the start.
func Create(dir string, now time.Time) (*Writer, error) {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '.' || r == '/' || r == '\\' || r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, host)
	if host == "" {
		host = "localhost"
	}
	base := fmt.Sprintf("%s%010d.%s.%d.pipe", FilePrefix, now.Unix(), host, os.Getpid())
	for i := 1; i < 100; i++ {
		name := base
		if i > 1 {
			name += fmt.Sprintf(".%d", i)
		}
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		w := &Writer{path: path, f: f}
		w.Event(&tbpb.Event{WallTime: Seconds(now), What: &tbpb.Event_FileVersion{FileVersion: FileVersion},
			SourceMetadata: &tbpb.SourceMetadata{Writer: "pipe"}})
		if err := w.Flush(); err != nil {
			f.Close()
			return nil, err
		}
		return w, nil
	}
	return nil, fmt.Errorf("%s: a hundred event files of this second and process", base)
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Seconds is t as an event's wall_time: seconds since the Unix epoch.
func Seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Event frames ev into the buffer.
func (w *Writer) Event(ev *tbpb.Event) {
	b, err := proto.Marshal(ev)
	if err != nil {
		panic(err) // the messages are ours and always marshal
	}
	w.buf = AppendRecord(w.buf, b)
}

// Scalar is a tagged value of a summary.
type Scalar struct {
	Tag   string
	Value float64
}

// Scalars frames one event at step holding vs as simple values (float32,
// which TensorBoard's scalars dashboard shows); none, no event.
func (w *Writer) Scalars(step int64, wall time.Time, vs ...Scalar) {
	if len(vs) == 0 {
		return
	}
	s := &tbpb.Summary{Value: make([]*tbpb.Summary_Value, len(vs))}
	for i, v := range vs {
		s.Value[i] = &tbpb.Summary_Value{Tag: v.Tag, Value: &tbpb.Summary_Value_SimpleValue{SimpleValue: float32(v.Value)}}
	}
	w.Event(&tbpb.Event{WallTime: Seconds(wall), Step: step, What: &tbpb.Event_Summary{Summary: s}})
}

// Flush writes the buffered records to the file.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// Sync flushes, then has the OS write the file to disk.
func (w *Writer) Sync() error {
	if err := w.Flush(); err != nil {
		return err
	}
	return w.f.Sync()
}

// Close syncs and closes the file.
func (w *Writer) Close() error {
	err := w.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
