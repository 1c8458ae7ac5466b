package folder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Run identity. A run that a job started (a SLURM job, a Kubeflow
// PyTorchJob, a torchrun with a rendezvous id, or pipe run --run-id) is
// that job's: its folder is out/PIPELINE/runs/ID, and every start of the
// job continues that folder's run and no other. The folder records its
// job in a file (the JobFile), so that a run given another job's folder
// is refused before it trains. Reasons: docs/design/run-identity.md.

// JobFile is the file in a run's folder that names the job it belongs to:
// the job's id and a newline, written atomically by rank 0 before the run
// trains.
const JobFile = "job"

// Job is the job a run belongs to; the zero Job is none (a run started by
// hand, which gets a folder of its own each time).
type Job struct {
	// ID names the job, as its folder is named: slurm-12345,
	// slurm-12345_7 (an array's task), pytorchjob-NAMESPACE-NAME,
	// torchrun-RDZVID, or --run-id's.
	ID string
	// From says where ID came from, for messages: "SLURM_JOB_ID=12345",
	// "--run-id", "PIPE_RUN_ID".
	From string
}

// ErrOtherJob is wrapped by the error of a run folder that records
// another job.
var ErrOtherJob = errors.New("the run folder is another job's")

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckJobID says what is wrong with id as a run's id, nil when nothing:
// it names a folder, so letters, digits, '.', '_' and '-', at most 128,
// starting with a letter or a digit.
func CheckJobID(id string) error {
	if !jobIDRE.MatchString(id) {
		return fmt.Errorf("run id %q: give letters, digits, '.', '_' and '-' (at most 128, the first a letter or a digit): it names the run's folder", id)
	}
	return nil
}

// ReadJob is the job dir's record names, "" when dir records none.
func ReadJob(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, JobFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// CheckJob refuses dir when it records another job than job (nil when it
// records none, or job's, or job is none): the error wraps ErrOtherJob.
func CheckJob(dir string, job Job) error {
	if job.ID == "" {
		return nil
	}
	had, err := ReadJob(dir)
	if err != nil {
		return fmt.Errorf("reading the run folder's job: %w", err)
	}
	if had != "" && had != job.ID {
		return fmt.Errorf("%w: %s holds the run of job %s (its %s file says so), and this is job %s (%s)",
			ErrOtherJob, dir, had, JobFile, job.ID, job.From)
	}
	return nil
}

// RecordJob writes job's id into dir's JobFile, atomically, unless it is
// there already.
func RecordJob(dir string, job Job) error {
	if had, err := ReadJob(dir); err == nil && had == job.ID {
		return nil
	}
	return WriteFileAtomic(filepath.Join(dir, JobFile), func(w io.Writer) error {
		_, err := io.WriteString(w, job.ID+"\n")
		return err
	})
}

// JobFolder is the run folder of job under the pipeline's folder root.
func JobFolder(root string, job Job) string {
	return filepath.Join(root, RunsFolder, job.ID)
}
