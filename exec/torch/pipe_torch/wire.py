"""Reading requests and writing replies."""

import math


class Failure(Exception):
    """An error with a kind, reported to pipe as such."""

    def __init__(self, kind, msg, **extra):
        super().__init__(msg)
        self.kind = kind
        self.extra = extra


def finite_json(v):
    """v with its non-finite floats as strings (JSON has no NaN; pipe
    reads "NaN", "Infinity" and "-Infinity" back as numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite_json(x) for x in v]
    return v
