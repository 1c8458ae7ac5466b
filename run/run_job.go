package run

import "pipe/run/folder"

// Run identity: a run that a job started is that job's, and its folder
// records the job (folder.JobFile). Reasons: docs/design/run-identity.md.

// ownJob checks, under the folder's lock and before the run trains, that
// the folder is this job's, and records the job in it; it returns false
// (with a diagnostic) when the folder is another job's or the record
// cannot be written. A run of no job that replaces the folder's
// checkpoints (claim) takes the record away with them (clearStale).
func (r *runner) ownJob() bool {
	if r.rc.place == nil || r.rc.place.Job.ID == "" {
		return true
	}
	job := r.rc.place.Job
	dir := r.set.ckptDir
	if err := folder.CheckJob(dir, job); err != nil {
		r.errorf(nil, CodeOtherJob, "the run folder is another job's",
			"%v. A job continues its own run and no other's, so nothing was trained: give this job a folder of its own (leave --checkpoint-dir out, and it gets out/%s/runs/%s), or give the other job's id with --run-id to continue its run.",
			err, r.p.Pipeline, job.ID)
		return false
	}
	if err := folder.RecordJob(dir, job); err != nil || !r.publish(folder.JobFile) {
		if err == nil {
			return false // publish said why
		}
		r.errorf(nil, CodeCheckpoint, "cannot record the run's job", "%s. Nothing was trained. Give a folder that can be written with --checkpoint-dir.", diskFull(err))
		return false
	}
	return true
}

// jobID is the id of the job the run belongs to, "" for none.
func (r *runner) jobID() string {
	if r.rc.place == nil {
		return ""
	}
	return r.rc.place.Job.ID
}
