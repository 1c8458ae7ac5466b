package stdlib

import "pipe/lang"

// SweepMetrics are what a sweep may rank its trials by: the validation
// loss, or a metric the train block measures.
var SweepMetrics = append([]string{"loss"}, metrics...)

// sweepBlock is the sweep block: how many trials, how they are chosen and
// stopped, and one line per parameter, a --set path and its range
// (docs/design/sweeps.md).
func sweepBlock() *lang.BlockSpec {
	path := func() *lang.ArgSpec {
		return arg("path", lang.TString, `The value to vary, as --set names it: "train.lr", "model.NAME.dense[0].units".`, positional, required)
	}
	repeat := func(f *lang.FieldSpec) *lang.FieldSpec { f.Repeatable = true; return f }
	return &lang.BlockSpec{Name: "sweep", Once: true,
		Doc: "A hyperparameter search run by pipe sweep: each trial is the file with one --set per parameter, planned before it starts, trained in a process of its own.",
		Fields: []*lang.FieldSpec{
			requiredField("trials", "How many trials the sweep runs.",
				arg("trials", lang.TInt, "At least 1.", positional, required, atLeast(1))),
			field("parallel", "How many trials train at once, each a process with its share of the threads.",
				arg("parallel", lang.TInt, "At least 1.", positional, required, atLeast(1), def("1"))),
			field("metric", "What ranks the trials: the last epoch's validation loss or metric.",
				arg("metric", lang.TEnum, "loss or one of train's metrics: accuracy, miou, mae, rmse, psnr, f1.", positional, required, enum(SweepMetrics...), def("loss")),
				arg("goal", lang.TEnum, "min | max; loss, mae and rmse are minimised, the others maximised, when left out.", positional, enum("min", "max"))),
			field("sampler", "How trials' values are chosen: random, or tpe (the tree-structured Parzen estimator, Bergstra et al. 2011) after random startup trials.",
				arg("sampler", lang.TEnum, "random | tpe.", positional, required, enum("random", "tpe"), def("tpe")),
				arg("startup", lang.TInt, "tpe: random trials before the model is used; max(3, trials/4) when left out.", atLeast(1)),
				arg("gamma", lang.TFloat, "tpe: the fraction of finished trials counted good, in (0, 1).", above(0), below(1), def("0.25"))),
			field("early_stop", "Whether bad trials are stopped at epoch boundaries: asha (asynchronous successive halving) or median (below the median of the other trials at the same epoch).",
				arg("early_stop", lang.TEnum, "none | asha | median.", positional, required, enum("none", "asha", "median"), def("none")),
				arg("rung", lang.TInt, "asha: the epoch of the first rung (rungs at rung·eta^k); median: the first epoch judged.", atLeast(1), def("1")),
				arg("eta", lang.TInt, "asha: the reduction factor; a trial goes past a rung when in the top 1/eta of those that reached it.", atLeast(2), def("3"))),
			field("seed", "The seed of the sampler; the file's seed when left out.",
				arg("seed", lang.TInt, "A non-negative integer.", positional, required, atLeast(0))),
			repeat(field("uniform", "A parameter drawn uniformly between two numbers.",
				path(),
				arg("low", lang.TFloat, "The lowest value.", positional, required),
				arg("high", lang.TFloat, "The highest value.", positional, required))),
			repeat(field("loguniform", "A parameter whose logarithm is drawn uniformly: learning rates, weight decay.",
				path(),
				arg("low", lang.TFloat, "The lowest value, greater than 0.", positional, required, above(0)),
				arg("high", lang.TFloat, "The highest value.", positional, required, above(0)))),
			repeat(field("int", "An integer parameter drawn between two integers, both included.",
				path(),
				arg("low", lang.TInt, "The lowest value.", positional, required),
				arg("high", lang.TInt, "The highest value.", positional, required),
				arg("log", lang.TBool, "Draw the logarithm uniformly (widths).", def("false")))),
			repeat(field("choice", "A parameter that takes one of the listed values.",
				path(),
				arg("values", lang.TList, "The values as the file would write them: [64, 128, 256], [adam, sgd].", positional, required, elem(lang.TWord)))),
		}}
}
