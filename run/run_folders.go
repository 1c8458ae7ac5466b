package run

import (
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pipe/spec"
)

// Run folders. Every run writes into a folder of its own,
// out/PIPELINE/runs/STAMP (its checkpoints, and pipe run's report and loss
// curve), so that a new run never replaces an earlier one's last.ckpt nor
// sits beside its best.ckpt. out/PIPELINE/latest names the newest run that
// wrote a checkpoint: --resume without a path continues it, and pipe serve
// and pipe export load it unless --max-steps cut it short
// (workflow.ChooseCheckpoint). A folder given with --checkpoint-dir or train's
// checkpoint_dir is the run's folder as it is. Out/PIPELINE/checkpoints,
// the layout before run folders, is read while no latest exists.
// Rules and reasons: docs/design/checkpoint-files.md.

const (
	// RunsFolder holds a pipeline's run folders, in out/PIPELINE.
	RunsFolder = "runs"
	// LatestName names the newest run's folder, in out/PIPELINE: a
	// symbolic link, or where none can be made a file holding its path.
	LatestName = "latest"
	// legacyFolder is the one checkpoint folder of the layout before runs.
	legacyFolder = "checkpoints"
)

// ErrNoRun is wrapped by the error of a --resume that finds no run.
var ErrNoRun = errors.New("no run to resume")

// Place is where a run writes: Dir its folder; Root the pipeline's folder
// whose latest names Dir once Dir holds a checkpoint ("" for a folder
// given explicitly, and for the old layout, where latest is not kept).
type Place struct {
	Dir, Root string
	// Fresh says Dir was made for this run (empty).
	Fresh bool
	// Legacy says Dir is out/PIPELINE/checkpoints of the old layout.
	Legacy bool
	// Job is the job the run belongs to (run_job.go); none for a run
	// started by hand.
	Job Job
	// Remote is the folder's URL when the run was placed in an object
	// store (run_remote.go); Dir is then its local staging folder.
	Remote string
	// made are the folders above Dir that placing the run made (out,
	// out/PIPELINE, its runs), innermost first: Discard removes them.
	made []string
}

// Discard undoes a fresh placement whose run wrote nothing: Dir, its
// lock and job files, and the folders above it that placing the run
// made, each only while empty (Remove leaves a folder that is not: a
// checkpoint, or another run's folder beside this one).
func (pl Place) Discard() {
	if !pl.Fresh {
		return
	}
	os.Remove(filepath.Join(pl.Dir, LockFile))
	os.Remove(filepath.Join(pl.Dir, JobFile))
	if os.Remove(pl.Dir) != nil {
		return
	}
	for _, d := range pl.made {
		if os.Remove(d) != nil {
			return
		}
	}
}

// mkdirs is os.MkdirAll(dir), returning the folders it made, innermost
// first.
func mkdirs(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	return missing, os.MkdirAll(dir, 0o755)
}

// Where is what places a run besides its program: the folder given
// (--checkpoint-dir), --resume and its path, the job the run belongs to,
// and the run's node rank (rank 0 alone makes folders).
type Where struct {
	Dir      string
	Resume   bool
	ResumeAt string
	Job      Job
	Rank     int
}

// PipelineFolder is out/NAME, resolved against base as the file's paths are.
func PipelineFolder(base, name string) string {
	return resolve(base, filepath.Join("out", name))
}

// PlaceRun decides where a run of prog writes its checkpoints: w.Dir when
// given (--checkpoint-dir), else train's checkpoint_dir (either may be an
// s3:// or gs:// URL: placeRemote), else for a run
// of a job the job's folder out/NAME/runs/ID, else for a --resume
// without a path the latest run's folder, else a new folder under
// out/NAME/runs. Rank 0 makes the folder now; another rank makes none
// (it writes nothing), and is given the job's folder or, with no job, one
// that is never made. A folder that records another job is refused
// (ErrOtherJob), and a resume with nothing to resume returns an error
// wrapping ErrNoRun.
func PlaceRun(prog *spec.Program, base string, w Where) (Place, error) {
	var pl Place
	switch {
	case IsRemote(w.Dir):
		return placeRemote(PipelineFolder(base, prog.Name), w.Dir, w)
	case w.Dir != "":
		pl = Place{Dir: w.Dir, Job: w.Job}
	case prog.Train != nil && IsRemote(prog.Train.CheckpointDir):
		return placeRemote(PipelineFolder(base, prog.Name), prog.Train.CheckpointDir, w)
	case prog.Train != nil && prog.Train.At.Has("checkpoint_dir"):
		pl = Place{Dir: resolve(base, prog.Train.CheckpointDir), Job: w.Job}
	default:
		return placeDefault(prog, base, w)
	}
	return pl, checkJob(pl.Dir, w.Job)
}

