"""Reading a checkpoint's files without running code: the only way Troupe opens a state.pt.

A checkpoint folder can come from anywhere a path can point (another run, a branch point, an
operator's copy), and Python's pickle runs whatever a file asks it to while it is read. So no
checkpoint is ever unpickled in full:

- `load_state(folder)`: `state.pt` by `torch.load(weights_only=True)`: tensors, numbers,
  strings and the containers of them (every state Troupe has ever saved is made of only
  those). Anything else is refused with `UnsafeCheckpoint`, before it is built.
- `SafeReader`: the reader of a sharded checkpoint's `shards/` (`torch.distributed.checkpoint`),
  whose `.metadata` file is a pickle too: unpickled here with only the classes that metadata
  is made of (torch.distributed.checkpoint's own records, torch.Size, dtypes), nothing else.

A guard test (tests/test_no_unpickling.py) fails on any load that turns `weights_only` off in
the product code.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoint_index import STATE_FILE

REFUSED = (
    "{path} holds objects that are not tensors or plain data, so it was not loaded (reading it "
    "could run code). Troupe's own checkpoints never hold such objects: if you made this file "
    "yourself and trust it, re-save it as plain tensors and containers (torch.save of a dict "
    "of tensors, numbers and strings)"
)


class UnsafeCheckpoint(ValueError):
    """A checkpoint file that would need code to run to be read."""


def load_state(folder: str | Path) -> dict[str, Any]:
    """The state a checkpoint folder's `state.pt` holds, read without running code."""
    path = Path(folder) / STATE_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeCheckpoint(REFUSED.format(path=path)) from exc
    if not isinstance(state, dict):
        raise UnsafeCheckpoint(f"{path} is not a Troupe checkpoint (its state is not a dict)")
    return state


# What a torch.distributed.checkpoint `.metadata` pickle is made of: the record classes of
# its metadata module, and these (each only builds a value; none touches the disk or runs
# a command).
_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_METADATA_NAMES = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),  # a layout by its name
    ("torch", "Size"),
    ("torch", "device"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        found = getattr(torch, name, None) if module == "torch" else None
        plain = isinstance(found, torch.dtype | torch.layout | torch.memory_format)
        if module == _METADATA_MODULE or (module, name) in _METADATA_NAMES or plain:
            value = super().find_class(module, name)
            if module != _METADATA_MODULE or isinstance(value, type):  # a record, no function
                return value
        raise UnsafeCheckpoint(
            f"a sharded checkpoint's metadata names {module}.{name}, which no checkpoint "
            "holds: not loaded (reading it could run code)"
        )


def _reader_class():
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class Reader(FileSystemReader):
        """FileSystemReader whose metadata is unpickled with an allowlist of classes."""

        def read_metadata(self, *args: Any, **kwargs: Any):
            path = self._get_metadata_path(kwargs.get("rank"))
            with self.fs.create_stream(path, "rb") as stream:
                metadata = _MetadataUnpickler(stream).load()
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return Reader


def SafeReader(path: str | Path):  # noqa: N802 - stands for the class it builds
    """A torch.distributed.checkpoint reader of `path` that runs no code while reading."""
    return _reader_class()(str(path))
