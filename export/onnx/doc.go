// Package onnx writes a trained model (run.Trained) as an ONNX model: its
// graph (stdlib.Graph) lowered to ONNX operators of one opset (Opset, 17 by
// default), its weights as initializers under the checkpoint's names,
// batchnorm folded into the conv before it where the plan folds it for
// inference, a dynamic batch axis, and the regression target's restoring
// scale as a final Mul and Add, so that the file computes what
// run.Trained.Predict computes. The model's metadata_props carry the
// pipeline, the class names and the input normalisation the input expects.
//
// The messages are encoded with protowire by onnx.proto's field numbers
// (proto.go), no generated code. cmd/pipe's export command calls Export;
// the tests check files against onnxruntime (internal/onnxtest).
//
// Names, metadata and tests in full: docs/design/onnx-export.md.
package onnx
