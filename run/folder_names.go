package run

import (
	"io"
	"time"

	"pipe/run/folder"
)

// Package folder holds a run folder's files and rules; these are its
// names as run's callers have always used them.

const (
	// LockFile is the run lock's file name in the checkpoint folder.
	LockFile = folder.LockFile
	// JobFile names the job a run folder belongs to (folder.JobFile).
	JobFile = folder.JobFile
	// SettingsFile records what a run was started with (folder.SettingsFile).
	SettingsFile = folder.SettingsFile
	// LastCheckpoint is the file a run resumes from.
	LastCheckpoint = folder.LastCheckpoint
	// BestCheckpoint holds the epoch with the best validation loss.
	BestCheckpoint = folder.BestCheckpoint
	// RunsFolder holds a pipeline's run folders, in out/PIPELINE.
	RunsFolder = folder.RunsFolder
	// LatestName names the newest run's folder, in out/PIPELINE.
	LatestName = folder.LatestName
)

var (
	// ErrLocked is wrapped by the error of a folder another run holds.
	ErrLocked = folder.ErrLocked
	// ErrOtherJob is wrapped by the error of a run folder that records
	// another job.
	ErrOtherJob = folder.ErrOtherJob
	// ErrNoRun is wrapped by the error of a --resume that finds no run.
	ErrNoRun = folder.ErrNoRun
	// ErrBadCheckpoint is wrapped by the errors that refuse a checkpoint
	// file: truncated, corrupt, or not a checkpoint.
	ErrBadCheckpoint = folder.ErrBadCheckpoint
)

// Job is the job a run belongs to (folder.Job).
type Job = folder.Job

// Settings are what a run's folder records of how it was started
// (folder.Settings).
type Settings = folder.Settings

// CheckJobID is folder.CheckJobID.
func CheckJobID(id string) error { return folder.CheckJobID(id) }

// ReadJob is folder.ReadJob.
func ReadJob(dir string) (string, error) { return folder.ReadJob(dir) }

// JobFolder is folder.JobFolder.
func JobFolder(root string, job Job) string { return folder.JobFolder(root, job) }

// ReadSettings is folder.ReadSettings.
func ReadSettings(dir string) (*Settings, error) { return folder.ReadSettings(dir) }

// LatestRun is folder.LatestRun.
func LatestRun(root string) (dir string, legacy bool, err error) { return folder.LatestRun(root) }

// NewStampFolder is folder.NewStampFolder.
func NewStampFolder(parent string, now time.Time, what string) (string, error) {
	return folder.NewStampFolder(parent, now, what)
}

// CheckpointIn is folder.CheckpointIn.
func CheckpointIn(path, name string) string { return folder.CheckpointIn(path, name) }

// WriteFileAtomic writes path through a temporary file in its folder, as
// checkpoints are written (folder.WriteFileAtomic): on any failure path
// is left as it was. Reports, plots and predictions use it too.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	return folder.WriteFileAtomic(path, write, nil)
}
