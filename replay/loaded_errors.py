"""The exception class a recorded error's type names, found among what this process already loaded.

A recording keeps an error's type by name, and graphtape never imports a name read from
data. But the graph being replayed is the user's own code, already imported, and so are the
classes its retry policies and handlers test for (``RetryPolicy(retry_on=RateLimited)``,
``except SomeError``). Such a class is looked up by name in the namespaces of the modules
already in ``sys.modules`` (their ``__dict__``, so no module ``__getattr__`` runs and nothing
is imported). The recording names the class by its module (``recorder.error_fields``): that
one or none. An older recording names only the type: of several classes of that name, the
one all the others derive from, else the one whose file the recorded traceback passed
through. The instance is made without calling any of the class's code, so only a class with
none of its own is taken, or one whose only code is an ``__init__`` whose attributes the
recording kept (an SDK's error: its ``response``), set as recorded. A class a hostile recording names must not run code by being raised. Anything
else stays a stand-in (``calls``).
"""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace
from typing import Any

from graphtape.recorder.codec import qualified_name
from graphtape.recorder.error_fields import CLASS, KEY, OBJECT

_lock = threading.Lock()
_found: dict[str, tuple[type[Exception], ...]] = {}
_MAX_NAMES = 1_000  # distinct names looked up per process (a hostile recording names many)
_MAX_FIELDS = 64  # attributes set on one rebuilt error


def loaded_error(type_name: str, message: str, frames: Any = None, fields: Any = None) -> Exception | None:
    """An instance of the loaded exception class named ``type_name``, carrying ``message`` and the
    attributes the recording kept (``fields``, see ``recorder.error_fields``); None if there is
    none, or several and neither the classes nor the error's recorded traceback (``frames``,
    ``[file, line, function, source]``: the package it was raised in) tell which, or the class
    sets up what the recording did not keep."""
    classes = _classes_named(type_name)
    named = _recorded_class_name(fields)
    if named is not None:  # the recording says which: that one or none (never another of its name)
        cls = next((c for c in classes if qualified_name(c) == named), None) or _one([c for c in classes if _same_script(named, c)])
    else:
        cls = _one(classes) or _one(_raised_in(classes, frames))
    kept = kept_fields(fields, cls) if cls is not None else {}
    if cls is None or not (_carries_only_args(cls) or (kept and _carries_only_args(cls, but=("__init__",)))):
        return None
    try:
        # Made by the built-in class it derives from, which no code of the class runs in: a
        # built-in with a layout of its own (OSError, so ConnectionError and TimeoutError) makes
        # its own instances, and Exception.__new__ refuses them.
        error = _builtin_base(cls).__new__(cls)
        error.args = (message,)
        error.__dict__.update(kept)  # what its __init__ set, as recorded: no code of the class runs
    except Exception:  # noqa: BLE001 - a class with a layout of its own
        return None
    return error


_USER_FILE = "_graphtape_user_"  # the module name replay's loader gives a file it loads by path


def _same_script(named: str, cls: type) -> bool:
    """Whether ``cls`` is the class ``named`` (``module.QualName``) names, its file loaded under
    another module name: a script run as ``__main__`` when recorded, loaded by path now (as
    ``_graphtape_user_<stem>_<digest>``), or the other way round."""
    qual = getattr(cls, "__qualname__", "")
    if not named.endswith("." + qual):
        return False
    recorded, here = named[: -len(qual) - 1], getattr(cls, "__module__", "")
    if recorded == "__main__":
        return here == "__main__" or here.startswith(_USER_FILE)
    if here.startswith(_USER_FILE):
        return here[len(_USER_FILE) :].rpartition("_")[0] == recorded.rpartition(".")[2]
    return here == "__main__" and "." not in recorded and getattr(sys.modules.get("__main__"), "__file__", "").endswith(f"/{recorded}.py")


def _recorded_class_name(fields: Any) -> str | None:
    """``module.QualName`` of the recorded error's class, where the recording kept it."""
    named = fields.get(CLASS) if isinstance(fields, dict) else None
    return named if isinstance(named, str) else None


def kept_fields(fields: Any, cls: type) -> dict[str, Any]:
    """The recorded attributes as values to set on an instance of ``cls``: an object among them
    (a response) as a namespace of its recorded attributes (``error.response.status_code``).
    A name the class itself defines (a method, a property) is left alone: a recording does
    not get to hide one."""
    found = fields.get(KEY) if isinstance(fields, dict) else None
    if not isinstance(found, dict):
        return {}
    out: dict[str, Any] = {}
    for name, value in list(found.items())[:_MAX_FIELDS]:
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")) or any(name in vars(c) for c in cls.__mro__):
            continue
        if isinstance(value, dict) and OBJECT in value:
            value = SimpleNamespace(**{k: v for k, v in value.items() if isinstance(k, str) and k.isidentifier() and not k.startswith("_")})
        out[name] = value
    return out


