"""Reading requests and writing replies, against the structs of protocol
(generated from engine/torch/protocol.go).

A request's arguments become a Message: a dict whose keys are its Go
struct's fields, a field the JSON left out reading as Go's zero value, and
a key the struct does not have an error. A reply is checked field by field
against its struct before it is written; one that does not fit is replaced
by a failure that says why, so a mismatch shows at once in pipe."""

import json
import math

from . import protocol


class Failure(Exception):
    """An error with a kind (protocol.KINDS), reported to pipe as such."""

    def __init__(self, kind, msg, **extra):
        super().__init__(msg)
        self.kind = kind
        self.extra = extra


class ProtocolError(Failure):
    """A request or a reply that does not fit the protocol's structs."""

    def __init__(self, msg):
        super().__init__("error", "protocol: " + msg)


_SCALARS = {"int": 0, "float": 0.0, "bool": False, "str": ""}
_NONFINITE = ("NaN", "Infinity", "-Infinity")
_parsed = {}


def parse(t):
    """A type of protocol.STRUCTS as (kind, element, nullable): kind is
    "struct" (element its name), "list", "map" (element the values' type)
    or a scalar."""
    p = _parsed.get(t)
    if p is None:
        if t.startswith("*"):
            p = parse(t[1:])[:2] + (True,)
        elif t.startswith("[]"):
            p = ("list", t[2:], True)
        elif t.startswith("["):
            p = ("list", t[t.index("]") + 1:], False)
        elif t.startswith("map[string]"):
            p = ("map", t[len("map[string]"):], True)
        elif t in _SCALARS:
            p = (t, None, False)
        elif t in protocol.STRUCTS:
            p = ("struct", t, False)
        else:
            raise ProtocolError(f"unknown type {t}")
        _parsed[t] = p
    return p


def field(struct, key):
    """The type of struct's field key."""
    t = protocol.STRUCTS[struct].get(key)
    if t is None:
        raise ProtocolError(f"{struct} has no field {key!r}")
    return t


def zero(t):
    """Go's zero value of type t."""
    kind, elem, nullable = parse(t)
    if nullable:
        return None
    if kind == "struct":
        return decode(elem, {})
    if kind == "list":
        return []
    return _SCALARS[kind]


class Message(dict):
    """A struct of the protocol read from JSON (decode)."""

    __slots__ = ("struct",)

    def __missing__(self, key):
        return zero(field(self.struct, key))

    def get(self, key, default=None):
        field(self.struct, key)
        return dict.get(self, key, default)


def decode(struct, obj):
    """obj, a JSON object, as a Message of struct."""
    if isinstance(obj, Message) and obj.struct == struct:
        return obj
    if not isinstance(obj, dict):
        raise ProtocolError(f"{struct} is an object, not {type(obj).__name__}")
    conv, structs = _plan(struct)
    m = Message()
    m.struct = struct
    for k, v in obj.items():
        try:
            t = conv[k]
        except KeyError:
            raise ProtocolError(f"{struct} has no field {k!r}") from None
        dict.__setitem__(m, k, v if t is None or v is None else _value(t, v))
    for k, t in structs:
        if k not in m:
            dict.__setitem__(m, k, zero(t))
    return m


_plans = {}


def _plan(struct):
    """How decode reads struct, worked out once (it is on every step's
    path): each field's type where its value holds a struct to decode,
    None where the JSON value is kept as it is; and the struct-typed
    fields, which a missing key reads as their zero value."""
    p = _plans.get(struct)
    if p is None:
        fields = protocol.STRUCTS[struct]
        conv = {k: (t if _holds_struct(t) else None) for k, t in fields.items()}
        structs = tuple((k, t) for k, t in fields.items() if parse(t)[0] == "struct")
        p = _plans[struct] = (conv, structs)
    return p


def _holds_struct(t):
    kind, elem, _ = parse(t)
    if kind == "struct":
        return True
    return kind in ("list", "map") and _holds_struct(elem)


def _value(t, v):
    if v is None:
        return None
    kind, elem, _ = parse(t)
    if kind == "struct":
        return decode(elem, v)
    if kind == "list" and isinstance(v, list):
        return [_value(elem, x) for x in v]
    if kind == "map" and isinstance(v, dict):
        return {k: _value(elem, x) for k, x in v.items()}
    return v


