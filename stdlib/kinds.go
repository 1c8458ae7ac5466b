package stdlib

import (
	"strings"

	"pipe/lang"
)

// kinds limits an argument to some kinds of its field (lang.ArgSpec.Kinds):
// the checker rejects it with another kind, and completion leaves it out.
func kinds(names ...string) argOpt { return func(a *lang.ArgSpec) { a.Kinds = names } }

// adams are the optimizers of the Adam family, which take beta1, beta2
// and eps.
var adams = []string{"adam", "adamw"}

// kindsNote is what the reference says of an argument limited to some
// kinds: ", sgd only".
func kindsNote(a *lang.ArgSpec) string {
	if len(a.Kinds) == 0 {
		return ""
	}
	return ", " + strings.Join(a.Kinds, " and ") + " only"
}