def _classes_named(name: str) -> tuple[type[Exception], ...]:
    with _lock:
        if name in _found:
            return _found[name]
        if len(_found) >= _MAX_NAMES:
            return ()  # a recording naming this many types: stand-ins, not a scan of every module each
    found = _scan(name)
    with _lock:
        if len(_found) < _MAX_NAMES:
            _found[name] = found
    return found


def _scan(name: str) -> tuple[type[Exception], ...]:
    from langgraph.errors import GraphBubbleUp

    found: dict[int, type[Exception]] = {}
    for module in list(sys.modules.values()):
        namespace = _namespace(module)
        value = namespace.get(name) if namespace is not None else None
        if not (isinstance(value, type) and issubclass(value, Exception) and value.__name__ == name):
            continue
        # LangGraph's control flow (an interrupt, a parent command) is never a recorded call's error.
        if not issubclass(value, GraphBubbleUp) and not value.__module__.startswith("graphtape."):
            found[id(value)] = value
    return tuple(found.values())


def _one(classes: tuple[type[Exception], ...]) -> type[Exception] | None:
    """The one class, or of several the one all the others derive from (json's ``JSONDecodeError``,
    which orjson's and requests' extend: it passes every check the run's did up to it)."""
    base = [c for c in classes if all(issubclass(other, c) for other in classes)]
    return base[0] if len(base) == 1 else None


_OWN_CODE = ("__init__", "__new__", "__str__", "__repr__", "__getattr__", "__getattribute__", "__setattr__", "__del__")


def _carries_only_args(cls: type, but: tuple[str, ...] = ()) -> bool:
    """Whether an instance of ``cls`` is all in its ``args`` and runs none of its class's code:
    no class of it but Python's own sets anything up (``__init__``: made without it, an HTTP
    error would lack the ``response`` its handlers read, unless the recording kept it: ``but``),
    shows it, or watches its attributes or its end. A class a recording names must not get to
    run code by being raised."""
    watched = [name for name in _OWN_CODE if name not in but]
    return type(cls) is type and not any(c.__module__ != "builtins" and any(name in vars(c) for name in watched) for c in cls.__mro__)


def _builtin_base(cls: type) -> type:
    """The most derived built-in class of ``cls`` (its instances' layout)."""
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _raised_in(classes: tuple[type[Exception], ...], frames: Any) -> tuple[type[Exception], ...]:
    """Those of ``classes`` whose module's file the error's traceback passed through (an SDK raises
    its own; a graph's file raises the class it defines)."""
    if len(classes) < 2 or not isinstance(frames, list):
        return ()
    files = [frame[0].replace("\\", "/") for frame in frames[-_FRAMES_READ:] if isinstance(frame, list) and frame and isinstance(frame[0], str)]
    tails = [(c, _file_tail(c)) for c in classes]
    for f in reversed(files):  # the innermost frame first: where it was raised
        found = tuple(c for c, tail in tails if tail is not None and (f == tail or f.endswith("/" + tail)))
        if found:
            return found
    return ()


def _file_tail(cls: type) -> str | None:
    """The last two parts of the path of the file ``cls`` was defined in (``myapp/billing.py``),
    read from the loaded module's namespace, never imported."""
    namespace = _namespace(sys.modules.get(cls.__module__))
    path = namespace.get("__file__") if namespace is not None else None
    if not isinstance(path, str):
        return None
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


_FRAMES_READ = 50  # the innermost frames: where the error was raised


def builtin_bases(name: str) -> tuple[type[Exception], ...]:
    """The most derived built-in exception class every loaded class named ``name`` derives from
    (``ValueError`` for a ``JSONDecodeError``): a stand-in for it is one of those too."""
    common: list[type] | None = None
    for cls in _classes_named(name):
        mro = [c for c in cls.__mro__ if c.__module__ == "builtins" and issubclass(c, Exception) and c is not Exception]
        common = mro if common is None else [c for c in common if c in mro]
    return tuple(common[:1]) if common else ()


def _namespace(module: Any) -> dict[str, Any] | None:
    try:
        namespace = object.__getattribute__(module, "__dict__")
    except Exception:  # noqa: BLE001 - an odd object in sys.modules
        return None
    return namespace if isinstance(namespace, dict) else None


def forget() -> None:
    """Look again next time (tests load classes after a first lookup)."""
    with _lock:
        _found.clear()