_ENVELOPE = frozenset(("cmd", "args"))


def read_request(line):
    """A request line's command and its arguments (a Message)."""
    msg = json.loads(line)
    if not isinstance(msg, dict) or not _ENVELOPE.issuperset(msg):
        raise ProtocolError(f"a request is {{cmd, args}}, not {line[:80]!r}")
    cmd = msg.get("cmd")
    struct = protocol.REQUESTS.get(cmd)
    if struct is None:
        raise Failure("error", f"unknown command {cmd!r}")
    return cmd, decode(struct, msg.get("args") or {})


def check(t, v, where):
    """Raises ProtocolError where v is not a value of type t."""
    try:
        _check(t, v)
    except _Misfit as e:
        raise ProtocolError(where + "".join(reversed(e.path)) + e.what) from None


def check_reply(struct, obj, cmd):
    """check of a reply's fields, its "ok" aside."""
    try:
        _check_fields(struct, obj, "ok")
    except _Misfit as e:
        raise ProtocolError(cmd + "".join(reversed(e.path)) + e.what) from None


def _check_fields(struct, v, skip=None):
    """_check of the object v's fields against struct's, key skip aside."""
    fields = protocol.STRUCTS[struct]
    for k, x in v.items():
        if k == skip:
            continue
        ft = fields.get(k)
        if ft is None:
            raise ProtocolError(f"{struct} has no field {k!r}")
        try:
            _check(ft, x)
        except _Misfit as e:
            e.path.append(f".{k}")
            raise


class _Misfit(Exception):
    """A value that does not fit its type: what is wrong, and the path to
    it, innermost first (built only on the way out of a failure: check
    runs on every reply)."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what
        self.path = []


def _check(t, v):
    kind, elem, nullable = parse(t)
    if v is None:
        if nullable:
            return
        raise _Misfit(" is null")
    if kind == "struct":
        if not isinstance(v, dict):
            raise _Misfit(" is not an object")
        _check_fields(elem, v)
    elif kind == "list":
        if not isinstance(v, (list, tuple)):
            raise _Misfit(" is not a list")
        for i, x in enumerate(v):
            try:
                _check(elem, x)
            except _Misfit as e:
                e.path.append(f"[{i}]")
                raise
    elif kind == "map":
        if not isinstance(v, dict):
            raise _Misfit(" is not an object")
        for k, x in v.items():
            try:
                _check(elem, x)
            except _Misfit as e:
                e.path.append(f"[{k!r}]")
                raise
    elif kind == "int":
        if not isinstance(v, int) or isinstance(v, bool):
            raise _Misfit(f" is {v!r}, not an int")
    elif kind == "float":
        if not (isinstance(v, (int, float)) and not isinstance(v, bool)) and v not in _NONFINITE:
            raise _Misfit(f" is {v!r}, not a number")
    elif kind == "bool":
        if not isinstance(v, bool):
            raise _Misfit(f" is {v!r}, not a bool")
    elif not isinstance(v, str):
        raise _Misfit(f" is {v!r}, not a string")


def encode_reply(obj, cmd):
    """The JSON line of the reply obj to the command cmd (None for the
    hello's failure), non-finite floats as strings. A reply that does not
    fit its struct becomes a failure that says why."""
    try:
        if obj.get("ok"):
            struct = protocol.REPLIES.get(cmd)
            if struct is None:
                raise ProtocolError(f"no reply to the command {cmd!r}")
            check_reply(struct, obj, cmd)
        else:
            check(protocol.FAILURE, obj, "failure")
            if obj.get("kind") not in protocol.KINDS:
                raise ProtocolError(f"failure kind {obj.get('kind')!r}")
    except ProtocolError as e:
        obj = {"ok": False, "kind": "error", "error": f"{e} (in the reply to {cmd})"}
    try:
        return json.dumps(obj, allow_nan=False)
    except ValueError:  # a non-finite float: the rare case gets the walk
        return json.dumps(finite_json(obj), allow_nan=False)


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
