"""What the sandbox's processes say to each other: fixed descriptors, the environment every
program gets, and length-prefixed marshal frames.

Imported by the host (`sandbox.host`) and by the supervisor process alike; built-in modules
only, as everything the supervisor imports.
"""

from __future__ import annotations

import marshal
import os

STATUS_FD = 3  # the program's status pipe: "completed" (the code ran to its end), "memory"
REPORT_FD = 6  # the checker's own output, framed, straight to the host (never through us)
CALL_IN_FD, CALL_OUT_FD = 4, 5  # candidate: requests from the checker in, answers out
MAX_FRAME = 64 << 20  # largest message the checker accepts from the candidate
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
}


def write_frame(stream, record: dict) -> None:
    blob = marshal.dumps(record)
    stream.write(len(blob).to_bytes(4, "little") + blob)
    stream.flush()


def read_frames(data: bytes) -> list[dict]:
    """Split a stream of length-prefixed marshal frames; a cut-off last frame is dropped."""
    records, at = [], 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "little")
        if at + 4 + size > len(data):
            break
        records.append(marshal.loads(data[at + 4 : at + 4 + size]))
        at += 4 + size
    return records


def send(fd: int, line: str) -> None:
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass
