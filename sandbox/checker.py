"""The two ends of a test job in the sandbox: the checker runs the tests, the program answers.

A test job runs as two processes (see `sandbox/__init__.py`). The *program* process runs the
candidate's code, then `serve`s calls on a pipe pair. The *checker* process runs the trusted
test code through `check`: every top-level name of the program appears there as a stand-in
(`Remote`) that forwards calls to the program and accepts only plain data back
(None, bool, int, float, complex, str, bytes, and lists, tuples, dicts, sets and frozensets
of them). So the verdict is the checker's: the program cannot exit early "successfully", hand
back an object whose __eq__ always agrees, patch `assert` or AssertionError, or write the
verdict itself (the checker reports on a pipe the program never holds). Names of the
program that shadow a builtin (`abs`, `len`…) or are dunder names (`__builtins__`) are not
handed to the tests, and a name in the fixed list TEST_MODULES (`math`) is always the
checker's own import, so the tests' own comparisons cannot be replaced.

The checker takes nothing executable from the program: what the program sends is
hostile bytes, read by `sandbox.plain.decode` as plain data only; no name it sends is ever
imported or looked up, except in the fixed tables TEST_MODULES and RAISABLE; and the checker
runs in a directory and with a sys.path that the program cannot write (`sandbox.program`).

Both ends are started by `sandbox.program` (imported before any fork) and use only built-in
modules: the processes are chrooted and cannot import anything new from the repository.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys

from sandbox.plain import decode as decode_plain
from sandbox.plain import encode

CALL_IN_FD, CALL_OUT_FD = 4, 5  # as in sandbox.protocol: inbound and outbound message pipes
MAX_FRAME = 64 << 20  # the largest message either end accepts
MAX_DEPTH = 100  # nesting of plain data
PLAIN_ATOMS = (type(None), bool, int, float, complex, str, bytes)
PLAIN_CONTAINERS = (list, tuple, set, frozenset)
# The only modules a name of the program may stand for in the tests, always as the checker's
# own import: a program's `import math` (or a class of its own named `math`) gives the tests
# the real `math`. A fixed list of modules that run nothing when imported; the program can
# never make the checker import anything else (in an attack a module named `unittest.__main__`
# ran test discovery in the program's directory, inside the checker).
TEST_MODULES = frozenset(
    """array bisect cmath collections copy datetime decimal fractions functools heapq
    itertools json math numbers operator random re statistics string sys typing""".split()
)
# Exceptions the program's calls may raise in the tests, by name (a test may expect a
# ValueError). StopIteration would end a test's map()/iterator loop early, as if all held.
RAISABLE = {
    name: kind
    for name, kind in vars(builtins).items()
    if isinstance(kind, type)
    and issubclass(kind, Exception)
    and not issubclass(kind, (StopIteration, StopAsyncIteration))
}


def is_plain(value, depth: int = 0) -> bool:
    """Exactly the built-in data types (no subclasses), nested at most MAX_DEPTH deep."""
    kind = type(value)
    if kind in PLAIN_ATOMS:
        return True
    if depth >= MAX_DEPTH:
        return False
    if kind in PLAIN_CONTAINERS:
        return all(is_plain(item, depth + 1) for item in value)
    if kind is dict:
        return all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in value.items())
    return False


def send(fd: int, message) -> None:
    blob = encode(message)
    data = len(blob).to_bytes(4, "little") + blob
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def receive(fd: int, decode=marshal.loads):
    """One message, or None at end of file (the other end is gone). The program reads the
    checker's (trusted) messages with marshal; the checker reads the program's with
    `sandbox.plain.decode`, which accepts plain data only."""
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "little")
    if size > MAX_FRAME:
        raise ValueError(f"a message of {size} bytes is over the limit of {MAX_FRAME}")
    body = _read_exactly(fd, size)
    if body is None:
        return None
    return decode(body)


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data.extend(chunk)
    return bytes(data)


# --- the program's end --------------------------------------------------------------------


def serve(scope: dict) -> None:
    """Describe the program's top-level names, then answer calls until the checker is done."""
    import types

    handles: list = []

    def handle(obj) -> int:
        handles.append(obj)
        return len(handles) - 1

    names = {}
    for name, value in list(scope.items()):
        if name.startswith("__"):
            continue
        if is_plain(value):
            names[name] = ("value", value)
        elif isinstance(value, types.ModuleType):
            names[name] = ("module", str(getattr(value, "__name__", "")))
        else:
            names[name] = ("handle", handle(value))
    send(CALL_OUT_FD, {"names": names})
    while True:
        request = receive(CALL_IN_FD)
        if request is None:
            return
        answer = _answer(request, handles, handle)
        flush_output()  # a call's prints are out before the checker can finish with them
        send(CALL_OUT_FD, answer)


def flush_output() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # the program may have replaced or closed its own streams
        pass