// ContinuedFolder is the folder whose run a run placed by w would
// continue in place if it holds a last.ckpt, as PlaceRun would find it,
// without making anything: the folder given, train's checkpoint_dir, the
// job's folder, or for --resume without a path the latest run's; "" for
// a run that gets a new folder.
func ContinuedFolder(prog *spec.Program, base string, w Where) string {
	root := PipelineFolder(base, prog.Name)
	switch {
	case w.Dir != "":
		return w.Dir
	case prog.Train != nil && prog.Train.At.Has("checkpoint_dir"):
		return resolve(base, prog.Train.CheckpointDir)
	case w.Job.ID != "":
		return JobFolder(root, w.Job)
	case w.Resume && w.ResumeAt == "":
		if d, _, err := LatestRun(root); err == nil {
			return d
		}
	}
	return ""
}

// placeDefault is PlaceRun's folder under out/NAME.
func placeDefault(prog *spec.Program, base string, w Where) (Place, error) {
	root := PipelineFolder(base, prog.Name)
	if w.Job.ID != "" {
		d := JobFolder(root, w.Job)
		_, err := os.Stat(d)
		pl := Place{Dir: d, Root: root, Job: w.Job, Fresh: errors.Is(err, fs.ErrNotExist) && w.Rank == 0}
		if w.Resume && w.ResumeAt == "" && !fileExists(filepath.Join(d, LastCheckpoint)) {
			return pl, fmt.Errorf("%s holds no run of job %s (%s) to resume; --resume=%s continues the latest run instead: %w",
				d, w.Job.ID, w.Job.From, filepath.Join(root, LatestName), ErrNoRun)
		}
		if pl.Fresh {
			made, err := mkdirs(d)
			if err != nil {
				return pl, err
			}
			if len(made) > 0 {
				pl.made = made[1:] // made[0] is Dir
			}
		}
		return pl, checkJob(d, w.Job)
	}
	if w.Resume && w.ResumeAt == "" {
		d, legacy, err := LatestRun(root)
		if err != nil {
			return Place{Root: root}, err
		}
		if legacy {
			return Place{Dir: d, Legacy: true}, nil
		}
		return Place{Dir: d, Root: root}, nil
	}
	if w.Rank > 0 {
		// Rank 0 makes the run's folder; this rank writes into none.
		return Place{Dir: filepath.Join(root, RunsFolder, fmt.Sprintf(".rank-%d-writes-nothing", w.Rank))}, nil
	}
	made, err := mkdirs(filepath.Join(root, RunsFolder))
	if err != nil {
		return Place{Root: root}, err
	}
	d, err := NewStampFolder(filepath.Join(root, RunsFolder), time.Now(), "runs")
	if err != nil {
		return Place{Root: root}, err
	}
	return Place{Dir: d, Root: root, Fresh: true, made: made}, nil
}

