import dataclasses

from helpers import assert_same

from thunder.core.interpreter import interpret, is_jitting_with_raise


def test_class_defined_at_runtime_with_methods():
    def f(x):
        class Point:
            scale = 2

            def __init__(self, x):
                self.x = x

            def double(self):
                return self.x * self.scale

            @staticmethod
            def s(v):
                return v + 1

            @classmethod
            def c(cls):
                return cls.scale

        p = Point(x)
        return p.double(), Point.s(1), Point.c(), Point.__name__, Point.__qualname__

    assert_same(f, 5)


def test_zero_arg_super():
    def f():
        class Base:
            def greet(self):
                return "base"

        class Child(Base):
            def greet(self):
                return "child+" + super().greet()

        return Child().greet()

    assert_same(f)


def test_super_in_init_and_class_cell():
    class A:
        def __init__(self, v):
            self.v = v

    class B(A):
        def __init__(self, v):
            super().__init__(v * 2)
            self.cls = __class__

    def f():
        b = B(3)
        return b.v, b.cls is B

    assert_same(f)


def test_init_subclass():
    def f():
        registry = []

        class Base:
            def __init_subclass__(cls, tag=None, **kw):
                super().__init_subclass__(**kw)
                registry.append((cls.__name__, tag))

        class Child(Base, tag="t"):
            pass

        return registry, Child.__mro__[1] is Base

    assert_same(f)


def test_metaclass():
    def f():
        class Meta(type):
            def __new__(mcls, name, bases, ns):
                ns["added"] = name.lower()
                return super().__new__(mcls, name, bases, ns)

        class C(metaclass=Meta):
            pass

        return C.added, type(C) is Meta

    assert_same(f)


def test_properties_and_descriptors():
    class Desc:
        def __get__(self, obj, objtype=None):
            return "desc" if obj is not None else "cls"

    class C:
        d = Desc()

        def __init__(self):
            self._v = 1

        @property
        def v(self):
            return self._v * 10

        @v.setter
        def v(self, value):
            self._v = value

    def f():
        c = C()
        c.v = 5
        return c.v, c.d, C.d

    assert_same(f)


def test_property_getter_is_interpreted():
    class C:
        @property
        def p(self):
            return is_jitting_with_raise()

    def f(c):
        return c.p

    assert interpret(f)(C()) is True


def test_property_attribute_error_falls_back_to_getattr():
    class C:
        @property
        def p(self):
            raise AttributeError("nope")

        def __getattr__(self, name):
            return "fallback:" + name

    assert_same(lambda: C().p)


def test_dataclasses():
    def f():
        @dataclasses.dataclass
        class P:
            x: int
            y: int = 3

            def total(self):
                return self.x + self.y

        p = P(1)
        return p, p.total(), P(1, 3) == p, dataclasses.asdict(p)

    r = interpret(f)()
    n = f()
    assert repr(r[0]) == repr(n[0]) and r[1:] == n[1:]


def test_operator_overloading():
    class V:
        def __init__(self, x):
            self.x = x

        def __add__(self, o):
            return V(self.x + (o.x if isinstance(o, V) else o))

        def __radd__(self, o):
            return V(o + self.x)

        def __eq__(self, o):
            return isinstance(o, V) and o.x == self.x

        def __lt__(self, o):
            return self.x < o.x

        def __neg__(self):
            return V(-self.x)

        def __bool__(self):
            return self.x != 0

        def __len__(self):
            return abs(self.x)

        def __getitem__(self, i):
            return self.x * i

        def __contains__(self, i):
            return i == self.x

        __hash__ = None

    def f(a, b):
        return (
            (a + b).x,
            (1 + a).x,
            (a + 2).x,
            a == b,
            a != b,
            a < b,
            b > a,
            (-a).x,
            bool(a),
            not V(0),
            a[3],
            1 in a,
            len(a),
        )

    assert_same(f, V(1), V(2))


def test_binary_op_unsupported_message():
    class A:
        pass

    assert_same(lambda: A() + 1)
    assert_same(lambda: A() < A())


def test_reflected_subclass_priority():
    class A:
        def __add__(self, o):
            return "A.add"

        def __radd__(self, o):
            return "A.radd"

    class B(A):
        def __radd__(self, o):
            return "B.radd"

    assert_same(lambda: A() + B())


def test_inplace_operator_fallback():
    class A:
        def __init__(self):
            self.v = []

        def __iadd__(self, o):
            self.v.append(o)
            return self

    class B:
        def __add__(self, o):
            return "added"

    def f():
        a = A()
        a += 1
        b = B()
        b += 1
        return a.v, b

    assert_same(f)


def test_dunder_bool_interpreted():
    class C:
        def __bool__(self):
            assert is_jitting_with_raise()
            return False

    def f(c):
        if c:
            return 1
        return -1

    assert interpret(f)(C()) == -1


def test_custom_iterator_protocol():
    class Count:
        def __init__(self, n):
            self.n = n
            self.i = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.i >= self.n:
                raise StopIteration
            self.i += 1
            return self.i

    def f():
        return [x for x in Count(3)], list(Count(2))

    assert_same(f)


