"""Measures from outside fmm-fast (docs/guides/your-measure.md): where a plug-in's code comes from, loaded.

Three ways in, each resolved to a Measure class and a MeasureSource (where it came from, and the sha256 of
its source file, which enters the run's fingerprint: a changed measure is another run):
- an import path "package.module:Name" (Name a Measure subclass or a function marked with `measure`);
- a file path "./my_measures.py:Name" (any name ending in .py or holding a "/"), loaded as a module of
  its own;
- a name an installed package registers in the entry-point group "fmm_fast.measures".
A Python object (a Measure class or instance, or a marked function) is turned into such a locator string
by `given_measure`, so that settings, records and Ray workers carry strings; the object itself is kept
for this process. A MeasureSource rebuilds its class in another process (a Ray worker): a file from the
text that was digested, an import path or an entry point by importing it again, checked against the digest.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.errors import UserError
from fmm_fast.measures.base import ExplainBatch, Measure

ENTRY_POINT_GROUP = "fmm_fast.measures"
BUILTIN = "builtin"
MARK = "__fmm_fast_measure__"  # the attribute `measure` sets on a function: its declared flags
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a measure's name names its state file: no path in it
RESERVED = ("shared",)  # the state file every measure of an erasure run shares
FILE_MODULE_PREFIX = "fmm_fast_measure_file_"
CODE = "__fmm_fast_code__"  # a measures file's module keeps the text it ran


@dataclass(frozen=True)
class MeasureSource:
    """Where a measure's code comes from.

    origin: "builtin", "import" (locator "package.module:Name"), "file" (locator "/absolute/path.py:Name"),
    "entry-point" (locator: the entry point's name) or "python" (an object of this process that no import
    reaches, e.g. defined in a notebook: locator "module:qualname"). version: the installed distribution's,
    where one provides the code. sha256: of the source file (of the object's source text where there is no
    file); None for built-in measures (fmm-fast's version names their code). code: a file's text, so a
    worker runs exactly what was digested; obj: a "python" object, shipped to workers as it is.
    """

    origin: str
    locator: str
    version: str | None = None
    sha256: str | None = None
    code: str | None = field(default=None, compare=False, repr=False)
    obj: Any = field(default=None, compare=False, repr=False)

    def record(self) -> dict[str, Any]:
        """What a run record says of the measure's origin."""
        return {"from": self.origin, "locator": self.locator, "version": self.version, "sha256": self.sha256}

    def measure_class(self) -> type[Measure]:
        """The class this source names, loaded once per process (a worker rebuilds it here)."""
        key = (self.origin, self.locator, self.sha256)
        if key not in _LOADED:
            if self.origin == "python":
                loaded = measure_class(self.obj, self.locator)
            elif self.origin == "file" and self.code is not None:
                path, _, attribute = self.locator.rpartition(":")
                loaded = measure_class(
                    _attribute(_file_module(Path(path), self.code), attribute, path), self.locator
                )
            else:
                loaded, found = load_plugin(self.locator)
                if found.sha256 != self.sha256:
                    raise UserError(
                        f"measure {self.locator} changed while the run ran (its source's sha256 is now "
                        f"{_short(found.sha256)}, was {_short(self.sha256)}); rerun it"
                    )
            _LOADED[key] = loaded
        return _LOADED[key]


# (origin, locator, sha256) -> the loaded class; also every object `given_measure` registered
_LOADED: dict[tuple[str, str, str | None], type[Measure]] = {}
_GIVEN: dict[str, tuple[type[Measure], MeasureSource]] = {}  # locator -> an object of this process


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest[:12]


def _sha256_text(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def measure(
    function: Callable[..., Any] | None = None,
    *,
    signed: bool,
    name: str | None = None,
    recursive: bool = True,
    needs_gradients: bool = False,
) -> Any:
    """Mark `function(batch, engine) -> (B, T) scores` as a measure: `@fmm_fast.measure(signed=True)`, or
    `fmm_fast.measure(function, signed=False)`. name: the measure's name (default the function's);
    recursive, needs_gradients: as a Measure declares them. Returns the function itself, marked.

    Example:

        @fmm_fast.measure(signed=False)
        def last_first(batch, engine):
            return np.where(batch.explained, np.arange(batch.input_ids.shape[1], dtype=float), 0.0)

        fmm_fast.evaluate(model, measure=[last_first, "loo-abs"], limit=20)
    """

    def mark(marked: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(marked):
            raise UserError(f"fmm_fast.measure marks a function, got {type(marked).__name__}")
        flags = {"signed": signed, "recursive": recursive, "needs_gradients": needs_gradients}
        for flag, value in flags.items():
            if not isinstance(value, bool):
                raise UserError(f"fmm_fast.measure: {flag} must be True or False, got {value!r}")
        setattr(marked, MARK, {"name": name or marked.__name__, **flags})
        return marked

    return mark if function is None else mark(function)


def _function_measure(function: Callable[..., Any], where: str) -> type[Measure]:
    """A Measure class calling `function(batch, engine)`, with the flags `measure` marked it with."""
    flags = getattr(function, MARK, None)
    if flags is None:
        raise UserError(
            f"measure {where}: the function {function.__qualname__} does not say whether its scores are "
            "signed; mark it with @fmm_fast.measure(signed=True) or @fmm_fast.measure(signed=False)"
        )

    def explain(self: Measure, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        return function(batch, engine)

    attributes = {**flags, "explain": explain, "__doc__": function.__doc__, "__module__": function.__module__}
    made = type(function.__name__, (Measure,), attributes)
    made.__qualname__ = function.__qualname__
    return made


def measure_class(obj: Any, where: str) -> type[Measure]:
    """The Measure class of a plug-in object (a Measure subclass, or a function marked with `measure`),
    its declarations checked; UserError naming `where` (the locator) otherwise."""
    if inspect.isclass(obj) and issubclass(obj, Measure):
        found = obj
    elif callable(obj) and not inspect.isclass(obj):
        found = _function_measure(obj, where)
    else:
        raise UserError(
            f"measure {where} is a {type(obj).__name__}, not a Measure subclass or a function marked with "
            "@fmm_fast.measure(signed=...)"
        )
    if inspect.isabstract(found):
        raise UserError(f"measure {where}: {found.__qualname__} does not define explain(batch, engine)")
    declared = getattr(found, "name", None)
    if not isinstance(declared, str) or not NAME.fullmatch(declared) or declared in RESERVED:
        raise UserError(
            f"measure {where}: name must be letters, digits, '.', '_', '+' or '-' (not 'shared'), got "
            f"{declared!r}; set the class attribute `name`"
        )
    for flag in ("signed", "recursive", "needs_gradients"):
        if not isinstance(getattr(found, flag, None), bool):
            raise UserError(
                f"measure {where}: {flag} must be True or False; set the class attribute `{flag}`"
            )
    return found


def _file_module(path: Path, code: str) -> ModuleType:
    """The module of a measures file run from `code` (its text), registered under a name made from the
    digest: classes defined there pickle, and one content is one module per process."""
    name = FILE_MODULE_PREFIX + _sha256_text(code)[:16]
    if name not in sys.modules:
        module = ModuleType(name)
        module.__file__ = str(path)
        module.__dict__[CODE] = code
        sys.modules[name] = module
        try:
            exec(compile(code, str(path), "exec"), module.__dict__)
        except Exception as error:
            del sys.modules[name]
            raise UserError(
                f"measure file {path} fails to load ({type(error).__name__}: {error}); fix it"
            ) from None
    return sys.modules[name]


def _attribute(module: ModuleType, attribute: str, where: str) -> Any:
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise UserError(
                f"--measure {where}: it has no '{attribute}'; name a class or function defined there"
            )
        value = getattr(value, part)
    return value


def _distribution_version(module_name: str) -> str | None:
    """The version of the installed distribution that provides top-level package `module_name`."""
    top = module_name.partition(".")[0]
    names = metadata.packages_distributions().get(top, [])
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _object_digest(obj: Any) -> str | None:
    """sha256 of the source file that defines `obj` (of its own source text where no file holds it)."""
    try:
        source_file = inspect.getsourcefile(obj)
    except TypeError:
        source_file = None
    if source_file and Path(source_file).is_file():
        return _sha256_text(Path(source_file).read_bytes())
    try:
        return _sha256_text(inspect.getsource(obj))
    except (OSError, TypeError):
        return None


def is_plugin_locator(text: str) -> bool:
    """Whether a --measure value names a plug-in by path ("MODULE:Name", "FILE.py:Name")."""
    return ":" in text


def absolute_locator(text: str) -> str:
    """A --measure value with a relative measures file made absolute ("./m.py:Name" -> "/abs/m.py:Name"),
    for a command run in another working directory; any other value as it is."""
    left, _, attribute = text.rpartition(":")
    if is_plugin_locator(text) and (left.endswith(".py") or "/" in left):
        return f"{Path(left).expanduser().resolve()}:{attribute}"
    return text


def load_plugin(text: str) -> tuple[type[Measure], MeasureSource]:
    """The class and source of the plug-in `text` names (see the module docstring); UserError when nothing
    loads from it."""
    if text in _GIVEN:
        return _GIVEN[text]
    if not is_plugin_locator(text):
        return _entry_point(text)
    left, _, attribute = text.rpartition(":")
    if not left or not attribute:
        raise UserError(f"--measure {text}: give package.module:Name or ./file.py:Name")
    if absolute_locator(text) != text or Path(left).is_absolute():
        path = Path(absolute_locator(text).rpartition(":")[0])
        if not path.is_file():
            raise UserError(f"--measure {text}: no file {path}; give ./file.py:Name with an existing file")
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"--measure {text}: cannot read {path} ({error})") from None
        locator = f"{path}:{attribute}"
        found = measure_class(_attribute(_file_module(path, code), attribute, text), locator)
        return found, MeasureSource("file", locator, None, _sha256_text(code), code=code)
    try:
        module = importlib.import_module(left)
    except Exception as error:  # an import runs the user's code: any failure is theirs to fix
        raise UserError(
            f"--measure {text}: cannot import {left} ({type(error).__name__}: {error}); install it or put "
            "it on PYTHONPATH, or give ./file.py:Name"
        ) from None
    obj = _attribute(module, attribute, text)
    found = measure_class(obj, text)
    return found, MeasureSource("import", text, _distribution_version(left), _object_digest(module))


def entry_point_names() -> list[str]:
    """The measure names installed packages register (entry-point group fmm_fast.measures)."""
    return sorted({point.name for point in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def _entry_point(name: str) -> tuple[type[Measure], MeasureSource]:
    points = [p for p in metadata.entry_points(group=ENTRY_POINT_GROUP) if p.name == name]
    if not points:
        raise KeyError(name)
    point = points[0]
    try:
        obj = point.load()
    except Exception as error:  # the package's code: name it
        raise UserError(
            f"--measure {name}: the entry point {point.value} fails to load ({type(error).__name__}: "
            f"{error}); fix or reinstall its package"
        ) from None
    found = measure_class(obj, f"{name} (entry point {point.value})")
    version = point.dist.version if point.dist is not None else None
    module = sys.modules.get(point.value.partition(":")[0])
    return found, MeasureSource("entry-point", name, version, _object_digest(module or obj))


def given_measure(obj: Any) -> tuple[str, dict[str, Any]]:
    """A Python object given as a measure, as the locator string runs carry and the options it holds.

    A Measure class or a marked function: its import path ("module:qualname"); one defined in a script
    run as __main__: that file's path (a Ray worker loads the file, so keep its top level under
    `if __name__ == "__main__":`); one no import reaches (a notebook's, a nested one): its own qualname,
    usable in this process and shipped to workers as an object. A Measure instance: its class, with the
    options read back from the attributes named after its constructor's parameters (sklearn's
    convention), so each step builds a fresh one."""
    options: dict[str, Any] = {}
    if isinstance(obj, Measure):
        options = _instance_options(obj)
        obj = type(obj)
    module = getattr(obj, "__module__", None) or ""
    qualname = getattr(obj, "__qualname__", type(obj).__name__)
    found = measure_class(obj, qualname)
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    file, code = None, None
    if module.startswith(FILE_MODULE_PREFIX):  # a measures file loaded here: the text it ran
        file, code = sys.modules[module].__file__, getattr(sys.modules[module], CODE)
    elif module == "__main__" and main_file and "<locals>" not in qualname:  # the script being run
        file = str(Path(main_file).resolve())
        code = Path(file).read_text(encoding="utf-8")
    if file is not None and code is not None:
        source = MeasureSource("file", f"{file}:{qualname}", None, _sha256_text(code), code=code)
    elif module and module != "__main__" and "<locals>" not in qualname and _reachable(module, qualname, obj):
        source = MeasureSource(
            "import",
            f"{module}:{qualname}",
            _distribution_version(module),
            _object_digest(sys.modules[module]),
        )
    else:
        source = MeasureSource(
            "python", f"{module or 'python'}:{qualname}", None, _object_digest(obj), obj=obj
        )
    _GIVEN[source.locator] = (found, source)
    _LOADED[(source.origin, source.locator, source.sha256)] = found
    return source.locator, options


def _reachable(module: str, qualname: str, obj: Any) -> bool:
    """Whether importing `module` and following `qualname` gives `obj` back (another process can)."""
    value: Any = sys.modules.get(module)
    for part in qualname.split("."):
        value = getattr(value, part, None)
    return value is obj


def _instance_options(instance: Measure) -> dict[str, Any]:
    """The constructor options of a Measure instance, read from its attributes of the same names."""
    parameters = [p for p in inspect.signature(type(instance)).parameters if p != "seed"]
    missing = [p for p in parameters if not hasattr(instance, p)]
    if missing:
        raise UserError(
            f"measure {type(instance).__qualname__}(...): fmm-fast builds a fresh one per step from its "
            f"constructor options, but the instance keeps no attribute {', '.join(missing)}; store each "
            "option as self.<name> in __init__, or give the class with measure_option={...}"
        )
    return {p: getattr(instance, p) for p in parameters}
