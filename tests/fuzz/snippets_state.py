"""Snippets of the randomized tester that work on Python state: objects the program reads, changes and makes, and
side effects on the outside world (split from ``tests.fuzz.snippets``, whose docstring says what a snippet is)."""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

# ---------------------------------------------------------------- objects

_READ_FORMS = (
    "{obj}.{name}", "{obj}.{name}", "vars({obj})['{name}']", "{obj}.__dict__.get('{name}', 0)",
    "object.__getattribute__({obj}, '{name}')", "operator.attrgetter('{name}')({obj})", "getattr({obj}, '{name}')",
)  # fmt: skip
_WRITE_FORMS = (
    "{obj}.{name} = {value}", "{obj}.{name} = {value}", "setattr({obj}, '{name}', {value})",
    "{obj}.__setattr__('{name}', {value})", "object.__setattr__({obj}, '{name}', {value})",
)  # fmt: skip

_CONVERTIBLE = """class _Conv{u}:
    def __init__(self):
        self.k, self.mode, self.calls = 1, 'a', 0

    def __float__(self):
        self.calls += 1
        return self.k + 0.5

    def __index__(self):
        self.calls += 1
        return self.k

    def __str__(self):
        self.calls += 1
        return self.mode * (self.k + 1)

    def __format__(self, spec):
        return format(self.mode, spec)


class _BigMeta{u}(type):
    def __instancecheck__(cls, inst):
        return getattr(inst, 'k', 0) > 1


class _Big{u}(metaclass=_BigMeta{u}):
    pass


cfg{u} = _Conv{u}()"""
_CONVERSION_FORMS = (
    "acc = acc * float(cfg{u})", "acc = acc + len(range(cfg{u}))", "ret.append([0, 1, 2, 3][cfg{u}])",
    "ret.append(str(cfg{u}))", "ret.append(f'{cfg{u}}|{cfg{u}:>3}')", "if f'{cfg{u}!s}' == 'aa':\n    acc = acc + 1",
    "ret.append(hex(cfg{u}) + repr(str(cfg{u})))", "ret.append((1, 2, 3)[:cfg{u}])\nret.append(cfg{u}.calls)",
    "ret.append('%s-%d' % (cfg{u}, cfg{u}))", "ret.append('{0}|{0.mode}'.format(cfg{u}))",
    "if isinstance(cfg{u}, _Big{u}):\n    acc = acc * 2", "ret.append([0] * cfg{u})",
)  # fmt: skip

_DATACLASS_MAPPING = """LOG{u} = []


def _post_init{u}(self):
    LOG{u}.append(self.n)
    self.value = self.value * 2
    for k in ("value", "n"):
        self[k] = getattr(self, k)


_Out{u} = dataclasses.make_dataclass(  # the decorator would read this module's annotations, which are strings here
    "_Out{u}",
    [(name, object, dataclasses.field(default=None)) for name in ("value", "n")],
    bases=(collections.OrderedDict,),
    namespace={"__post_init__": _post_init{u}},
)"""


