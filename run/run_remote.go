package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"pipe/dataset/remote"
	"pipe/run/folder"
	"pipe/spec"
)

// Run folders in an object store. --checkpoint-dir s3://bucket/prefix
// (or gs://, or train's checkpoint_dir) places the run in a local
// staging folder, out/PIPELINE/remote/NAME, mirrored to the prefix: the
// placement downloads the prefix's job record and checkpoints into it,
// the run writes each file there as it would in any folder and then
// uploads it (last.ckpt after the others), and the run's end uploads the
// report beside them. Every restart, on this machine or another, starts
// from what the prefix holds. What is atomic and what a concurrent
// writer sees: docs/design/checkpoint-files.md.

// RemoteFolder is the folder under out/PIPELINE that holds the staging
// folders of runs placed in an object store.
const RemoteFolder = "remote"

// IsRemote reports whether dir names a folder in an object store.
func IsRemote(dir string) bool { return spec.URLScheme(dir) != "" }

var notName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// StagingFolder is the local folder of a run placed at URL u, under the
// pipeline's folder root: the URL made a name, and a hash of it so that
// two URLs never share one.
func StagingFolder(root, u string) string {
	h := sha256.Sum256([]byte(strings.TrimSuffix(u, "/")))
	name := strings.Trim(notName.ReplaceAllString(strings.TrimSuffix(u, "/"), "-"), "-.")
	if len(name) > 80 {
		name = name[:80]
	}
	return filepath.Join(root, RemoteFolder, name+"-"+hex.EncodeToString(h[:4]))
}

// remoteFiles are the files a placement downloads: the job's record
// first, then the checkpoints a run resumes from or claims.
var remoteFiles = []string{folder.JobFile, folder.LastCheckpoint, folder.BestCheckpoint}

// placeRemote places a run in the folder at URL u: it refuses a URL pipe
// cannot write, makes the staging folder, empties it and fills it with
// the prefix's job record and checkpoints, unless another run on this
// machine holds the staging folder, which the run's lock then refuses. A folder that records another job is
// refused (folder.ErrOtherJob).
func placeRemote(root, u string, w Where) (Place, error) {
	u = strings.TrimSuffix(u, "/")
	if err := remote.Writable(u); err != nil {
		return Place{}, fmt.Errorf("--checkpoint-dir: %w", err)
	}
	dir := StagingFolder(root, u)
	if w.Rank > 0 {
		// Another rank only reads the checkpoint it resumes from, into a
		// folder of its own: emptying rank 0's would race its resume.
		dir += fmt.Sprintf(".rank-%d", w.Rank)
	}
	pl := Place{Dir: dir, Remote: u, Job: w.Job}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pl, err
	}
	if folder.Busy(filepath.Join(dir, folder.LockFile)) {
		return pl, nil // the lock refuses this run; the holder's files stay
	}
	// The prefix is the run's truth: what an earlier start left here
	// goes, and the prefix's files come.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return pl, err
	}
	for _, e := range entries {
		if e.Name() != folder.LockFile {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return pl, err
			}
		}
	}
	ctx := context.Background()
	for _, name := range remoteFiles {
		err := remote.Download(ctx, u+"/"+name, filepath.Join(dir, name))
		switch {
		case errors.Is(err, remote.ErrNotFound):
		case err != nil:
			return pl, fmt.Errorf("reading the run's folder %s: %w", remote.Redact(u), err)
		}
	}
	return pl, folder.CheckJob(dir, w.Job)
}

// publish uploads the named files of the run's folder to its URL, when
// the run was placed in an object store, in order; it returns false
// (with a diagnostic) when an upload failed. The staging copy stays
// either way.
func (r *runner) publish(names ...string) bool {
	pl := r.rc.place
	if pl == nil || pl.Remote == "" {
		return true
	}
	for _, name := range names {
		err := remote.Put(context.Background(), pl.Remote+"/"+name, filepath.Join(r.set.ckptDir, name))
		if err != nil {
			r.res.Status = StatusFailed
			r.errorf(nil, CodeCheckpoint, "cannot upload "+name+" to "+remote.Redact(pl.Remote),
				"%v. The file is in %s; the object store keeps its previous %s, which a restart continues. Check the store and the credentials, then run again (--resume continues from the store).",
				err, r.set.ckptDir, name)
			return false
		}
	}
	return true
}

// mirror is a run folder's copy at the URL u (folder.Mirror).
type mirror struct{ u string }

// Delete deletes the named files from the copy; it returns the first error.
func (m mirror) Delete(names ...string) error {
	for _, name := range names {
		if err := remote.Delete(context.Background(), m.u+"/"+name); err != nil {
			return err
		}
	}
	return nil
}

// Epochs are the epoch-NNN.ckpt files of the copy.
func (m mirror) Epochs() ([]string, error) {
	es, err := remote.List(context.Background(), m.u)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range es {
		if ok, _ := filepath.Match("epoch-*.ckpt", e.Rel); ok {
			names = append(names, e.Rel)
		}
	}
	return names, nil
}

// PublishOutputs uploads what a run placed in an object store wrote in
// its folder besides its checkpoints and job record, which the run
// uploaded as it wrote them: the report, its loss curve, a trace, the
// TensorBoard events. Nothing for a local folder.
func PublishOutputs(pl Place) error {
	if pl.Remote == "" {
		return nil
	}
	return filepath.WalkDir(pl.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != pl.Dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // the lock, temporary files
		}
		if d.IsDir() || strings.HasSuffix(name, ".ckpt") || name == folder.JobFile {
			return nil
		}
		rel, err := filepath.Rel(pl.Dir, p)
		if err != nil {
			return err
		}
		return remote.Put(context.Background(), pl.Remote+"/"+filepath.ToSlash(rel), p)
	})
}
