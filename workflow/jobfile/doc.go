// Package jobfile writes the job files pipe launch hands to a cluster: an
// sbatch script for SLURM and a Kubeflow PyTorchJob for Kubernetes, each
// decided from a plan (package plan) and recording it, so that the job
// runs `pipe run --plan` on exactly the plan it was written for. It is
// plain data in, bytes out: cmd/pipe parses the flags and writes the
// files; workflow makes the plan.
package jobfile
