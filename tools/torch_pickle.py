"""Reads a PyTorch `torch.save` checkpoint (a state dict of tensors) with the standard library
and numpy only: no torch needed.

Two container formats exist:

* **legacy** (torch < 1.6, and `_use_new_zipfile_serialization=False`): five pickles and raw
  bytes back to back in one stream --
    1. the magic number 0x1950a86a20f9469cfc6c,  2. the protocol version (1001),
    3. sys_info {protocol_version, little_endian, type_sizes},
    4. the object itself, whose tensors refer to storages through persistent ids
       ('storage', storage_type, key, location, numel[, view_metadata]),
    5. the list of storage keys, in the order their data follows;
  then for each key an 8-byte little-endian element count and the storage's raw elements.
* **zip** (the default since 1.6): `<archive>/data.pkl` is the object pickle with the same kind
  of persistent ids ('storage', storage_type, key, location, numel), and `<archive>/data/<key>`
  holds each storage's raw bytes (no header); `<archive>/byteorder` may say "big".

Tensors are rebuilt by `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`;
here that becomes a numpy view (as_strided) of the storage's array, copied out so the result
owns its data.  The unpickler resolves only the handful of globals a state dict needs (the
rebuild functions, storage types, OrderedDict); anything else is refused, so a checkpoint that
would run code on load is an error instead.

    state = load_torch_checkpoint("model.pth")   # {name: np.ndarray}, or raises CheckpointError
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import zipfile
from typing import Any, Dict, List, Tuple

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

# torch storage class -> numpy dtype (little-endian; the zip format may flip it).
STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": None,  # no numpy dtype: converted by hand below
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class CheckpointError(Exception):
    """The file is missing, truncated, or not a torch.save state dict this reader understands."""


class _StorageType:
    def __init__(self, name: str):
        self.name = name


class _Storage:
    """A storage whose bytes are read after the object pickle (legacy) or from the zip."""

    def __init__(self, type_name: str, key: str, numel: int):
        if type_name not in STORAGE_DTYPES:
            raise CheckpointError(f"unsupported storage type torch.{type_name}")
        self.type_name, self.key, self.numel = type_name, key, numel
        self.array: np.ndarray | None = None

    def set_bytes(self, raw: bytes, big_endian: bool = False) -> None:
        if self.type_name == "BFloat16Storage":
            halves = np.frombuffer(raw, dtype=">u2" if big_endian else "<u2")
            self.array = (halves.astype(np.uint32) << 16).view(np.float32)
        else:
            dtype = np.dtype(STORAGE_DTYPES[self.type_name])
            self.array = np.frombuffer(raw, dtype=dtype.newbyteorder(">" if big_endian else "<"))
        if self.array.size < self.numel:
            raise CheckpointError(f"storage '{self.key}' holds {self.array.size} elements, its "
                                  f"header promised {self.numel}: the file is truncated")


class _TensorRef:
    """What _rebuild_tensor_v2 returns while the storage bytes are not read yet."""

    def __init__(self, storage: _Storage, offset: int, size, stride):
        self.storage, self.offset = storage, int(offset)
        self.size, self.stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
        if len(self.size) != len(self.stride) or any(n < 0 for n in self.size) or any(
                s < 0 for s in self.stride):
            raise CheckpointError(f"a tensor has shape {list(self.size)} and strides "
                                  f"{list(self.stride)}: corrupt")

    def materialise(self) -> np.ndarray:
        array = self.storage.array
        if array is None:
            raise CheckpointError(f"storage '{self.storage.key}' has no data in the file")
        # The highest element any index reaches must lie inside the storage.
        last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride) if n > 0)
        if self.offset < 0 or (all(n > 0 for n in self.size) and last >= array.size):
            raise CheckpointError(f"a tensor of shape {list(self.size)} reaches past the end of "
                                  f"storage '{self.storage.key}' ({array.size} elements)")
        if any(n == 0 for n in self.size):
            return np.zeros(self.size, dtype=array.dtype.newbyteorder("="))
        view = np.lib.stride_tricks.as_strided(
            array[self.offset:], shape=self.size,
            strides=tuple(s * array.itemsize for s in self.stride))
        return np.array(view, dtype=array.dtype.newbyteorder("="))  # owned, native order


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if not isinstance(storage, _Storage):
        raise CheckpointError("a tensor refers to something that is not a storage")
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


class _Unpickler(pickle.Unpickler):
    """Resolves only what a state dict needs; storages come from `storages` by key."""

    def __init__(self, stream, storages: Dict[str, _Storage]):
        super().__init__(stream)
        self.storages = storages

    def find_class(self, module: str, name: str):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch._utils" and name == "_rebuild_tensor":
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise CheckpointError(f"the checkpoint refers to {module}.{name}, which a plain state "
                              "dict of tensors does not need (refused: it could run code)")

    def persistent_load(self, saved_id):
        if not isinstance(saved_id, tuple) or len(saved_id) < 5 or saved_id[0] != "storage":
            raise CheckpointError(f"unexpected persistent id {saved_id!r:.80}")
        storage_type, key, _location, numel = saved_id[1:5]
        if len(saved_id) > 5 and saved_id[5] is not None:
            raise CheckpointError("storage views (legacy view_metadata) are not supported")
        if not isinstance(storage_type, _StorageType):
            raise CheckpointError(f"storage '{key}' has no known storage type")
        key = str(key)
        if key not in self.storages:
            self.storages[key] = _Storage(storage_type.name, key, int(numel))
        return self.storages[key]


def _materialise(obj: Any) -> Any:
    if isinstance(obj, _TensorRef):
        return obj.materialise()
    if isinstance(obj, dict):
        return collections.OrderedDict((k, _materialise(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_materialise(v) for v in obj)
    return obj


def _load_legacy(stream) -> Any:
    # Every pickle goes through the restricted unpickler, even the plain ints: a hostile file
    # could put a code-running global anywhere.
    magic = _Unpickler(stream, {}).load()
    if magic != LEGACY_MAGIC:
        raise CheckpointError("not a torch.save file (wrong magic number)")
    protocol = _Unpickler(stream, {}).load()
    if protocol != LEGACY_PROTOCOL:
        raise CheckpointError(f"unsupported legacy protocol version {protocol!r}")
    sys_info = _Unpickler(stream, {}).load()
    if isinstance(sys_info, dict) and sys_info.get("little_endian") is False:
        raise CheckpointError("big-endian legacy checkpoints are not supported")
    storages: Dict[str, _Storage] = {}
    obj = _Unpickler(stream, storages).load()
    keys = _Unpickler(stream, {}).load()
    if not isinstance(keys, list):
        raise CheckpointError("the storage key list is missing")
    for key in keys:
        storage = storages.get(str(key))
        if storage is None:
            raise CheckpointError(f"storage '{key}' is listed but no tensor uses it")
        header = stream.read(8)
        if len(header) != 8:
            raise CheckpointError(f"the file ends before storage '{key}': truncated")
        (count,) = struct.unpack("<q", header)
        if count != storage.numel:
            raise CheckpointError(f"storage '{key}' holds {count} elements, the pickle says "
                                  f"{storage.numel}")
        item = 2 if storage.type_name == "BFloat16Storage" else np.dtype(
            STORAGE_DTYPES[storage.type_name]).itemsize
        raw = stream.read(count * item)
        if len(raw) != count * item:
            raise CheckpointError(f"the file ends inside storage '{key}' ({len(raw)} of "
                                  f"{count * item} bytes): truncated")
        storage.set_bytes(raw)
    return _materialise(obj)


def _load_zip(path: str) -> Any:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise CheckpointError("a zip file without exactly one data.pkl: not a torch.save "
                                  "checkpoint")
        prefix = pickles[0][: -len("data.pkl")]
        big_endian = False
        if prefix + "byteorder" in names:
            big_endian = archive.read(prefix + "byteorder").strip() == b"big"
        storages: Dict[str, _Storage] = {}
        obj = _Unpickler(io.BytesIO(archive.read(pickles[0])), storages).load()
        for key, storage in storages.items():
            member = f"{prefix}data/{key}"
            if member not in names:
                raise CheckpointError(f"storage '{key}' is missing from the archive")
            storage.set_bytes(archive.read(member), big_endian)
    return _materialise(obj)


def load_torch_checkpoint(path: str) -> Dict[str, np.ndarray]:
    """The checkpoint's state dict as {name: numpy array}.  A dict wrapping the state dict under
    "state_dict" or "model" is unwrapped.  Raises CheckpointError with a one-line reason."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such file")
    try:
        if zipfile.is_zipfile(path):
            obj = _load_zip(path)
        else:
            with open(path, "rb") as stream:
                obj = _load_legacy(stream)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, struct.error,
            zipfile.BadZipFile, KeyError, IndexError, AttributeError, OverflowError,
            MemoryError) as exc:
        raise CheckpointError(f"{path}: not a readable torch.save checkpoint "
                              f"({type(exc).__name__}: {exc}); truncated or corrupt?") from None
    for wrapper in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(wrapper), dict):
            obj = obj[wrapper]
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: holds a {type(obj).__name__}, not a state dict")
    tensors = {str(k): v for k, v in obj.items() if isinstance(v, np.ndarray)}
    if not tensors:
        raise CheckpointError(f"{path}: the state dict holds no tensors")
    return tensors


def _summary(tensors: Dict[str, np.ndarray]) -> List[Tuple[str, list, str]]:
    return [(name, list(a.shape), str(a.dtype)) for name, a in tensors.items()]


if __name__ == "__main__":
    import sys

    for row in _summary(load_torch_checkpoint(sys.argv[1])):
        print(*row)
