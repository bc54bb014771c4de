"""``Chunked``: a tuple's behaviour, kept in chunks a grown sequence shares."""

from __future__ import annotations

import math
import pickle
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina import Chunked

growths = st.lists(st.lists(st.integers(), max_size=7), max_size=40)


def grow(parts: list[list[int]]) -> tuple[Chunked[int], list[Chunked[int]]]:
    seq: Chunked[int] = Chunked()
    steps = [seq]
    for part in parts:
        seq = seq.grown(part)
        steps.append(seq)
    return seq, steps


@given(growths, st.integers(-60, 60), st.integers(-60, 60), st.sampled_from([None, 1, 2, -1, 3]))
def test_it_reads_as_the_tuple_of_its_items(
    parts: list[list[int]], i: int, j: int, step: int | None
) -> None:
    seq, _ = grow(parts)
    ref = tuple(x for p in parts for x in p)
    assert seq == ref and ref == seq and not (seq != ref)  # noqa: SIM202 (both operators)
    assert len(seq) == len(ref) and tuple(seq) == ref and tuple(reversed(seq)) == ref[::-1]
    assert hash(seq) == hash(ref) and repr(seq) == repr(ref)
    assert seq[i:j:step] == ref[i:j:step] and type(seq[i:j]) is tuple
    if -len(ref) <= i < len(ref):
        assert seq[i] == ref[i]
    else:
        with pytest.raises(IndexError):
            seq[i]
    assert (i in seq) == (i in ref)
    assert seq + (1, 2) == ref + (1, 2) and (1, 2) + seq == (1, 2) + ref  # noqa: RUF005
    assert pickle.loads(pickle.dumps(seq)) == ref
    assert seq != list(ref) or not ref  # like a tuple, it is not equal to a list
    assert Chunked.joined([ref[:3], seq, (9,)]) == ref[:3] + ref + (9,)


@given(growths)
def test_a_grown_sequence_shares_what_it_grew_from(parts: list[list[int]]) -> None:
    seq, steps = grow(parts)
    for before in steps:
        assert seq.shares(before) and seq.startswith(before)
    # Few chunks, each more than twice the next: an item is copied about log2(n) times.
    sizes = [len(c) for c in seq._chunks]
    assert all(a > 2 * b for a, b in pairwise(sizes))
    assert len(sizes) <= math.log2(len(seq) + 1) + 1


def test_an_equal_sequence_made_apart_is_not_shared_but_starts_it() -> None:
    one, two, three = "one", "two", "three"
    a = Chunked([one, two]).grown([three])
    b = Chunked([one, two, "".join(["thr", "ee"]), "four"])  # equal items, not the same
    assert not b.shares(a) and b.startswith(a) and not a.startswith(b)
    assert a.grown(["four"]).shares(a)
    assert not Chunked([one, "nine"]).startswith(Chunked([two]))