def objects(rng, ctx):
    choice = rng.random()
    if choice < 0.2:
        return _s(
            "objects", "owner's number attribute changed", "acc = acc * {M}.scale",
            mutations=["m.scale = 3.0", "m.scale = -0.0", "m.scale = 2", "m.scale = float('nan')", "m.scale = 2.0"],
            needs={"owner"},
        )  # fmt: skip
    if choice < 0.35:
        return _s(
            "objects", "training flag changed", "if {M}.training:\n    acc = acc + 1\nelse:\n    acc = acc - 1",
            mutations=["m.train(False)", "m.train(True)"], needs={"owner"},
        )  # fmt: skip
    if choice < 0.5:
        return _s(
            "objects", "Dropout.p changed (0 or 1)", "if acc.is_floating_point():\n    acc = {M}.drop(acc)",
            mutations=["m.drop.p = 1.0", "m.drop.p = 0.0", "m.train(False)", "m.train(True)"], needs={"owner"},
        )  # fmt: skip
    if choice < 0.6:
        return _s(
            "objects", "owner's string attribute changed", "if {M}.mode == 'sum':\n    acc = acc.sum()\nret.append({M}.mode)",
            mutations=["m.mode = 'mean'", "m.mode = 'sum'"], needs={"owner"},
        )  # fmt: skip
    if choice < 0.64:  # read through the object's own dunders, which C code calls (Note [Conversions interpreted]);
        # the form from ``choice``'s digits, which draws nothing
        body = _CONVERSION_FORMS[int(choice * 1_000_000) % len(_CONVERSION_FORMS)]
        return _s(
            "objects", "an object's __float__/__index__/__str__/__format__/__instancecheck__ reading its changed attributes", body,
            setup=_CONVERTIBLE, mutations=["cfg{u}.k = 2", "cfg{u}.mode = 'b'", "cfg{u}.k = 0", "cfg{u}.mode = 'a'"],
        )  # fmt: skip
    if choice < 0.8:
        return _s(
            "objects", "owner's Linear changed", "ret.append({M}.lin(x.to(torch.float32)))",
            mutations=[
                "m.lin.weight.data.mul_(2)", "m.lin.bias = None", "m.lin = torch.nn.Linear(4, 4)",
                "m.lin.weight.requires_grad_(False)", "m.lin.weight = torch.nn.Parameter(torch.ones(4, 4))",
            ],
            needs={"owner", "lastdim4"},
        )  # fmt: skip
    if choice < 0.82:  # objects the program makes from constants: new on each call; one object held twice is one
        body = _pick(rng, ("o{u} = types.SimpleNamespace(tag='t', items=[1])\nret.append(o{u})\nret.append([o{u}])",
                           "ret.append({1, 2})", "ret.append(frozenset({'a'}))", "l{u} = [1, 2]\nret.append((l{u}, l{u}))",
                           "d{u} = {'k': []}\nret.append(d{u})\nret.append(d{u}['k'])",
                           "ret.append(collections.deque([acc * 2, 1], maxlen=3))", "ret.append(bytearray(b'ab'))"))  # fmt: skip
        if rng.random() < 0.3:  # slots: no __dict__ to rebuild the object from
            return _s("objects", "objects the program makes", "ret.append(Slots{u}(acc * 2, [n]))", needs={"n"},
                      setup="class Slots{u}:\n    __slots__ = ('t', 'n')\n\n    def __init__(self, t, n):\n        self.t, self.n = t, n")  # fmt: skip
        return _s("objects", "objects the program makes", body)
    if choice < 0.83:  # an object the program makes from a number of the call, returned or stored outside
        body = _pick(rng, ("ret.append(types.SimpleNamespace(v=n + 1, w=[n]))", "OBJS{u}.append(types.SimpleNamespace(v=n * 2))",
                           "ret.append(types.SimpleNamespace(n=n, shape=acc.shape))"))  # fmt: skip
        return _s(
            "objects", "an object made from an int of the call", body, setup="OBJS{u} = []",
            state=("OBJS{u}",), needs={"n"}, n_pool="int", mutations=["OBJS{u}.clear()"],
        )  # fmt: skip
    if choice < 0.85:
        return _s(
            "objects", "owner's method replaced", "acc = {M}.twice(acc)",
            mutations=[
                "type(m).twice = lambda self, a: a * 3", "m.twice = lambda a: a - 1", "del m.twice",
                "type(m).twice = lambda self, a: a * 2",
            ],
            needs={"owner"},
        )  # fmt: skip
    if choice < 0.87:  # a class attribute reached through an instance, not through a global: read and replayed
        return _s(
            "objects", "class attribute through type(obj)",
            "type(k{u}).hits += 1\nret.append(type(k{u}).hits)\nret.append(k{u}.__class__.hits * 2)",
            setup="class _K{u}:\n    hits = 0\n\n\nk{u} = _K{u}()", mutations=["_K{u}.hits = 10", "type(k{u}).hits = -1"],
        )  # fmt: skip
    if choice < 0.9:
        return _s(
            "objects", "owner's buffer changed", "acc = acc + {M}.buf",
            mutations=["m.buf.add_(1)", "m.buf = torch.zeros(())", "m.buf = torch.ones((), dtype=torch.float64)"],
            needs={"owner"},
        )  # fmt: skip
    if rng.random() < 0.5:  # the program catches the absence: a prologue's read that raises is a miss
        return _s(
            "objects", "attribute whose absence the program catches",
            "try:\n    acc = acc + cfg{u}.extra\nexcept AttributeError:\n    acc = acc - 1",
            setup="class _Cfg{u}:\n    pass\ncfg{u} = _Cfg{u}()\ncfg{u}.extra = 0.5",
            mutations=["del cfg{u}.extra", "cfg{u}.extra = 2", "del cfg{u}.extra", "cfg{u}.extra = 0.5"],
        )  # fmt: skip
    # the attribute read as ``obj.name`` or through what reads it natively (Note [Reads and writes through an
    # object's __dict__], [Attribute slots called by name], [Operator getters]); the form from ``choice``'s digits,
    # which draws nothing (the seeds' other programs stay as they were)
    shift = _READ_FORMS[int(choice * 10_000) % len(_READ_FORMS)].format(obj="cfg{u}", name="shift")
    return _s(
        "objects", "attribute of a plain global object changed", f"acc = acc + {shift}\nif cfg{{u}}.flag:\n    acc = acc * 2",
        setup="class _Cfg{u}:\n    pass\ncfg{u} = _Cfg{u}()\ncfg{u}.shift = 1\ncfg{u}.flag = True",
        mutations=["cfg{u}.shift = 2.5", "cfg{u}.flag = False", "cfg{u}.shift = -0.0", "cfg{u}.flag = True", "del cfg{u}.flag"],
    )  # fmt: skip


# ---------------------------------------------------------------- Python side effects


