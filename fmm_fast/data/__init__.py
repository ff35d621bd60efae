"""Datasets as raw text splits: the paper's 16 (hub or local files), offline bAbI and movie snippets,
and any local .csv/.jsonl/.parquet file."""

from fmm_fast.data.base import DatasetSpec, TextDataset, TextSplit
from fmm_fast.data.registry import DATASETS, dataset_names, load_dataset

__all__ = ["DATASETS", "DatasetSpec", "TextDataset", "TextSplit", "dataset_names", "load_dataset"]
