// Package metric computes the scores a pipeline asks for (accuracy, miou,
// f1, mae, rmse, psnr) from a model's outputs and the batches' targets and
// masks. It knows nothing of models or data sources: exec feeds it the
// outputs of Model.Eval, batch by batch, and reads the values at the end
// of an evaluation. It imports only the standard library.
//
// A Task says how outputs relate to targets:
//
//   - Classes: outputs hold K scores per position ([K] or [K, H, W]); the
//     prediction is the arg-max over K. Targets are class indices, one per
//     position, or one value per output element (probabilities or one-hot),
//     whose arg-max is the class.
//   - Binary: every output element is a score against a threshold (0 for
//     logits, ½ for probabilities); a target element is positive when it is
//     at least ½.
//   - Regression: outputs and targets are compared element by element.
//
// Classes and Binary fill a confusion matrix, from which accuracy (the
// fraction of positions right), miou (the mean over classes present in
// the predictions or the targets of TP / (TP + FP + FN)) and f1 (for
// Binary the positive class's 2TP / (2TP + FP + FN), for Classes the mean
// over the classes present) follow. Regression sums absolute and squared
// errors for mae and rmse, and psnr is 10·log10(R² / mean squared error)
// in decibels, R the range of the targets measured (their greatest less
// their least, in the target's units: the peak a super-resolution or
// image-to-image model is scored against). Positions whose mask is 0 are left out of every
// metric.
package metric
