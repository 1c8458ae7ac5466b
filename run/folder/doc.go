// Package folder is a run's folder and the rules that keep two runs'
// files apart: the lock a run (or a sweep) holds while it writes, the
// job record that gives a folder to one job, the claim that tells an
// earlier run's checkpoints from another pipeline's and has the first
// checkpoint replace them (stale), the pipeline's latest, files written
// atomically, and the checkpoint file's framing (header, checksum,
// metadata, tensor data), verified before anything is resumed.
//
// It knows no model and no engine: package run gives it the metadata
// to frame and the identity to compare, and reads the tensors itself.
// Its neighbours: run (the run loop, which places and drives a Folder),
// sweep (which takes the same lock for a sweep's folder).
// Rules and reasons: docs/design/checkpoint-files.md, run-identity.md.
package folder
