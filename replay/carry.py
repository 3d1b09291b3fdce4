"""Whether a difference between two runs only carries their different inputs through.

Two runs given other inputs differ wherever the input flows: the question
in every prompt, the state key that holds it. Such differences are real but
say nothing about where the runs went different ways, so the run diff lists
them as carried and never names one as the first difference.
"""

from __future__ import annotations

from typing import Any

CARRY_MIN = 4  # an input text this long is followed into longer texts (a prompt); shorter ones only as whole values


class Carry:
    """Whether a difference only carries the runs' different inputs through.

    The inputs' differing leaves are paired up. A's value with A's texts
    replaced by B's (whole, or inside a longer text for texts of
    ``CARRY_MIN`` characters or more: a question inside a prompt) and A's
    numbers replaced by B's where they sit under the same key as in the
    input (a number is too common to follow anywhere) equal to B's value
    means the difference came in with the input.
    """

    def __init__(self, inputs_a: Any, inputs_b: Any) -> None:
        pairs: list[tuple[str | None, Any, Any]] = []
        _leaf_pairs(inputs_a, inputs_b, None, pairs)
        self.texts = [(x, y) for _, x, y in pairs if isinstance(x, str)]
        self.inside = [(x, y) for x, y in self.texts if len(x) >= CARRY_MIN]
        self.numbers = {(key, x): y for key, x, y in pairs if not isinstance(x, str) and key is not None}

    def __bool__(self) -> bool:
        return bool(self.texts or self.numbers)

    def explains(self, a: Any, b: Any, key: str | None = None) -> bool:
        """Whether ``a`` (A's, found under ``key`` if it is a state value) carried over is ``b``."""
        return bool(self) and self._swap(a, key) == b

    def _swap(self, v: Any, key: str | None) -> Any:
        if isinstance(v, str):
            for x, y in self.texts:
                if v == x:
                    return y
            for x, y in self.inside:
                if x in v:
                    v = v.replace(x, y)
            return v
        if isinstance(v, dict):
            return {k: self._swap(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self._swap(x, key) for x in v]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            y = self.numbers.get((key, v))
            if y is not None and type(y) is type(v):
                return y
        return v


def _leaf_pairs(a: Any, b: Any, key: str | None, out: list[tuple[str | None, Any, Any]]) -> None:
    """The leaves where two inputs differ, with the dict key each sits under."""
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() & b.keys():
            _leaf_pairs(a[k], b[k], str(k), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b):
            _leaf_pairs(x, y, key, out)
    elif type(a) is type(b) and isinstance(a, (str, int, float)) and not isinstance(a, bool):
        out.append((key, a, b))
