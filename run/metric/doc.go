// Package metric computes the scores a pipeline asks for (accuracy, miou,
// f1, mae, rmse, psnr) from a model's outputs and the batches' targets and
// masks. It knows nothing of models or data sources: package run feeds it
// the outputs of Model.Eval, batch by batch, and reads the values at the
// end of an evaluation. It imports only the standard library.
//
// A Task says how outputs relate to targets: Classes (the arg-max over K
// scores per position), Binary (every output element against a threshold)
// or Regression (element by element). Classes and Binary fill a confusion
// matrix; Regression sums absolute and squared errors. Positions whose
// mask is 0 are left out of every metric.
//
// Tasks and formulas: docs/design/metrics.md.
package metric
