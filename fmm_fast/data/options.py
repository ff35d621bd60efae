"""The shared front half of every command: model → dataset → tokenized split."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path

from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.digest import content_id
from fmm_fast.core.errors import UserError
from fmm_fast.data import load_dataset
from fmm_fast.data.base import TextDataset, splits_content_id
from fmm_fast.data.labels import model_label_indices, parse_label_map
from fmm_fast.data.local import is_local_file_name, split_file_names
from fmm_fast.data.registry import check_data_sizes, is_hub_dataset, splits_record
from fmm_fast.data.tokenization import encode_split
from fmm_fast.data.units import DEFAULT_UNIT, check_unit

DEFAULT_DATASET = "movie-snippets"  # offline, small: what a command evaluates when not told
# what an options object keeps once it has loaded its dataset (functools.cached_property's entries)
LOADED = ("_loaded", "hub_content")
AFTER_LOADING = {"split", "limit", "unit"}  # options that select within the loaded dataset


@dataclass(frozen=True)
class DataOptions:
    """How to load a dataset: registry name, local file or your own split files ("TRAIN,VALIDATION,TEST"),
    with its field names; `limit` keeps the first examples of `split`.

    `data_seed` draws generated bAbI sets, subsets and local-file splits; every command uses 0 so that
    training, evaluation and MaSF see the same splits (it is not the seed of a run's model or masks).
    `label_map` pairs (dataset label, model label) where the names differ; `metric` is a local file's
    primary metric (accuracy | macro-f1; None: accuracy). `unit`: the erasure unit (token | word |
    sentence, fmm_fast.data.units); `max_length`: cut every example to N tokens (None: the model's maximum).
    """

    dataset: str
    split: str = "test"
    limit: int | None = None
    size: int | None = None
    test_size: int | None = None
    text_field: str | None = None
    pair_field: str | None = None
    label_field: str | None = None
    data_seed: int = 0
    label_map: tuple[tuple[str, str], ...] = ()
    metric: str | None = None
    unit: str = DEFAULT_UNIT
    max_length: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "label_map", tuple(tuple(pair) for pair in self.label_map))  # from JSON
        check_unit(self.unit)
        if self.max_length is not None and (isinstance(self.max_length, bool) or self.max_length < 4):
            raise UserError(f"--max-length must be at least 4 tokens, got {self.max_length}")
        if self.limit is not None and self.limit < 1:
            raise UserError(f"--limit must be at least 1, got {self.limit}")
        check_data_sizes(self.dataset, self.size, self.test_size)  # before any work
        split_file_names(self.dataset)  # three split files, or a UserError before any work

    @classmethod
    def from_flags(cls, label_map: str | None = None, **flags: str | int | None) -> DataOptions:
        """The options of the data flags (--label-map as its DATA=MODEL,... text)."""
        return cls(**flags, label_map=parse_label_map(label_map))  # type: ignore[arg-type]

    def fingerprint_fields(self) -> dict:
        """Every option, and for a local data file (each of your own split files) or a hub dataset its
        content ("content": {path or name: "sha256:..."}), so that a file edited between runs, or a hub
        dataset whose cached copy changed, does not resume the run of its old rows."""
        fields = json.loads(json.dumps(asdict(self)))  # tuples → lists, as a marker gives them back
        # at their defaults they are left out: a run made before they existed still resumes
        for name, default in (("unit", DEFAULT_UNIT), ("max_length", None)):
            if fields[name] == default:
                del fields[name]
        files = split_file_names(self.dataset)
        if files is not None:  # a missing one fails when the data is loaded, with one line
            fields["content"] = {name: content_id(name) for name in files if Path(name).is_file()}
        elif is_local_file_name(self.dataset) and Path(self.dataset).is_file():
            fields["content"] = {self.dataset: content_id(self.dataset)}
        elif is_hub_dataset(self.dataset):
            fields["content"] = {self.dataset: self.hub_content}
        return fields

    def splits_record(self) -> dict:
        """How the dataset's splits are made (data.registry.splits_record), for the run's record."""
        return splits_record(self.dataset, self.data_seed)

    @cached_property
    def hub_content(self) -> str:
        """A hub dataset's content id: the digest of the splits it loads (texts, pairs, labels, after
        --size/--test-size), computed once per options object since the hub's cache has no cheap
        per-file digest to check instead."""
        return splits_content_id(self.load().splits)

    def load(self) -> TextDataset:
        """The dataset, loaded once per options object: a run's fingerprint (hub_content) and its splits
        read the same load (a hub dataset takes seconds to minutes)."""
        return self._loaded

    def select(self, **changes: str | int | None) -> DataOptions:
        """These options with another `split`, `limit` and/or `unit` (what applies after loading), with what
        this object loaded (and its hub content id): the same dataset, not loaded again."""
        if not set(changes) <= AFTER_LOADING:
            other = sorted(set(changes) - AFTER_LOADING)
            raise ValueError(f"select changes {sorted(AFTER_LOADING)} only, not {other}")
        other = replace(self, **changes)
        other.__dict__.update({key: self.__dict__[key] for key in LOADED if key in self.__dict__})
        return other

    def __getstate__(self) -> dict:
        """Pickled (to a Ray worker) without the loaded dataset: the worker loads its own, as before."""
        return {key: value for key, value in self.__dict__.items() if key != LOADED[0]}

    @cached_property
    def _loaded(self) -> TextDataset:
        return load_dataset(
            self.dataset,
            seed=self.data_seed,
            metric=self.metric,
            size=self.size,
            test_size=self.test_size,
            text_field=self.text_field,
            pair_field=self.pair_field,
            label_field=self.label_field,
        )


def open_split(
    model: LoadedModel, options: DataOptions, split: str | None = None
) -> tuple[TextDataset, EncodedSplit]:
    """Load, match the labels to the model's by name (the split's labels become model label indices),
    truncate to --limit and tokenize with the model's tokenizer (cut to --max-length, with --unit's units)."""
    dataset = options.load()
    name = split or options.split
    if name not in dataset.splits:
        raise UserError(
            f"dataset '{dataset.name}' has no split '{name}'; choose one of {sorted(dataset.splits)}"
        )
    to_model = model_label_indices(dataset.label_names, model.info.label_names, options.label_map)
    text_split = replace(dataset.splits[name], labels=to_model[dataset.splits[name].labels])
    if options.limit is not None:
        text_split = text_split.subset(range(min(options.limit, len(text_split))))
    if len(text_split) == 0:
        raise UserError(f"split '{name}' of dataset '{dataset.name}' is empty")
    return dataset, encode_split(model.tokenizer, text_split, options.unit, options.max_length)