def _answer(request: dict, handles: list, handle) -> dict:
    try:
        target = handles[request["h"]]
        if request["op"] == "getattr":
            value = getattr(target, request["attr"])
            if is_plain(value):
                return {"ok": value}
            if callable(value):
                return {"handle": handle(value)}
            return {"error": "TypeError", "message": f"{type(value).__name__} is not plain data"}
        args = [handles[v] if kind == "h" else v for kind, v in request["args"]]
        kwargs = {k: handles[v] if kind == "h" else v for k, (kind, v) in request["kwargs"].items()}
        value = target(*args, **kwargs)
        if is_plain(value):
            # Arguments the function may have changed in place go back, for tests that check
            # them (an in-place sort); only mutable plain containers.
            changed = [a if type(a) in (list, dict, set) and is_plain(a) else None for a in args]
            return {"ok": value, "args": changed}
        if isinstance(target, type):
            return {"handle": handle(value)}  # a new instance (`Solution()`): a handle to it
        return {
            "error": "TypeError",
            "message": f"the program returned a {type(value).__name__}, which is not plain "
            "data (None, bool, int, float, complex, str, bytes, list, tuple, dict, set)",
        }
    except MemoryError:
        os.write(3, b"memory\n")
        return {"error": "MemoryError", "message": ""}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)[:2000]}


# --- the checker's end --------------------------------------------------------------------


class Remote:
    """Stands in, in the checker, for a non-data object of the program (a function, a
    class, an instance, a bound method). Calls go to the program; only plain data comes back.
    It equals only itself and has no truth value, so it can never satisfy a test by itself."""

    __slots__ = ("_id", "_label")

    def __init__(self, ident: int, label: str):
        object.__setattr__(self, "_id", ident)
        object.__setattr__(self, "_label", label)

    def __call__(self, *args, **kwargs):
        wire_args = [_to_wire(a) for a in args]
        wire_kwargs = {str(k): _to_wire(v) for k, v in kwargs.items()}
        reply = _call({"op": "call", "h": self._id, "args": wire_args, "kwargs": wire_kwargs})
        if "args" in reply:
            _copy_back(args, reply["args"])
        return _from_reply(reply, f"{self._label}(...)")

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        reply = _call({"op": "getattr", "h": self._id, "attr": attr})
        return _from_reply(reply, f"{self._label}.{attr}")

    def __setattr__(self, attr, value):
        raise TypeError(f"the checker cannot set attributes of {self._label}")

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError(f"{self._label} has no truth value in the checker; compare it to data")

    def __repr__(self):
        return f"<program's {self._label}>"


def _to_wire(value):
    if type(value) is Remote:
        return ("h", value._id)
    if not is_plain(value):
        raise TypeError(f"the checker can pass only plain data to the program, not {value!r}")
    return ("v", value)


def _call(request: dict) -> dict:
    send(CALL_OUT_FD, request)
    reply = receive(CALL_IN_FD, decode_plain)
    if reply is None:
        raise RuntimeError("the program ended while the tests were calling it")
    if type(reply) is not dict:
        raise TypeError("the program's answer is not a message")
    return reply


def _from_reply(reply: dict, label: str):
    if "error" in reply:
        name, message = reply.get("error"), reply.get("message")
        if type(name) is not str or type(message) is not str:
            raise TypeError(f"{label}: malformed error from the program")
        if name in RAISABLE:
            raise RAISABLE[name](message)  # so tests that expect, say, a ValueError still work
        raise RuntimeError(f"{name}: {message}")
    if "handle" in reply:
        if type(reply["handle"]) is not int:
            raise TypeError(f"{label}: malformed handle from the program")
        return Remote(reply["handle"], label)
    value = reply.get("ok")
    if not is_plain(value):
        raise TypeError(f"{label} returned something that is not plain data")
    return value


def _copy_back(args: tuple, changed) -> None:
    if type(changed) is not list or len(changed) != len(args):
        return
    for mine, theirs in zip(args, changed):
        if type(mine) is not type(theirs) or not is_plain(theirs):
            continue
        if type(mine) is list:
            mine[:] = theirs
        elif type(mine) in (dict, set):
            mine.clear()
            mine.update(theirs)


def check(tests: str) -> None:
    """Run `tests` against the program's names; returns only if every test held."""
    first = receive(CALL_IN_FD, decode_plain)
    if type(first) is not dict or type(first.get("names")) is not dict:
        raise RuntimeError("the program ended (or failed) before the tests could call it")
    scope = {"__name__": "__main__", "__builtins__": builtins}
    for name, entry in first["names"].items():
        if type(name) is not str or type(entry) is not tuple or len(entry) != 2:
            raise TypeError("malformed description of the program's names")
        value = stand_in(name, *entry)
        if value is not _NOTHING:
            scope[name] = value
    exec(compile(tests, "<tests>", "exec"), scope)


_NOTHING = object()


def stand_in(name: str, kind, value):
    """What the tests see for the program's top-level `name`: its plain value, a Remote for
    its functions and objects, a module from TEST_MODULES, or _NOTHING (the name is left
    out). Only data is read from the program's description: no name it sends is looked up
    anywhere but in the fixed table TEST_MODULES."""
    if not name.isidentifier() or name.startswith("__"):
        return _NOTHING  # `__builtins__`, `__name__`…: the tests' own, never the program's
    if hasattr(builtins, name):
        return _NOTHING  # `abs`, `len`, `isinstance`…: the tests' comparisons stay the real ones
    if name in TEST_MODULES:
        return __import__(name)  # `math.isclose` is the checker's own, always
    if kind == "value" and is_plain(value):
        return value
    if kind == "handle" and type(value) is int:
        return Remote(value, name)
    if kind == "module" and type(value) is str and value in TEST_MODULES:
        return __import__(value)  # `import collections as c`
    return _NOTHING  # any other module of the program's: tests that use it fail (NameError)
