"""Minimal stand-in for the HF `datasets` package (which is NOT installed on the
GPU machine).  Covers exactly what MegaTrain's infinity/data/datasets.py uses for a
local alpaca-format JSON/JSONL file registered in dataset_info.json:
    load_dataset("json", data_files=path, split="train") -> obj with
    __len__, __getitem__ (dict), column_names, select(range)
Put this folder on PYTHONPATH only when `import datasets` fails.
"""
import json

__version__ = "0.0-megatrain-peer-shim"


class _ListDataset:
    def __init__(self, rows):
        self._rows = rows

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, idx):
        return self._rows[idx]

    @property
    def column_names(self):
        return list(self._rows[0].keys()) if self._rows else []

    def select(self, indices):
        return _ListDataset([self._rows[i] for i in indices])


def _read(path):
    with open(path, "r", encoding="utf-8") as f:
        if str(path).endswith(".jsonl"):
            return [json.loads(line) for line in f if line.strip()]
        return json.load(f)


def load_dataset(kind, data_files=None, split="train", **kwargs):
    if kind != "json" or data_files is None:
        raise RuntimeError(f"datasets shim: only local json supported (got {kind!r}); no network here")
    files = data_files if isinstance(data_files, (list, tuple)) else [data_files]
    rows = []
    for p in files:
        rows.extend(_read(p))
    return _ListDataset(rows)


def load_from_disk(path, **kwargs):
    raise RuntimeError("datasets shim: load_from_disk (Arrow) is not supported; use a JSON registry entry")
