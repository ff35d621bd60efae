"""Our own deterministic generator of bAbI tasks 1–3 (Weston et al., 2015), so they work offline.

Task 1, single supporting fact: actors move; "Where is Mary?".
Task 2, two supporting facts: actors also pick up and drop objects; "Where is the football?".
Task 3, three supporting facts: "Where was the football before the kitchen?".

A story is a sequence of sentences with questions interleaved. Each question is one example: `first` is
the story so far (questions left out), `second` the question, the label the answer location, and
`supporting` the character spans of the sentences that determine the answer. Answers are read off the
simulated world, so they are correct by construction.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from fmm_fast.data.base import TextSplit, validation_count

ACTORS = ("Mary", "John", "Daniel", "Sandra")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")  # the label set
OBJECTS = ("apple", "football", "milk")
MOVE_PHRASES = ("moved to", "went to", "went back to", "journeyed to", "travelled to")
GRAB_PHRASES = ("picked up", "got", "grabbed", "took")
DROP_PHRASES = ("dropped", "discarded", "put down", "left")

TRAIN_SIZE = 10_000  # bAbI-10k: train-style questions per task, split 80/20 into train/validation
TEST_SIZE = 1_000
MAX_GENERATED = 100_000  # questions per split at most: ten times bAbI-10k, a few seconds to generate
QUESTIONS_PER_STORY = 5
MAX_STORY_SENTENCES = {1: 10, 2: 30, 3: 30}  # keeps token lengths modest
# Event mix for tasks 2 and 3 (moves, pick-ups, drops), and how much likelier an actor carrying something
# is to be the one who moves: task 3 needs objects carried through several rooms.
EVENT_WEIGHTS = {"move": 0.55, "grab": 0.25, "drop": 0.2}
CARRIER_MOVE_WEIGHT = 3.0


@dataclass
class _Placement:
    """An object was at `location`; `evidence` are the sentence indices that establish it."""

    location: int
    evidence: frozenset[int]


@dataclass
class _World:
    """The simulated state behind one story. Sentence indices count story sentences from 0."""

    actor_location: dict[str, int] = field(default_factory=dict)
    last_move: dict[str, int] = field(default_factory=dict)  # actor -> sentence of its latest move
    holder: dict[str, str] = field(default_factory=dict)  # object -> actor carrying it
    grab_sentence: dict[str, int] = field(default_factory=dict)  # object -> its latest pick-up
    drop_evidence: dict[str, frozenset[int]] = field(default_factory=dict)  # lying object -> {move, drop}
    history: dict[str, list[_Placement]] = field(default_factory=dict)  # object -> rooms it went through

    def move(self, actor: str, location: int, sentence: int) -> None:
        self.actor_location[actor] = location
        self.last_move[actor] = sentence
        for obj, carrier in self.holder.items():
            if carrier == actor:
                self.history[obj].append(_Placement(location, frozenset((self.grab_sentence[obj], sentence))))

    def grab(self, actor: str, obj: str, sentence: int) -> None:
        self.holder[obj] = actor
        self.grab_sentence[obj] = sentence
        self.drop_evidence.pop(obj, None)
        if obj not in self.history:  # first sighting: it is where the actor is
            evidence = frozenset((self.last_move[actor], sentence))
            self.history[obj] = [_Placement(self.actor_location[actor], evidence)]

    def drop(self, actor: str, obj: str, sentence: int) -> None:
        del self.holder[obj]
        self.drop_evidence[obj] = frozenset((self.last_move[actor], sentence))

    def object_location(self, obj: str) -> tuple[int, frozenset[int]]:
        """Where the object is now and the two facts that say so (pick-up + move, or move + drop)."""
        location = self.history[obj][-1].location
        if obj in self.holder:
            carrier = self.holder[obj]
            return location, frozenset((self.grab_sentence[obj], self.last_move[carrier]))
        return location, self.drop_evidence[obj]


class _StoryWriter:
    """One story's text so far and each sentence's [start, end) character span in it."""

    def __init__(self) -> None:
        self.text = ""
        self.spans: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.spans)

    def add(self, sentence: str) -> None:
        start = len(self.text) + 1 if self.text else 0
        self.text = f"{self.text} {sentence}" if self.text else sentence
        self.spans.append((start, len(self.text)))


class _Generator:
    """Draws stories of one task and collects one example per question."""

    def __init__(self, task: int, rng: np.random.Generator) -> None:
        self.task = task
        self.rng = rng
        self.first: list[str] = []
        self.second: list[str] = []
        self.labels: list[int] = []
        self.supporting: list[list[tuple[int, int]]] = []

    def pick(self, options: list | tuple):
        return options[int(self.rng.integers(len(options)))]

    def weighted_index(self, weights: list[float]) -> int:
        """An index drawn with probability proportional to its weight (cheaper than rng.choice(p=...))."""
        threshold = self.rng.random() * sum(weights)
        for index, weight in enumerate(weights):
            threshold -= weight
            if threshold < 0:
                return index
        return len(weights) - 1

    def generate(self, count: int) -> TextSplit:
        while len(self.labels) < count:
            self.story(count - len(self.labels))
        return TextSplit(self.first, self.second, np.asarray(self.labels, np.int64), self.supporting)

    def story(self, wanted: int) -> None:
        world, writer = _World(), _StoryWriter()
        limit = MAX_STORY_SENTENCES[self.task]
        asked: set[tuple[str, int]] = set()
        while len(asked) < min(wanted, QUESTIONS_PER_STORY) and len(writer) < limit:
            for _ in range(self.block_length()):
                if len(writer) < limit:
                    self.event(world, writer)
            question = self.question(world, asked)
            if question is not None:
                text, answer, evidence = question
                self.first.append(writer.text)
                self.second.append(text)
                self.labels.append(answer)
                self.supporting.append([writer.spans[i] for i in sorted(evidence)])
                asked.add((text, answer))

    def block_length(self) -> int:
        """Statements between two questions: bAbI-1 alternates two moves and a question."""
        return 2 if self.task == 1 else int(self.rng.integers(1, 5))

    def event(self, world: _World, writer: _StoryWriter) -> None:
        sentence = len(writer)
        # An object lying in a room can be picked up only there; one never mentioned, anywhere.
        grabs = [
            (actor, obj)
            for actor, location in world.actor_location.items()
            for obj in OBJECTS
            if obj not in world.holder
            and (obj not in world.history or world.history[obj][-1].location == location)
        ]
        drops = [(actor, obj) for obj, actor in world.holder.items()]
        kinds = ["move"] if self.task == 1 else ["move"] + ["grab"] * bool(grabs) + ["drop"] * bool(drops)
        weights = [EVENT_WEIGHTS[kind] for kind in kinds]
        kind = kinds[self.weighted_index(weights)]
        if kind == "grab":
            actor, obj = self.pick(grabs)
            world.grab(actor, obj, sentence)
            writer.add(f"{actor} {self.pick(GRAB_PHRASES)} the {obj} there.")
        elif kind == "drop":
            actor, obj = self.pick(drops)
            world.drop(actor, obj, sentence)
            writer.add(f"{actor} {self.pick(DROP_PHRASES)} the {obj}.")
        else:
            carriers = set(world.holder.values())
            actor = ACTORS[
                self.weighted_index([CARRIER_MOVE_WEIGHT if a in carriers else 1.0 for a in ACTORS])
            ]
            current = world.actor_location.get(actor)
            location = self.pick([loc for loc in range(len(LOCATIONS)) if loc != current])
            world.move(actor, location, sentence)
            writer.add(f"{actor} {self.pick(MOVE_PHRASES)} the {LOCATIONS[location]}.")

    def question(self, world: _World, asked: set[tuple[str, int]]) -> tuple[str, int, frozenset[int]] | None:
        """A random (question, answer location, supporting sentences) not yet `asked` with that answer.

        None when nothing is askable yet.
        """
        candidates = [c for c in self.candidates(world) if (c[0], c[1]) not in asked]
        return self.pick(candidates) if candidates else None

    def candidates(self, world: _World) -> list[tuple[str, int, frozenset[int]]]:
        if self.task == 1:
            return [
                (f"Where is {actor}?", location, frozenset((world.last_move[actor],)))
                for actor, location in world.actor_location.items()
            ]
        if self.task == 2:
            return [(f"Where is the {obj}?", *world.object_location(obj)) for obj in world.history]
        # Task 3: a room the object entered exactly once (so "before" is unambiguous), not its first one.
        found = []
        for obj, placements in world.history.items():
            rooms = [placement.location for placement in placements]
            for before, after in itertools.pairwise(placements):
                if rooms.count(after.location) == 1:
                    question = f"Where was the {obj} before the {LOCATIONS[after.location]}?"
                    found.append((question, before.location, before.evidence | after.evidence))
        return found


def generate_babi(task: int, count: int, rng: np.random.Generator) -> TextSplit:
    """`count` examples of bAbI task 1, 2 or 3 drawn with `rng` (the last story stops at `count`)."""
    if task not in MAX_STORY_SENTENCES:
        raise ValueError(f"bAbI task must be 1, 2 or 3, not {task}")
    return _Generator(task, rng).generate(count)


def babi_splits(task: int, *, seed: int, size: int | None, test_size: int | None) -> dict[str, TextSplit]:
    """Train/validation (size questions, 80/20, default 10,000) and test (default 1,000) for one task.

    Each split draws from its own random stream (seed, task, split), independent of the other sizes.
    """
    size = TRAIN_SIZE if size is None else size
    test_size = TEST_SIZE if test_size is None else test_size
    counts = {"train": size - validation_count(size), "validation": validation_count(size), "test": test_size}
    return {
        name: generate_babi(task, count, np.random.default_rng([seed, task, stream]))
        for stream, (name, count) in enumerate(counts.items())
    }