def side_effects(rng, ctx):
    choice = rng.random()
    if choice < 0.2:
        item = _pick(rng, ("n", "acc.shape", "acc.ndim", "acc", "(n, s)"))
        needs = {"n"} | ({"s"} if "s" in item.replace("shape", "") else set())
        extra = "\nacc = acc * len(LOG{u})" if rng.random() < 0.4 else ""
        return _s("side_effects", f"append {item} to a global list", f"LOG{{u}}.append({item}){extra}",
                  setup="LOG{u} = []", state=("LOG{u}",), needs=needs, mutations=["LOG{u}.clear()"])  # fmt: skip
    if choice < 0.35:
        return _s("side_effects", "set items of a global dict", "D{u}['last'] = n\nD{u}[len(D{u})] = acc.ndim",
                  setup="D{u} = {}", state=("D{u}",), needs={"n"})  # fmt: skip
    if choice < 0.55:
        body = _pick(rng, (
            "print('acc', tuple(acc.shape), n)", "print(s, end='|')", "print(f'n={n} ndim={acc.ndim}')",
            "print('dtype', acc.dtype)", "print(n, s, sep=',')",
        ))  # fmt: skip
        needs = {x for x in ("n", "s") if f"{x}," in body or f"{x})" in body or "{" + x in body or f" {x}" in body}
        return _s("side_effects", "print", body, needs=needs or {"n"})
    if choice < 0.62:
        return _s("side_effects", "warnings", _pick(rng, (
            "warnings.warn(f'fuzz: n={n}')",
            "warnings.warn('fuzz: deprecated', FutureWarning)\nacc = acc + 1",
            "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n    warnings.warn('fuzz: hidden')\n"
            "warnings.warn('fuzz: shown', RuntimeWarning)",
        )), needs={"n"})  # fmt: skip
    if choice < 0.7:
        count = _WRITE_FORMS[int(choice * 10_000) % len(_WRITE_FORMS)].format(obj="o{u}", name="count", value="o{u}.count + 1")
        return _s("side_effects", "set attributes on a global object", f"{count}\no{{u}}.last = n",
                  setup="class _O{u}:\n    pass\no{u} = _O{u}()\no{u}.count = 0", state=("o{u}",), needs={"n"})  # fmt: skip
    if choice < 0.8:
        return _s("side_effects", "rebind a global (global statement)", "global CNT{u}\nCNT{u} = CNT{u} + 1\nret.append(CNT{u})",
                  setup="CNT{u} = 0", state=("CNT{u}",))  # fmt: skip
    if choice < 0.85:
        return _s(
            "side_effects", "mutate an argument list", "lst.append(acc.ndim)\nret.append(len(lst))", needs={"lst"}
        )
    if choice < 0.87:  # effects, then a raise (Note [A program that raises]): eager's effects happen on failing calls
        return _s("side_effects", "raise after effects", _pick(rng, (
            "LOG{u}.append(n)\nif len(LOG{u}) % 3 == 2:\n    raise ValueError(f'fuzz: call {len(LOG{u})}')",
            "LOG{u}.append(acc.ndim)\nprint('fuzz: before', len(LOG{u}))\nassert len(LOG{u}) % 4 != 3, 'fuzz: fourth'",
            "LOG{u}.append(1)\nacc = acc + torch.rand(())\nif acc.ndim == 1:\n    raise RuntimeError('fuzz: 1-d')",
        )), setup="LOG{u} = []", state=("LOG{u}",), needs={"n"}, mutations=["LOG{u}.clear()"])  # fmt: skip
    if choice < 0.88:  # effects, then an op that fails at run time (an index out of range): eager's effects are made
        body = _pick(rng, (
            "LOG{u}.append(n)",
            "if len(LOG{u}) > 50:\n    LOG{u}.clear()\nLOG{u}.append(acc.ndim)",
            "D{u}[n] = acc.ndim\nLOG{u}.extend([n, n])",
        ))  # fmt: skip
        fail = "\nidx{u} = torch.full((1,), 10**6 if n % 2 else 0)\n_ = acc.reshape(-1)[idx{u}] if acc.numel() else acc"
        return _s("side_effects", "effects, then a failure at run time", body + fail, setup="LOG{u} = []\nD{u} = {}",
                  state=("LOG{u}", "D{u}"), needs={"n"}, mutations=["LOG{u}.clear()"])  # fmt: skip
    if choice < 0.89:  # an argument returned inside an object the program makes (a model output holding its cache)
        return _s("side_effects", "return an argument inside a new object", _pick(rng, (
            "lst.append(acc.ndim)\nret.append(types.SimpleNamespace(items=lst, total=acc.sum()))",
            "ret.append(collections.OrderedDict(items=lst, n=len(lst)))",
            "ret.append({'items': [lst], 'acc': acc})",
        )), needs={"lst"})  # fmt: skip
    if choice < 0.9:  # a dataclass mapping (a transformers ModelOutput) whose __post_init__ changes a field and logs
        return _s("side_effects", "return a dataclass mapping that changes a field", "ret.append(_Out{u}(acc + 1, n))",
                  setup=_DATACLASS_MAPPING, state=("LOG{u}",), needs={"n"}, mutations=["LOG{u}.clear()"])  # fmt: skip
    return _s(
        "side_effects", "set an attribute of the owner", "{M}.calls = {M}.calls + 1", needs={"owner"}, state=("m",)
    )
