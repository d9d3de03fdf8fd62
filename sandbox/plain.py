"""Plain data out of hostile bytes: the checker's only way to read what the program sends.

The program writes its messages with `encode` (marshal's version-2 format); the checker reads
them with `decode`, a parser of our own for exactly the codes of plain data — None, bool,
int, float, complex, str, bytes, tuple, list, dict, set, frozenset — and nothing else. So no
bytes the program writes can become a code object, a reference cycle, a shared sub-object
(whose checks would take exponential time), or anything that runs when it is read: the
CPython documentation warns that marshal.loads itself is not safe against crafted input.
Every failure is a ValueError. Marshal writes its numbers little-endian on every machine,
so they are read little-endian explicitly (`struct`'s "<"), never in the host's own order.
Standard-library modules only (marshal, struct): the supervisor imports this module before
it forks the checkers.
"""

from __future__ import annotations

import marshal
import struct

VERSION = 2  # marshal's format without references (version 3 added them) or short codes
MAX_DEPTH = 104  # a message's envelope (a dict of tuples) around data nested 100 deep
MAX_LONG_DIGITS = 1 << 16  # 15-bit digits: integers up to ~983,000 bits
_CODE_NONE, _CODE_TRUE, _CODE_FALSE = 0x4E, 0x54, 0x46  # N T F
_CODE_INT, _CODE_LONG, _CODE_FLOAT, _CODE_COMPLEX = 0x69, 0x6C, 0x67, 0x79  # i l g y
_CODE_BYTES, _CODE_STR = 0x73, 0x75  # s u
_CODE_TUPLE, _CODE_LIST, _CODE_DICT, _CODE_END = 0x28, 0x5B, 0x7B, 0x30  # ( [ { 0
_CODE_SET, _CODE_FROZENSET = 0x3C, 0x3E  # < >


def encode(value) -> bytes:
    """What `decode` reads back: `value` must be plain data (marshal refuses anything else
    it cannot write; the checker refuses what it cannot read)."""
    return marshal.dumps(value, VERSION)


def decode(blob: bytes):
    """The plain value in `blob`, all of it; ValueError for anything else."""
    reader = _Reader(memoryview(blob))
    value = reader.value(0)
    if reader.at != len(blob):
        raise ValueError("trailing bytes after the message")
    return value


class _Reader:
    def __init__(self, data: memoryview):
        self.data, self.at = data, 0

    def take(self, size: int) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError("a message cut short")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def int32(self) -> int:
        return int.from_bytes(self.take(4), "little", signed=True)

    def count(self) -> int:
        size = self.int32()
        if size < 0 or size > len(self.data) - self.at:
            raise ValueError(f"a length of {size} does not fit the message")
        return size

    def value(self, depth: int):
        if depth > MAX_DEPTH:
            raise ValueError("data nested too deep")
        code = self.take(1)[0]
        if code == _CODE_NONE:
            return None
        if code in (_CODE_TRUE, _CODE_FALSE):
            return code == _CODE_TRUE
        if code == _CODE_INT:
            return self.int32()
        if code == _CODE_LONG:
            return self.long()
        if code == _CODE_FLOAT:
            return struct.unpack("<d", self.take(8))[0]
        if code == _CODE_COMPLEX:
            return complex(*struct.unpack("<2d", self.take(16)))
        if code == _CODE_BYTES:
            return bytes(self.take(self.count()))
        if code == _CODE_STR:
            return str(self.take(self.count()), "utf-8", "surrogatepass")
        if code == _CODE_DICT:
            return self.dict(depth)
        if code in (_CODE_TUPLE, _CODE_LIST, _CODE_SET, _CODE_FROZENSET):
            items = [self.value(depth + 1) for _ in range(self.count())]
            kind = {_CODE_TUPLE: tuple, _CODE_LIST: list, _CODE_SET: set}.get(code, frozenset)
            try:
                return kind(items)
            except TypeError as exc:  # an unhashable member of a set
                raise ValueError(f"malformed set: {exc}") from None
        raise ValueError(f"a type code ({code:#04x}) that is not plain data")

    def long(self) -> int:
        size = self.int32()
        if abs(size) > MAX_LONG_DIGITS:
            raise ValueError(f"an integer of {abs(size)} digits is over the limit")
        digits = struct.unpack(f"<{abs(size)}H", self.take(2 * abs(size)))
        if any(d >> 15 for d in digits):
            raise ValueError("malformed integer")
        # Base 2 is parsed in linear time (no int_max_str_digits limit applies to it).
        magnitude = int("".join(f"{d:015b}" for d in reversed(digits)) or "0", 2)
        return -magnitude if size < 0 else magnitude

    def dict(self, depth: int) -> dict:
        result = {}
        while True:
            if self.data[self.at : self.at + 1] == b"0":
                self.at += 1
                return result
            key = self.value(depth + 1)
            try:
                result[key] = self.value(depth + 1)
            except TypeError as exc:  # an unhashable key
                raise ValueError(f"malformed dict: {exc}") from None