def test_getitem_iteration_protocol():
    class Seq:
        def __getitem__(self, i):
            if i >= 3:
                raise IndexError
            return i

    assert_same(lambda: list(Seq()))


def test_class_with_init_returning_value():
    class C:
        def __init__(self):
            return 1

    assert_same(lambda: C())


def test_class_without_init_rejects_args():
    class C:
        pass

    assert_same(lambda: C(1))


def test_custom_new():
    class Singleton:
        _inst = None

        def __new__(cls, *args):
            if cls._inst is None:
                cls._inst = super().__new__(cls)
            return cls._inst

        def __init__(self, v):
            self.v = v

    def f():
        a = Singleton(1)
        b = Singleton(2)
        return a is b, a.v

    assert_same(f)


def test_builtin_subclass():
    class MyList(list):
        def total(self):
            return sum(self)

    def f():
        m = MyList([1, 2])
        m.append(3)
        return m.total(), len(m), m + [4]

    assert_same(f)


def test_class_body_annotations_and_names():
    def f():
        class C:
            a: int = 1
            b = a + 1
            items = [a, b]

        return C.__annotations__, C.b, C.items

    assert_same(f)


def test_class_attribute_closure_classderef():
    def f():
        x = "outer"

        class C:
            y = x

        return C.y

    assert_same(f)


def test_builtin_bool_len_iter_next_interpret_dunders():
    class X:
        def __bool__(self):
            return is_jitting_with_raise()

        def __len__(self):
            return 3 if is_jitting_with_raise() else 0

        def __iter__(self):
            assert is_jitting_with_raise()
            return self

        def __next__(self):
            assert is_jitting_with_raise()
            raise StopIteration

    x = X()
    assert interpret(bool)(x) is True
    assert interpret(len)(x) == 3

    def f(x):
        return next(iter(x), "default")

    assert interpret(f)(x) == "default"


def test_dunder_bool_is_looked_up_on_the_class():
    class X:
        def __bool__(self):
            return False

    x = X()
    x.__bool__ = lambda: True
    assert interpret(bool)(x) is bool(x) is False


class _Singleton(type):
    instances: dict = {}

    def __call__(cls, *args, **kwargs):
        cls.seen.append(("call", is_jitting_with_raise()))
        if cls not in _Singleton.instances:
            _Singleton.instances[cls] = super().__call__(*args, **kwargs)
        return _Singleton.instances[cls]


class _One(metaclass=_Singleton):
    seen: list = []

    def __init__(self, v):
        self.seen.append(("init", is_jitting_with_raise()))
        self.v = v


def _fresh_singletons():
    _Singleton.instances.clear()
    _One.seen = []
    return _One.seen


def test_metaclass_call_reaching_type_call_through_super_interprets_init():
    def f():
        a, b = _One(1), _One(2)
        return a is b, a.v

    native_seen = _fresh_singletons()
    expected = f()
    seen = _fresh_singletons()
    assert interpret(f)() == expected
    assert [name for name, _ in seen] == [name for name, _ in native_seen] == ["call", "init", "call"]
    assert all(j for _, j in seen) and not any(j for _, j in native_seen)


def test_explicit_type_call_interprets_init():
    def f():
        return type.__call__(_One, 3).v

    native_seen = _fresh_singletons()
    expected = f()
    seen = _fresh_singletons()
    assert interpret(f)() == expected
    assert seen == [("init", True)] and native_seen == [("init", False)]


class _MetaWithProtocols(type):
    @property
    def size(cls):
        is_jitting_with_raise()
        return len(cls.__name__)

    def __getitem__(cls, key):
        is_jitting_with_raise()
        return (cls.__name__, key)

    def __len__(cls):
        is_jitting_with_raise()
        return 2

    def __iter__(cls):
        is_jitting_with_raise()
        return iter("ab")


def test_metaclass_property_and_protocols_on_the_class_are_interpreted():
    class Shape(metaclass=_MetaWithProtocols):
        size = "shadowed by the metaclass property"

    def f():
        return Shape.size, Shape[1], len(Shape), list(Shape), [c for c in Shape]

    assert interpret(f)() == f()


def test_class_changes_between_runs_are_seen():
    # Note [Class attribute lookups]: the interpreter keeps the class dicts of a type's MRO between runs; a property
    # added to a base later, and a base replaced (``__bases__``), are what the next run finds, as CPython does.
    class A:
        def f(self):
            return "A"

    class B:
        def f(self):
            return "B"

    class C(A):
        pass

    def g(o):
        try:
            v = o.v
        except AttributeError:
            v = None
        return o.f(), v

    c = C()
    assert interpret(g)(c) == g(c) == ("A", None)
    A.v = property(lambda self: "property of A")
    assert interpret(g)(c) == g(c) == ("A", "property of A")
    C.__bases__ = (B,)
    assert interpret(g)(c) == g(c) == ("B", None)
