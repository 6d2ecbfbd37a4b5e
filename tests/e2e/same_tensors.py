#!/usr/bin/env python3
"""same_tensors.py A B: exit 0 when two safetensors files hold the same tensors (names, dtypes,
shapes, bytes) and the same metadata, what says where they come from aside (the producer, the
source folder, the plan fingerprint, a run's provenance: runs of differently compiled plans differ
there) and the checksums too (they follow from the bytes; hand-edited files drop them). Prints what differs
otherwise. Standard library only; onnx_parity.py imports `differences`."""
import json
import struct
import sys

IGNORED_METADATA = ("provenance.", "producer", "source", "plan_fingerprint", "crc32c.")


def _read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = {k: v for k, v in header.pop("__metadata__", {}).items() if not k.startswith(IGNORED_METADATA)}
    tensors = {name: (e["dtype"], e["shape"], data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
               for name, e in header.items()}
    return meta, tensors


def differences(path_a, path_b):
    """What differs between the two files (empty if nothing)."""
    (meta_a, a), (meta_b, b) = _read(path_a), _read(path_b)
    found = []
    if a.keys() != b.keys():
        found.append(f"tensors only in {path_a}: {sorted(a.keys() - b.keys())[:5]}, "
                     f"only in {path_b}: {sorted(b.keys() - a.keys())[:5]}")
    differ = [name for name in sorted(a.keys() & b.keys()) if a[name] != b[name]]
    if differ:
        found.append(f"{len(differ)} tensors differ, first: {differ[:5]}")
    if meta_a != meta_b:
        keys = sorted(k for k in meta_a.keys() | meta_b.keys() if meta_a.get(k) != meta_b.get(k))
        found.append(f"metadata differs: {keys[:5]}")
    return found


def strip_checksums(path):
    """Rewrites `path` without its checksums, as a file from elsewhere (tests that edit bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header["__metadata__"] = {k: v for k, v in header.get("__metadata__", {}).items() if not k.startswith("crc32c.")}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data[8 + n:])


if __name__ == "__main__":
    problems = differences(sys.argv[1], sys.argv[2])
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)
