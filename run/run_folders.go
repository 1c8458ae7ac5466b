package run

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"pipe/run/folder"
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
	Job folder.Job
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
	os.Remove(filepath.Join(pl.Dir, folder.LockFile))
	os.Remove(filepath.Join(pl.Dir, folder.JobFile))
	if os.Remove(pl.Dir) != nil {
		return
	}
	for _, d := range pl.made {
		if os.Remove(d) != nil {
			return
		}
	}
}

// folder is the Folder of a run placed at pl whose checkpoints go to
// dir (pl.Dir, or the folder given when pl is nil).
func (pl *Place) folder(dir string) *folder.Folder {
	f := &folder.Folder{Dir: dir}
	if pl != nil {
		f.Root, f.Job = pl.Root, pl.Job
		if pl.Remote != "" {
			f.Mirror = mirror{pl.Remote}
		}
	}
	return f
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
	Job      folder.Job
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
// (folder.ErrOtherJob), and a resume with nothing to resume returns an error
// wrapping folder.ErrNoRun.
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
	return pl, folder.CheckJob(pl.Dir, w.Job)
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
		return folder.JobFolder(root, w.Job)
	case w.Resume && w.ResumeAt == "":
		if d, _, err := folder.LatestRun(root); err == nil {
			return d
		}
	}
	return ""
}

// placeDefault is PlaceRun's folder under out/NAME.
func placeDefault(prog *spec.Program, base string, w Where) (Place, error) {
	root := PipelineFolder(base, prog.Name)
	if w.Job.ID != "" {
		d := folder.JobFolder(root, w.Job)
		_, err := os.Stat(d)
		pl := Place{Dir: d, Root: root, Job: w.Job, Fresh: errors.Is(err, fs.ErrNotExist) && w.Rank == 0}
		if w.Resume && w.ResumeAt == "" && !folder.FileExists(filepath.Join(d, folder.LastCheckpoint)) {
			return pl, fmt.Errorf("%s holds no run of job %s (%s) to resume; --resume=%s continues the latest run instead: %w",
				d, w.Job.ID, w.Job.From, filepath.Join(root, folder.LatestName), folder.ErrNoRun)
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
		return pl, folder.CheckJob(d, w.Job)
	}
	if w.Resume && w.ResumeAt == "" {
		d, legacy, err := folder.LatestRun(root)
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
		return Place{Dir: filepath.Join(root, folder.RunsFolder, fmt.Sprintf(".rank-%d-writes-nothing", w.Rank))}, nil
	}
	made, err := mkdirs(filepath.Join(root, folder.RunsFolder))
	if err != nil {
		return Place{Root: root}, err
	}
	d, err := folder.NewStampFolder(filepath.Join(root, folder.RunsFolder), time.Now(), "runs")
	if err != nil {
		return Place{Root: root}, err
	}
	return Place{Dir: d, Root: root, Fresh: true, made: made}, nil
}

// resumesHere reports whether the run continues the checkpoints of its
// own folder: --resume without a path, or one in the run's folder. Only
// then are the folder's checkpoints, best.ckpt among them, this run's.
func (r *runner) resumesHere() bool {
	return r.rc.resume && r.folder.ResumesHere(r.rc.resumeAt)
}

// identity is whose the run's checkpoints are (folder.Identity).
func (r *runner) identity() folder.Identity {
	p := r.p
	return folder.Identity{Pipeline: p.Pipeline, Model: p.Model, File: p.File, FileAbs: folder.AbsSource(p.File),
		Structure: structureOf(r.graph), OptimizerKind: p.Optimizer.Kind, LossKind: p.Loss}
}

// claim checks, before a run that does not continue its folder's
// checkpoints trains, whose checkpoints the folder holds (Folder.Claim):
// another pipeline's are refused (a run there would mix the two); this
// pipeline's earlier run's are replaced at the run's first checkpoint,
// and the run warns while there is time to stop.
func (r *runner) claim() bool {
	if r.resumesHere() {
		return true
	}
	stale, m := r.folder.Claim(r.identity(), r.rc.worldDecides)
	if m != nil {
		r.errorf(nil, CodeOtherFolder, "the checkpoint folder is another pipeline's",
			"%s. This run would put its checkpoints beside (and over) that one's, so nothing was trained: give it its own folder with --checkpoint-dir, or leave --checkpoint-dir out and every run gets one under out/%s/runs.",
			m.Fact, r.p.Pipeline)
		return false
	}
	if stale {
		r.warnStale()
	}
	return true
}

// warnStale says that the run's first checkpoint replaces the folder's
// earlier run's, while there is time to stop.
func (r *runner) warnStale() {
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
	resume, stale := r.folder.Restarted(n)
	if resume {
		r.rc.resume, r.rc.resumeAt = true, ""
		r.log.Info("continuing from the run's last checkpoint: the launcher restarted this run's ranks",
			"rank", r.rc.nodeRank, "restarts", n, "this rank's", r.cfg.LauncherRestarts, "checkpoint", filepath.Join(r.set.ckptDir, folder.LastCheckpoint))
		return
	}
	if stale {
		r.warnStale()
	}
}

// clearStale removes an earlier run's files from the run's folder before
// its first checkpoint (Folder.ClearStale). It returns false (with a
// diagnostic) when a file cannot be removed.
func (r *runner) clearStale() bool {
	if err := r.folder.ClearStale(); err != nil {
		r.res.Status = StatusFailed
		r.errorf(nil, CodeCheckpoint, "cannot remove an earlier run's checkpoints",
			"%v. The run keeps no checkpoint beside another run's, so it stopped; remove the file, or give this run its own folder with --checkpoint-dir.", err)
		return false
	}
	return true
}

// markLatest records the run's last.ckpt in its folder, which points the
// pipeline's latest at the folder after the first (Folder.Wrote).
func (r *runner) markLatest() {
	if err := r.folder.Wrote(); err != nil {
		r.warnf(nil, CodeCheckpoint, "cannot mark the run as the latest",
			"%v. The checkpoints are in %s; give that folder to --resume, pipe serve and pipe export with --checkpoint.", err, r.set.ckptDir)
	}
}