// NewStampFolder makes parent/STAMP, STAMP the local time to the
// second, with -2, -3, ... when another of the same second has it: Mkdir
// fails on a folder that exists, so two never get the same one. what
// names them in the error ("runs", "sweeps").
func NewStampFolder(parent string, now time.Time, what string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	stamp := now.Format("20060102-150405")
	for i := 1; i < 1000; i++ {
		name := stamp
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		d := filepath.Join(parent, name)
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: a thousand %s started in the second %s", parent, what, stamp)
}

// LatestRun is the folder of root's latest run: what root/latest names,
// else (legacy true) root/checkpoints when it holds a checkpoint, as the
// layout before run folders left it. With neither the error wraps ErrNoRun.
func LatestRun(root string) (dir string, legacy bool, err error) {
	latest := filepath.Join(root, LatestName)
	st, err := os.Lstat(latest)
	switch {
	case err == nil:
		var target string
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err = os.Readlink(latest)
		} else {
			var b []byte
			b, err = os.ReadFile(latest)
			target = strings.TrimSpace(string(b))
		}
		if err != nil {
			return "", false, fmt.Errorf("reading %s: %w", latest, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(root, target)
		}
		if st, err := os.Stat(target); err != nil || !st.IsDir() {
			return "", false, fmt.Errorf("%s names %s, which is not a folder (was it removed?): %w", latest, target, ErrNoRun)
		}
		return target, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, err
	}
	old := filepath.Join(root, legacyFolder)
	for _, name := range []string{LastCheckpoint, BestCheckpoint} {
		if fileExists(filepath.Join(old, name)) {
			return old, true, nil
		}
	}
	return "", false, fmt.Errorf("%s has no %s and no %s folder: %w", root, LatestName, legacyFolder, ErrNoRun)
}

// markLatest points root/latest at dir, replacing what it named at once
// (a rename): a relative symbolic link, so that the tree can move and a
// shell can cd into it, or where the file system makes none (Windows
// without the privilege) a file holding the path.
func markLatest(root, dir string) error {
	target, err := filepath.Rel(root, dir)
	if err != nil {
		target = dir
	}
	latest := filepath.Join(root, LatestName)
	tmp := filepath.Join(root, fmt.Sprintf(".%s.%d.tmp", LatestName, os.Getpid()))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err == nil {
		if err := os.Rename(tmp, latest); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	}
	return WriteFileAtomic(latest, func(w io.Writer) error {
		_, err := io.WriteString(w, target+"\n")
		return err
	})
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// sameFolder reports whether a and b name one folder.
func sameFolder(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab
}

// resumesHere reports whether the run continues the checkpoints of its
// own folder: --resume without a path, or one in the run's folder. Only
// then are the folder's checkpoints, best.ckpt among them, this run's.
func (r *runner) resumesHere() bool {
	if !r.rc.resume {
		return false
	}
	if r.rc.resumeAt == "" {
		return true
	}
	from := r.rc.resumeAt
	if st, err := os.Stat(from); err != nil || !st.IsDir() {
		from = filepath.Dir(from)
	}
	return sameFolder(from, r.set.ckptDir)
}

// claim checks, before a run that does not continue its folder's
// checkpoints trains, whose checkpoints the folder holds: another
// pipeline's are refused (a run there would mix the two); this
// pipeline's earlier run's are replaced, all of them, at the run's first
// checkpoint (stale), so that best.ckpt is never an earlier run's beside
// this one's last.ckpt. It warns then, while there is time to stop.
func (r *runner) claim() bool {
	if r.resumesHere() {
		return true
	}
	dir := r.set.ckptDir
	if files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt")); len(files) == 0 {
		return true
	}
	for _, name := range []string{LastCheckpoint, BestCheckpoint} {
		path := filepath.Join(dir, name)
		meta, err := readCheckpointMeta(path)
		if err != nil {
			continue // missing or unreadable: nothing says whose it is
		}
		if m := r.otherPipeline(path, meta); m != nil {
			r.errorf(nil, CodeOtherFolder, "the checkpoint folder is another pipeline's",
				"%s. This run would put its checkpoints beside (and over) that one's, so nothing was trained: give it its own folder with --checkpoint-dir, or leave --checkpoint-dir out and every run gets one under out/%s/runs.",
				m.fact, r.p.Pipeline)
			return false
		}
	}
	if r.rc.worldDecides {
		// Whether the run continues them is known once the ranks met.
		r.claimed = true
		return true
	}
	r.markStale()
	return true
}

// markStale has the run's first checkpoint replace the folder's earlier
// run's (clearStale), and says so while there is time to stop.
func (r *runner) markStale() {
	r.stale = true
	r.log.Warn("an earlier run's checkpoint will be replaced by this run's first (--resume continues it instead); its best.ckpt and epoch files go with it", "folder", r.set.ckptDir)
}

// decideResume decides, after the model was built, whether a run given
// WithContinueIfRestarted continues its folder's last checkpoint: when
// the launcher restarted any rank of the world. The ranks met at the
// build and each knows the world's largest count (engine.Worlder), so
// all decide alike, a rank the launcher restarted only because another
// failed too. Otherwise an earlier run's checkpoints are replaced, as
// claim would have said.
func (r *runner) decideResume() {
	n := r.worldRestarts
	last := filepath.Join(r.set.ckptDir, LastCheckpoint)
	if n > 0 && fileExists(last) {
		r.rc.resume, r.rc.resumeAt = true, ""
		r.log.Info("continuing from the run's last checkpoint: the launcher restarted this run's ranks",
			"rank", r.rc.nodeRank, "restarts", n, "this rank's", r.cfg.LauncherRestarts, "checkpoint", last)
		return
	}
	if r.claimed {
		r.markStale()
	}
}

// clearStale removes an earlier run's best.ckpt and epoch files from the
// run's folder before its first checkpoint replaces last.ckpt: stopped
// between the two, the folder holds the earlier run's last.ckpt alone,
// never a pair of two runs. It returns false (with a diagnostic) when a
// file cannot be removed.
func (r *runner) clearStale() bool {
	r.stale = false
	old, _ := filepath.Glob(filepath.Join(r.set.ckptDir, "epoch-*.ckpt"))
	old = append(old, filepath.Join(r.set.ckptDir, BestCheckpoint), filepath.Join(r.set.ckptDir, SettingsFile))
	if r.rc.place == nil || r.rc.place.Job.ID == "" {
		// The job that recorded the folder no longer has its run here.
		old = append(old, filepath.Join(r.set.ckptDir, JobFile))
	}
	remoteOld, err := r.remoteEpochFiles()
	for _, path := range old {
		if err == nil {
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = rerr
			}
		}
		remoteOld = append(remoteOld, filepath.Base(path))
	}
	if err == nil {
		err = r.unpublish(remoteOld...)
	}
	if err != nil {
		r.res.Status = StatusFailed
		r.errorf(nil, CodeCheckpoint, "cannot remove an earlier run's checkpoints",
			"%v. The run keeps no checkpoint beside another run's, so it stopped; remove the file, or give this run its own folder with --checkpoint-dir.", err)
		return false
	}
	return true
}

