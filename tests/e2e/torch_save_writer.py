"""Writes `torch.save`-format checkpoints without torch, for testing tools/torch_pickle.py and the
converters (not a test itself: CTest globs test_*.py).

Both container formats are produced the way torch's serialization.py lays them out: the legacy
stream (magic, protocol, sys_info, object pickle with persistent storage ids, key list, then per
storage an int64 count and the raw elements) and the zip archive (archive/data.pkl,
archive/data/<key>, archive/byteorder).  Tensors pickle as torch._utils._rebuild_tensor_v2
calls, storages as globals torch.FloatStorage etc.: a stand-in `torch` module is registered in
sys.modules (only in the test process) so pickle can name them.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import sys
import types
import zipfile

import numpy as np

_DTYPE_STORAGE = {np.dtype(np.float32): "FloatStorage", np.dtype(np.float16): "HalfStorage",
                  np.dtype(np.float64): "DoubleStorage", np.dtype(np.int64): "LongStorage"}


def _stand_in_torch():
    torch = sys.modules.get("torch")
    if torch is not None and not getattr(torch, "_cnnrt_stand_in", False):
        raise RuntimeError("the real torch is imported: this writer needs the stand-in")
    if torch is None:
        torch = types.ModuleType("torch")
        torch._cnnrt_stand_in = True
        utils = types.ModuleType("torch._utils")

        def _rebuild_tensor_v2(*args):  # never called: only its name is pickled
            raise AssertionError

        _rebuild_tensor_v2.__module__ = "torch._utils"
        _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
        utils._rebuild_tensor_v2 = _rebuild_tensor_v2
        for name in set(_DTYPE_STORAGE.values()):
            setattr(torch, name, type(name, (), {"__module__": "torch", "__qualname__": name}))
        torch._utils = utils
        sys.modules["torch"] = torch
        sys.modules["torch._utils"] = utils
    return torch


class _Storage:
    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, np.ascontiguousarray(array).reshape(-1)


class _Tensor:
    """Pickles as _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""

    def __init__(self, storage: _Storage, offset: int, shape, strides):
        self.storage, self.offset, self.shape, self.strides = storage, offset, shape, strides

    def __reduce__(self):
        rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
        return (rebuild, (self.storage, self.offset, tuple(self.shape), tuple(self.strides),
                          False, collections.OrderedDict()))


class _Pickler(pickle.Pickler):
    def __init__(self, stream, zip_style: bool):
        super().__init__(stream, protocol=2)
        self.zip_style = zip_style

    def persistent_id(self, obj):
        if not isinstance(obj, _Storage):
            return None
        storage_type = getattr(sys.modules["torch"], _DTYPE_STORAGE[obj.array.dtype])
        if self.zip_style:
            return ("storage", storage_type, obj.key, "cpu", obj.array.size)
        return ("storage", storage_type, obj.key, "cpu", obj.array.size, None)


def _tensors(state: dict):
    """{name: _Tensor} and the storages in order.  A value ("view", base, offset, shape, strides)
    is a strided view into the storage of the earlier entry `base` (offset/strides in elements),
    the way a transposed or sliced tensor is saved."""
    storages, tensors, by_name = [], collections.OrderedDict(), {}
    for name, value in state.items():
        if isinstance(value, tuple) and value and value[0] == "view":
            _, base, offset, shape, strides = value
            tensors[name] = _Tensor(by_name[base], offset, shape, strides)
            continue
        array = np.asarray(value)
        storage = _Storage(str(len(storages)), array)
        storages.append(storage)
        by_name[name] = storage
        # Row-major element strides (np.ascontiguousarray would turn a 0-d array into 1-d).
        strides = [int(np.prod(array.shape[i + 1:])) for i in range(array.ndim)]
        tensors[name] = _Tensor(storage, 0, array.shape, strides)
    return tensors, storages


def save_legacy(state: dict, path: str, extra_object=None) -> None:
    """Legacy (non-zip) torch.save of an OrderedDict of numpy arrays.  extra_object, when given,
    is pickled in place of the state dict (for hostile-input tests)."""
    _stand_in_torch()
    tensors, storages = _tensors(state)
    stream = io.BytesIO()
    pickle.dump(0x1950A86A20F9469CFC6C, stream, protocol=2)
    pickle.dump(1001, stream, protocol=2)
    pickle.dump({"protocol_version": 1001, "little_endian": True,
                 "type_sizes": {"short": 2, "int": 4, "long": 4}}, stream, protocol=2)
    _Pickler(stream, zip_style=False).dump(extra_object if extra_object is not None else tensors)
    pickle.dump([s.key for s in storages], stream, protocol=2)
    for storage in storages:
        stream.write(struct.pack("<q", storage.array.size))
        stream.write(storage.array.astype(storage.array.dtype.newbyteorder("<")).tobytes())
    with open(path, "wb") as handle:
        handle.write(stream.getvalue())


def save_zip(state: dict, path: str) -> None:
    """Zip-format torch.save (the default since torch 1.6)."""
    _stand_in_torch()
    tensors, storages = _tensors(state)
    data = io.BytesIO()
    _Pickler(data, zip_style=True).dump(tensors)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        archive.writestr("archive/byteorder", "little")
        for storage in storages:
            archive.writestr(f"archive/data/{storage.key}", storage.array.tobytes())
        archive.writestr("archive/version", "3\n")
