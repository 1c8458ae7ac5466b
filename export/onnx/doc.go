// Package onnx writes a trained model (run.Trained) as an ONNX model: its
// graph (stdlib.Graph) lowered to ONNX operators of one opset (Opset, 17 by
// default), its weights as initializers under the checkpoint's names,
// batchnorm folded into the conv before it where the plan folds it for
// inference, a dynamic batch axis, and the regression target's restoring
// scale as a final Mul and Add, so that the file computes what
// exec.Trained.Predict computes.
//
// Initializers keep the checkpoint's names ("conv1.weight"); a conv with a
// batchnorm folded in has "conv1.weight+batchnorm1" and
// "conv1.bias+batchnorm1" instead. The model's metadata_props say the
// pipeline, the model, the loss, the class names and the input
// normalisation (pipe.input_mean, pipe.input_std) the input expects to
// have been applied.
//
// The messages are encoded with google.golang.org/protobuf's protowire by
// the field numbers of onnx.proto (proto.go): eight message types, no
// generated code. cmd/pipe's export command calls Export. The tests check
// files against onnxruntime (internal/onnxtest, bench/onnx/run.js): here
// the opsets, a refused op and layers no example uses, on seeded weights;
// in cmd/pipe every example, trained two steps on its data and exported
// by pipe export, on the first batch its evaluation reads.
package onnx