// markLatest points the pipeline's latest at the run's folder after its
// first checkpoint, when the run was placed under out/PIPELINE/runs: a
// run that wrote nothing never becomes the one to resume or serve.
func (r *runner) markLatest() {
	if r.wrote {
		return
	}
	r.wrote = true
	pl := r.rc.place
	if pl == nil || pl.Root == "" {
		return
	}
	if err := markLatest(pl.Root, r.set.ckptDir); err != nil {
		r.warnf(nil, CodeCheckpoint, "cannot mark the run as the latest",
			"%v. The checkpoints are in %s; give that folder to --resume, pipe serve and pipe export with --checkpoint.", err, r.set.ckptDir)
	}
}

// readCheckpointMeta reads a checkpoint's metadata alone, without its
// tensors and so without the checksum, which covers both: enough to tell
// whose a checkpoint is before a run writes beside it.
func readCheckpointMeta(path string) (*checkpointMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr := make([]byte, ckptHeader)
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:len(ckptMagic)]) != ckptMagic ||
		binary.LittleEndian.Uint32(hdr[8:]) != ckptVersion {
		return nil, fmt.Errorf("%s: %w", path, ErrBadCheckpoint)
	}
	mlen := binary.LittleEndian.Uint64(hdr[16:])
	if st, err := f.Stat(); err != nil || mlen > uint64(st.Size()) {
		return nil, fmt.Errorf("%s: truncated: %w", path, ErrBadCheckpoint)
	}
	var meta checkpointMeta
	if err := gob.NewDecoder(io.LimitReader(f, int64(mlen))).Decode(&meta); err != nil {
		return nil, fmt.Errorf("%s: unreadable metadata: %v: %w", path, err, ErrBadCheckpoint)
	}
	return &meta, nil
}
