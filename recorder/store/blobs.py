"""Reading blobs: content-addressed values (messages, long strings) fetched once, cached, and decoded.

A blob can refer to other blobs; they are resolved when it is read, within
bounds (depth, values expanded), so a hand-edited store can neither loop nor
explode. ``decode`` turns an encoded tree into values: plain data, or live
objects (messages, registered types) with ``typed``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.codec import BLOB_REF, MAX_DEPTH, MAX_VALUES, DecodedBlobs, DecodeError, Decoder, collect_refs, count_values
from graphtape.recorder.errors import StoreError
from graphtape.recorder.history_blocks import is_cat
from graphtape.recorder.store.connection import _one_line
from graphtape.recorder.store.payloads import unpack
from graphtape.recorder.store.read_guard import _READ_BUDGET, read_budget

_BLOBS = sa.select(S.blobs).where(S.blobs.c.hash.in_(sa.bindparam("hashes", expanding=True)))


class _Resolution:
    """One ``blobs`` read resolving the references inside the trees it read (see ``blobs``).

    A hand-edited store could loop, chain or multiply references without end. Loops are
    refused; depth is counted across blobs; resolved blobs are shared, so each costs one walk;
    and the values each expands to are counted, so that a few blobs that each reference the
    next twice are refused rather than handed on. An object, not two closures calling each
    other: those make a reference cycle that keeps every tree read until a full collection.
    """

    def __init__(self, reads: BlobReads, trees: dict[str, Any], nesting: dict[str, set[str]]) -> None:
        self.reads = reads
        self.trees = trees
        self.nesting = nesting  # blob -> the blobs it references
        self.resolved: dict[str, Any] = {}
        self.weights: dict[str, int] = {}
        self.holders: set[str] = set()  # blobs whose resolved tree holds history blocks (as references)

    def resolve(self, h: str, seen: tuple[str, ...], depth: int) -> int:
        resolved, weights = self.resolved, self.weights
        if h not in resolved:
            if h in self.nesting:
                resolved[h], weights[h] = self.inline(self.trees[h], (*seen, h), depth)
                if weights[h] > MAX_VALUES:
                    raise StoreError(f"{self.reads._safe_url()} holds damaged data (blob {h:.16} expands to more than {MAX_VALUES:,} values through the blobs it references)")
            else:
                resolved[h] = self.trees[h]
                weights[h] = self.reads._blob_weights.get(h) or count_values(self.trees[h])
        return weights[h]

    def inline(self, x: Any, seen: tuple[str, ...], depth: int) -> tuple[Any, int]:
        if depth > 3 * MAX_DEPTH:  # an envelope nests up to three JSON levels for one of the decoder's
            raise StoreError(f"{self.reads._safe_url()} holds damaged data (blob {seen[0]:.16} nests blobs deeper than {3 * MAX_DEPTH} levels)")
        t = type(x)
        if t is list:
            out, n = [], len(x)
            for i in x:
                v, w = self.inline(i, seen, depth + 1)
                out.append(v)
                n += w
            return out, n
        if t is not dict:
            return x, 0
        if is_cat(x):  # a history's blocks stay references: neighbouring histories share them, decoded once
            self.holders.update(seen)
            return x, count_values(x)
        ref = x.get(BLOB_REF)
        if type(ref) is str and len(x) == 1:
            if ref in seen:  # content addressing makes a loop impossible in honest data
                raise StoreError(f"{self.reads._safe_url()} holds damaged data (blob {ref:.16} refers back to itself through {len(seen) - seen.index(ref)} blobs)")
            if ref not in self.trees:
                return x, 1
            w = self.resolve(ref, seen, depth + 1)
            if ref in self.holders or ref in self.reads._blob_blocks:
                self.holders.update(seen)
            return self.resolved[ref], 1 + w
        d, n = {}, len(x)
        for k, v in x.items():
            d[k], w = self.inline(v, seen, depth + 1)
            n += w
        return d, n


class BlobReads:
    """Reads, caches and decodes blobs."""

    def _init_blob_cache(self) -> None:
        self._blob_cache: OrderedDict[str, Any] = OrderedDict()
        self._blob_weights: dict[str, int] = {}  # values a cached blob with nested blobs expands to
        self._blob_blocks: set[str] = set()  # cached blobs holding a history's blocks as references
        self._blob_lock = threading.Lock()  # also guards read_state's kept keyframes
        self._decoded_blobs = DecodedBlobs()

    def blobs(self, hashes: Iterable[str]) -> dict[str, Any]:
        """Encoded blob trees by hash (cached; fetched in chunks).

        A blob can reference other blobs (a message whose content is a long
        string): those references are resolved inside the trees returned, so
        decoding such a blob needs no other. The blocks of a long history
        (``history_blocks``) are the exception: they stay references, since
        the next history shares them (:meth:`decode` reads them as it needs
        them, each decoded once). Hashes not in the store are left
        out, and references to them stay as they are. Damaged nesting (a loop,
        deeper than the depth bound, or expanding to more than ``MAX_VALUES``
        values) raises ``StoreError``.
        """
        wanted = list(dict.fromkeys(hashes))
        trees: dict[str, Any] = {}
        fresh: list[str] = []  # read from the database by this call
        nesting: dict[str, set[str]] = {}  # fresh blob -> the blobs it references
        todo = wanted
        rounds = 0  # one per level of blobs inside blobs
        while todo:
            rounds += 1
            if rounds > MAX_DEPTH:
                raise StoreError(f"{self._safe_url()} holds damaged data (blobs reference blobs more than {MAX_DEPTH} levels deep)")
            missing = []
            with self._blob_lock:
                for h in todo:
                    hit = self._blob_cache.get(h)
                    if hit is not None:
                        trees[h] = hit  # cached trees are already resolved
                        self._blob_cache.move_to_end(h)
                    else:
                        missing.append(h)
            for i in range(0, len(missing), 500):
                chunk = missing[i : i + 500]
                for r in self._read(_BLOBS, {"hashes": chunk}):
                    data = bytes(r.data)
                    tree = unpack(b"z" + data if r.zipped else b"j" + data)
                    trees[r.hash] = tree
                    fresh.append(r.hash)
                    # Few blobs hold references: look for one in C before walking the tree in Python.
                    if type(tree) is not str and b'"$b"' in orjson.dumps(tree):
                        nesting[r.hash] = collect_refs(tree)
            todo = list({ref for h in missing for ref in nesting.get(h, ()) if ref not in trees})

        res = _Resolution(self, trees, nesting)
        for h in fresh:
            res.resolve(h, (), 0)
        with self._blob_lock:
            for h in fresh:
                self._blob_cache[h] = res.resolved[h]
                if h in nesting:
                    self._blob_weights[h] = res.weights[h]
            self._blob_blocks.update(res.holders)
            while len(self._blob_cache) > 50_000:
                old, _ = self._blob_cache.popitem(last=False)
                self._blob_weights.pop(old, None)
                self._blob_blocks.discard(old)
        return {h: res.resolved.get(h, trees[h]) for h in wanted if h in trees}

    def _stored_blobs(self, hashes: set[str]) -> dict[str, Any]:
        """Blob trees by hash as stored: the blobs they refer to unread (``blobs`` reads them all).

        For a reader that takes part of a value (a preview): it reads the blobs it keeps,
        level by level. Cached trees are taken as they are (already resolved)."""
        out: dict[str, Any] = {}
        missing = []
        with self._blob_lock:
            for h in hashes:
                hit = self._blob_cache.get(h)
                if hit is not None:
                    out[h] = hit
                else:
                    missing.append(h)
        for i in range(0, len(missing), 500):
            for r in self._read(_BLOBS, {"hashes": missing[i : i + 500]}):
                data = bytes(r.data)
                out[r.hash] = unpack(b"z" + data if r.zipped else b"j" + data)
        return out

    def decode(self, tree: Any, *, typed: bool = False) -> Any:
        """Resolve blob references and decode an encoded tree.

        Plain decoding keeps the decoded value of each blob (blobs never
        change), so neighbouring states decode only the messages they do not
        share; the values are shared between callers and must not be changed.
        Malformed recorded data (a damaged or hand-edited store, a registered
        type that changed) raises ``StoreError`` naming what failed.
        """
        if _READ_BUDGET.get() is None:  # asked outside any read (a replay's comparison): a read of its own
            with read_budget():
                return self.decode(tree, typed=typed)
        return self._decode(tree, typed, _READ_BUDGET.get().spend)

    def _decode(self, tree: Any, typed: bool, charge: Callable[[int], None]) -> Any:
        """``decode``, paying what the value expands to (a blob taken many times costs its text each
        time) to ``charge``; what is read and inflated from the store is paid by the read in progress."""
        refs = collect_refs(tree)
        try:
            if typed:
                return Decoder(self._blobs_for(refs, None), typed=True, charge=charge).decode(tree)
            memo = self._decoded_blobs
            decoded = memo.lookup(refs)
            blobs = self._blobs_for(refs.difference(decoded), decoded)
            value = Decoder(blobs, decoded=decoded, charge=charge).decode(tree)
            memo.keep({h: decoded[h] for h in blobs if h in decoded})
            return value
        except (DecodeError, TypeError, ValueError, AttributeError, KeyError) as exc:
            raise StoreError(f"cannot decode a recorded value: {_one_line(exc)}") from None

    def _blobs_for(self, refs: set[str], decoded: dict[str, Any] | None) -> dict[str, Any]:
        """The blobs decoding ``refs`` needs: theirs, and the blocks of the histories they hold.

        With ``decoded`` (plain decoding), blocks kept decoded are not read:
        they join ``decoded``, so a history that grew reads only its new blocks.
        """
        out = self.blobs(refs)
        holders = [h for h in out if h in self._blob_blocks]
        rounds = 0
        while holders:
            rounds += 1
            if rounds > MAX_DEPTH:
                raise StoreError(f"{self._safe_url()} holds damaged data (history blocks nested more than {MAX_DEPTH} levels deep)")
            blocks = collect_refs([out[h] for h in holders]).difference(out)
            if decoded is not None:
                blocks.difference_update(decoded)
                hits = self._decoded_blobs.lookup(blocks)
                decoded.update(hits)
                blocks.difference_update(hits)
            found = self.blobs(blocks)
            out.update(found)
            holders = [h for h in found if h in self._blob_blocks]
        return out

    def _typed_decoder(self, tree: Any) -> Any:
        return tree if _bare(tree) else self.decode(tree, typed=True)

    def _plain_decoder(self, tree: Any) -> Any:
        return tree if _bare(tree) else self.decode(tree, typed=False)


def _bare(tree: Any) -> bool:
    """A value that decodes to itself (most of a step's routes and interrupts): no walk, no blob read."""
    t = type(tree)
    return tree is None or t is str or t is int or t is bool or t is float or ((t is list or t is dict) and not tree)
