package sweep

import (
	"fmt"
	"math"
	"sort"
)

// A Stopper decides at an epoch's end whether a trial trains on. Scores
// are lower-better (see Observation). seen holds every trial's scores by
// epoch, this one's included up to epoch, the finished and stopped
// trials' as well as the running ones'.
type Stopper interface {
	// Stop says whether trial id, at the end of epoch (1-based) with
	// score, stops, and why.
	Stop(id, epoch int, score float64, seen map[int][]float64) (bool, string)
}

// NoStop never stops a trial.
type NoStop struct{}

// Stop implements Stopper.
func (NoStop) Stop(int, int, float64, map[int][]float64) (bool, string) { return false, "" }

// ASHA is asynchronous successive halving (Li et al., "A System for
// Massively Parallel Hyperparameter Tuning", MLSys 2020) in its stopping
// form: rungs at epochs Rung·Eta^k; a trial that reaches a rung goes on
// only when its score is in the top 1/Eta (rounded up) of the scores of
// every trial that has reached that rung so far, itself included. The
// first to reach a rung always goes on; later ones are held to those
// before them, without waiting for the rest.
type ASHA struct{ Rung, Eta int }

// IsRung says whether epoch is one of the rungs.
func (a ASHA) IsRung(epoch int) bool {
	r := max(a.Rung, 1)
	for ; r <= epoch; r *= max(a.Eta, 2) {
		if r == epoch {
			return true
		}
	}
	return false
}

// Stop implements Stopper.
func (a ASHA) Stop(id, epoch int, score float64, seen map[int][]float64) (bool, string) {
	if !a.IsRung(epoch) {
		return false, ""
	}
	var at []float64
	for tid, s := range seen {
		if tid != id && len(s) >= epoch {
			at = append(at, s[epoch-1])
		}
	}
	at = append(at, score)
	sort.Float64s(at)
	keep := int(math.Ceil(float64(len(at)) / float64(max(a.Eta, 2))))
	cutoff := at[keep-1]
	if score <= cutoff {
		return false, ""
	}
	return true, fmt.Sprintf("asha: rung at epoch %d, not in the top %d of %d", epoch, keep, len(at))
}

// Median stops a trial whose score at an epoch from Rung on is worse
// than the median of the other trials' scores at that epoch, once at
// least two others have reached it (Golovin et al., "Google Vizier",
// KDD 2017, the median stopping rule on the epoch's value).
type Median struct{ Rung int }

// Stop implements Stopper.
func (m Median) Stop(id, epoch int, score float64, seen map[int][]float64) (bool, string) {
	if epoch < max(m.Rung, 1) {
		return false, ""
	}
	var at []float64
	for tid, s := range seen {
		if tid != id && len(s) >= epoch {
			at = append(at, s[epoch-1])
		}
	}
	if len(at) < 2 {
		return false, ""
	}
	sort.Float64s(at)
	med := at[len(at)/2]
	if len(at)%2 == 0 {
		med = (at[len(at)/2-1] + at[len(at)/2]) / 2
	}
	if score > med {
		return true, fmt.Sprintf("median: epoch %d worse than the median of %d others", epoch, len(at))
	}
	return false, ""
}
