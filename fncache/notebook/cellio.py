"""What a ``%%fncache`` cell showed and left behind: recorded while it runs, stored, replayed.

:func:`recorded` tees ``sys.stdout``, ``sys.stderr`` and the shell's display publisher for one run,
so the cell's output still appears as it is produced; :func:`replay` shows a stored recording
again. :func:`storable` checks that a value the cell bound can be pickled (into nothing: large
buffers are not copied) and says whether it must be copied by value; :func:`rebind_code` makes
notebook code read back from the store read the notebook's globals again.

Not recorded: output written below Python's ``sys.stdout`` (a C library or a subprocess writing to
file descriptor 1), which is shown but not replayed; widgets, whose model lives in the kernel, are
counted as lost and the replay says so.
"""

from __future__ import annotations

import logging
import pickle
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Recording", "describe_type", "rebind_code", "recorded", "replay", "say", "storable"]

log = logging.getLogger("fncache")

# Display outputs that point at state living in the kernel (a widget's model): replaying the message
# after a restart would show "model not found".
_KERNEL_STATE_MIMES = ("application/vnd.jupyter.widget-view+json",)
_MISSING = object()


@dataclass
class Recording:
    """What one run of a cell showed, in order: ``("stream", name, text)``, ``("display", data,
    metadata, kwargs)``, ``("clear", wait)``; and how many displays cannot be replayed."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    lost: int = 0

    def stream(self, name: str, text: str) -> None:
        last = self.events[-1] if self.events else None
        if last is not None and last[0] == "stream" and last[1] == name:
            self.events[-1] = ("stream", name, last[2] + text)
        else:
            self.events.append(("stream", name, text))

    def display(self, data: Any, metadata: Any, kwargs: dict[str, Any]) -> None:
        if isinstance(data, dict) and any(m in data for m in _KERNEL_STATE_MIMES):
            self.lost += 1
            return
        event = ("display", data, metadata, kwargs)
        try:
            pickle.dumps(event, protocol=5)
        except Exception:
            self.lost += 1
            return
        self.events.append(event)


class _Tee:
    """A text stream that writes through to ``inner`` and records what was written."""

    def __init__(self, inner: Any, name: str, recording: Recording) -> None:
        self._inner = inner
        self._name = name
        self._recording = recording

    def write(self, text: str) -> int:
        n = self._inner.write(text)
        if isinstance(text, str):
            self._recording.stream(self._name, text)
        return n  # type: ignore[no-any-return]

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _DisplayTee:
    """The shell's display publisher, also recording each display (IPython.display.display)."""

    def __init__(self, inner: Any, recording: Recording) -> None:
        self._inner = inner
        self._recording = recording

    def publish(self, data: Any, metadata: Any = None, source: Any = None, **kwargs: Any) -> None:
        self._inner.publish(data=data, metadata=metadata, **kwargs)
        self._recording.display(data, metadata, kwargs)

    def clear_output(self, wait: bool = False) -> None:
        self._inner.clear_output(wait)
        self._recording.events.append(("clear", bool(wait)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def recorded(shell: Any) -> Iterator[Recording]:
    rec = Recording()
    out, err, pub = sys.stdout, sys.stderr, shell.display_pub
    sys.stdout, sys.stderr = _Tee(out, "stdout", rec), _Tee(err, "stderr", rec)
    shell.display_pub = _DisplayTee(pub, rec)
    try:
        yield rec
    finally:
        sys.stdout, sys.stderr = out, err
        shell.display_pub = pub


def replay(shell: Any, payload: dict[str, Any]) -> None:
    for event in payload["events"]:
        if event[0] == "stream":
            stream = sys.stderr if event[1] == "stderr" else sys.stdout
            stream.write(event[2])
            stream.flush()
        elif event[0] == "display":
            shell.display_pub.publish(data=event[1], metadata=event[2], **event[3])
        elif event[0] == "clear":
            shell.display_pub.clear_output(event[1])
    if payload["lost"]:
        say(f"{payload['lost']} display output(s) of this cell could not be stored (widgets or "
             "unpicklable data) and are not shown again")


# ---------------------------------------------------------------------------------------------
# Storing outputs
# ---------------------------------------------------------------------------------------------

class _NullFile:
    def write(self, b: Any) -> int:
        return len(b)


class _DryRun(pickle.Pickler):
    """Pickles into nothing (large buffers are not copied), noting the code of the notebook that
    plain pickle would take by name although the notebook did not define it before the cell ran."""

    def __init__(self, before: dict[str, Any], main: str) -> None:
        super().__init__(_NullFile(), protocol=5, buffer_callback=lambda b: None)
        self.before = before
        self.main = main
        self.new_code = False

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == self.main \
                and self.before.get(getattr(obj, "__name__", ""), _MISSING) is not obj:
            self.new_code = True
        return NotImplemented


def storable(value: Any, before: dict[str, Any], main: str) -> tuple[str | None, bool]:
    """(why ``value`` cannot be pickled or None, whether it must be pickled by value).

    Plain pickle takes a notebook's function or class by name, which is right for one an earlier
    cell defines (the restarted notebook defines it again before this cell) and wrong for one this
    cell defines (a hit would look it up before anything defines it): such values go through
    cloudpickle, which copies the code.
    """
    dry = _DryRun(before, main)
    try:
        dry.dump(value)
        if not dry.new_code:
            return None, False
    except Exception:
        pass
    try:
        import cloudpickle

        cloudpickle.CloudPickler(_NullFile(), protocol=5, buffer_callback=lambda b: None).dump(value)
        return None, True
    except Exception as e:
        return f"{type(e).__name__}: {e}", True


def rebind_code(value: Any, namespace: dict[str, Any]) -> Any:
    """A notebook function or class read back from the store, made to read the notebook's globals.

    cloudpickle gives code of ``__main__`` copied by value a globals dict of its own: without this,
    a function a cached cell defined (or a method of a class it defined) would keep reading the
    values the notebook's globals had when the cell was stored.
    """
    main = namespace.get("__name__")
    if isinstance(value, types.FunctionType):
        return _rebound(value, namespace) if value.__module__ == main else value
    if isinstance(value, type) and value.__module__ == main:
        for name, attr in list(vars(value).items()):
            if isinstance(attr, types.FunctionType):
                setattr(value, name, _rebound(attr, namespace))
            elif isinstance(attr, (staticmethod, classmethod)) and \
                    isinstance(attr.__func__, types.FunctionType):
                setattr(value, name, type(attr)(_rebound(attr.__func__, namespace)))
    return value


def _rebound(value: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    if value.__globals__ is namespace:
        return value  # taken by name: the notebook's own function
    fn = types.FunctionType(value.__code__, namespace, value.__name__, value.__defaults__,
                            value.__closure__)
    fn.__kwdefaults__ = value.__kwdefaults__
    fn.__qualname__ = value.__qualname__
    fn.__annotations__ = value.__annotations__
    fn.__doc__ = value.__doc__
    fn.__dict__.update(value.__dict__)
    return fn


def say(line: str) -> None:
    print(f"[fncache] {line}", file=sys.stderr, flush=True)
    log.info("%%%%fncache: %s", line)


def describe_type(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
