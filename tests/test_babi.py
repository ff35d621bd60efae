"""The bAbI generator: answers re-derived from the text by an independent resolver, spans, sizes, seeds."""

import re

import numpy as np
import pytest

from fmm_fast.data import load_dataset
from fmm_fast.data.babi import ACTORS, LOCATIONS, OBJECTS, babi_splits, generate_babi

SENTENCE = re.compile(r"[^.]+\.")
MOVE = re.compile(r"^(\w+) (?:moved|went|went back|journeyed|travelled) to the (\w+)\.$")
GRAB = re.compile(r"^(\w+) (?:picked up|got|grabbed|took) the (\w+) there\.$")
DROP = re.compile(r"^(\w+) (?:dropped|discarded|put down|left) the (\w+)\.$")
WHERE_ACTOR = re.compile(r"^Where is (\w+)\?$")
WHERE_OBJECT = re.compile(r"^Where is the (\w+)\?$")
WHERE_BEFORE = re.compile(r"^Where was the (\w+) before the (\w+)\?$")


class Resolver:
    """Reads bAbI sentences and answers the three question types, independently of the generator.

    strict: also check that the story is physically consistent (full stories). Non-strict reading of
    the supporting sentences alone tolerates what they leave out (an actor's earlier whereabouts).
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.actor_room: dict[str, str] = {}
        self.holder: dict[str, str] = {}
        self.object_room: dict[str, str] = {}
        self.history: dict[str, list[str]] = {}

    def place(self, obj: str, room: str) -> None:
        if self.object_room.get(obj) != room:
            self.object_room[obj] = room
            self.history.setdefault(obj, []).append(room)

    def read(self, sentence: str) -> None:
        if match := MOVE.match(sentence):
            actor, room = match.groups()
            assert not self.strict or self.actor_room.get(actor) != room, "moves go somewhere new"
            self.actor_room[actor] = room
            for obj in [o for o, h in self.holder.items() if h == actor]:
                self.place(obj, room)
        elif match := GRAB.match(sentence):
            actor, obj = match.groups()
            if self.strict:
                assert obj not in self.holder, f"{obj} is already carried"
                assert actor in self.actor_room, "an actor picks things up where we know it is"
                assert self.object_room.get(obj, self.actor_room[actor]) == self.actor_room[actor]
            self.holder[obj] = actor
            if actor in self.actor_room:
                self.place(obj, self.actor_room[actor])
        elif match := DROP.match(sentence):
            actor, obj = match.groups()
            assert not self.strict or self.holder.get(obj) == actor, f"{actor} does not carry the {obj}"
            self.holder.pop(obj, None)
            if actor in self.actor_room:
                self.place(obj, self.actor_room[actor])
        else:
            raise AssertionError(f"unparseable sentence {sentence!r}")

    def answer(self, question: str) -> str:
        if match := WHERE_OBJECT.match(question):
            return self.object_room[match.group(1)]
        if match := WHERE_ACTOR.match(question):
            return self.actor_room[match.group(1)]
        match = WHERE_BEFORE.match(question)
        assert match, f"unparseable question {question!r}"
        obj, room = match.groups()
        rooms = self.history[obj]
        assert rooms.count(room) == 1, "the question must be unambiguous"
        assert rooms.index(room) > 0, "the object must have been somewhere before"
        return rooms[rooms.index(room) - 1]


def resolve(sentences: list[str], question: str, strict: bool) -> str:
    resolver = Resolver(strict)
    for sentence in sentences:
        resolver.read(sentence)
    return resolver.answer(question)


SUPPORT_COUNTS = {1: {1}, 2: {2}, 3: {3, 4}}  # task 3: 4 when two actors carried the object in turn
MAX_SENTENCES = {1: 10, 2: 30, 3: 30}


@pytest.mark.parametrize("task", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 7])
def test_answers_and_supporting_facts_are_correct(task, seed):
    split = generate_babi(task, 400, np.random.default_rng(seed))
    assert len(split) == 400 and split.second is not None and split.supporting is not None
    support_sizes = []
    for story, question, label, spans in zip(
        split.first, split.second, split.labels, split.supporting, strict=True
    ):
        sentences = [s.strip() for s in SENTENCE.findall(story)]
        assert " ".join(sentences) == story
        assert len(sentences) <= MAX_SENTENCES[task]
        answer = LOCATIONS[label]
        assert resolve(sentences, question, strict=True) == answer
        # Each span is exactly one sentence of the story, in story order, and they alone give the answer.
        support = [story[start:end] for start, end in spans]
        assert all(s in sentences for s in support)
        assert all(start == 0 or story[start - 1] == " " for start, _ in spans)
        assert spans == sorted(set(spans))
        assert resolve(support, question, strict=False) == answer
        support_sizes.append(len(spans))
    assert set(support_sizes) <= SUPPORT_COUNTS[task]
    if task == 3:
        assert np.mean(np.array(support_sizes) == 3) > 0.5  # mostly the classic three facts


@pytest.mark.parametrize("task", [1, 2, 3])
def test_vocabulary_and_label_spread(task):
    split = generate_babi(task, 600, np.random.default_rng(1))
    text = " ".join(split.first + split.second)
    assert set(re.findall(r"\b[A-Z][a-z]+\b", text)) - {"Where"} == set(ACTORS)
    if task > 1:
        assert {obj for obj in OBJECTS if obj in text} == set(OBJECTS)
    counts = np.bincount(split.labels, minlength=len(LOCATIONS))
    assert counts.min() > 0.5 * counts.mean()  # every room is an answer, none dominates


def test_questions_are_interleaved_in_stories():
    split = generate_babi(1, 500, np.random.default_rng(3))
    # Questions of one story share a growing prefix; bAbI-1 asks at most 5 per story.
    run, longest = 1, 1
    for previous, current in zip(split.first, split.first[1:], strict=False):
        run = run + 1 if current.startswith(previous + " ") else 1
        longest = max(longest, run)
    assert longest == 5
    assert all(s.startswith("Where is ") for s in split.second)


def test_default_sizes_are_babi_10k():
    splits = babi_splits(1, seed=0, size=None, test_size=None)
    assert {name: len(split) for name, split in splits.items()} == {
        "train": 8000,
        "validation": 2000,
        "test": 1000,
    }


def test_size_and_test_size_scale_the_splits():
    dataset = load_dataset("babi-3", size=250, test_size=40)
    assert [len(dataset.splits[name]) for name in ("train", "validation", "test")] == [200, 50, 40]
    assert dataset.label_names == list(LOCATIONS)
    assert dataset.metric == "micro_f1" and dataset.epochs == 20


@pytest.mark.parametrize("task", [1, 2, 3])
def test_deterministic_by_seed(task):
    first = babi_splits(task, seed=5, size=60, test_size=20)
    again = babi_splits(task, seed=5, size=60, test_size=20)
    other = babi_splits(task, seed=6, size=60, test_size=20)
    for name in ("train", "validation", "test"):
        assert first[name].first == again[name].first
        assert first[name].second == again[name].second
        assert first[name].supporting == again[name].supporting
        np.testing.assert_array_equal(first[name].labels, again[name].labels)
        assert first[name].first != other[name].first
    # The three splits come from separate streams: no shared story.
    assert first["train"].first[0] != first["validation"].first[0] != first["test"].first[0]


def test_tasks_differ():
    assert babi_splits(1, seed=0, size=10, test_size=1)["train"].second[0].startswith("Where is ")
    assert babi_splits(3, seed=0, size=10, test_size=1)["train"].second[0].startswith("Where was the ")
    with pytest.raises(ValueError, match="1, 2 or 3"):
        generate_babi(4, 10, np.random.default_rng(0))
