// Package tensorboard writes a run's TensorBoard event files: TFRecord
// framing (record.go), the events of a run's steps, epochs and end, and
// the HParams plugin's summaries of its hyper-parameters (writer.go,
// logger.go). The messages are tbpb's, generated from proto/.
// Tags, steps and wall times: docs/design/tensorboard.md.
package tensorboard

//go:generate sh gen.sh
