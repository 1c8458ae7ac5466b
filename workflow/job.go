package workflow

import (
	"fmt"
	"regexp"
	"strings"

	"pipe/run/folder"
)

// Environment variables that name a run's job besides the launchers'
// own: PIPE_RUN_ID names it outright (as --run-id does); PIPE_JOB_NAME
// and PIPE_JOB_NAMESPACE are a Kubeflow PyTorchJob's name and namespace,
// which the job files pipe launch --k8s writes pass to the container
// from the pod's label and metadata (the downward API).
const (
	EnvRunID        = "PIPE_RUN_ID"
	EnvJobName      = "PIPE_JOB_NAME"
	EnvJobNamespace = "PIPE_JOB_NAMESPACE"
)

var notID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// JobOf is the job a run belongs to: flagID (pipe run --run-id), else
// $PIPE_RUN_ID, else the PyTorchJob's (PIPE_JOB_NAMESPACE and
// PIPE_JOB_NAME: pytorchjob-NAMESPACE-NAME), else SLURM's job
// (SLURM_JOB_ID, an array's task as ARRAYJOB_TASK: slurm-ID), else
// torchrun's rendezvous id (TORCHELASTIC_RUN_ID, unless torchrun's
// default "none": torchrun-ID); none for a run started by hand. Each
// stays the same over every restart of its job, by its launcher or a
// container's restart, which is what lets a restart find its own run.
// An id given that cannot name a folder is an error.
func JobOf(getenv func(string) string, flagID string) (folder.Job, error) {
	given := func(id, from string) (folder.Job, error) {
		j := folder.Job{ID: id, From: from}
		return j, folder.CheckJobID(id)
	}
	if flagID != "" {
		return given(flagID, "--run-id")
	}
	if id := strings.TrimSpace(getenv(EnvRunID)); id != "" {
		return given(id, EnvRunID)
	}
	if name := strings.TrimSpace(getenv(EnvJobName)); name != "" {
		ns := strings.TrimSpace(getenv(EnvJobNamespace))
		if ns == "" {
			ns = "default"
		}
		return given("pytorchjob-"+ns+"-"+name, fmt.Sprintf("PyTorchJob %s in namespace %s", name, ns))
	}
	if id := strings.TrimSpace(getenv("SLURM_JOB_ID")); id != "" {
		from := "SLURM_JOB_ID=" + id
		if a, t := getenv("SLURM_ARRAY_JOB_ID"), getenv("SLURM_ARRAY_TASK_ID"); a != "" && t != "" {
			id, from = a+"_"+t, fmt.Sprintf("SLURM_ARRAY_JOB_ID=%s, SLURM_ARRAY_TASK_ID=%s", a, t)
		}
		return given("slurm-"+id, from)
	}
	if id := strings.TrimSpace(getenv("TORCHELASTIC_RUN_ID")); id != "" && id != "none" {
		clean := strings.Trim(notID.ReplaceAllString(id, "-"), "-.")
		if len(clean) > 100 {
			clean = clean[:100]
		}
		return given("torchrun-"+clean, "TORCHELASTIC_RUN_ID="+id)
	}
	return folder.Job{}, nil
}
