"""What a block computes from its parts. Its content hash is stable: ledgers and recorded
stable prefixes keep hashes made by earlier versions, so the bytes hashed for a part never
change. Its body is the text of its text-bearing parts."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from lamina import Block, ImagePart, TextPart, ToolCallPart, ToolResultPart
from lamina.digests import SHORT, sha256
from lamina.model.blocks import content_hash

TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)


def reference(parts: tuple[object, ...]) -> str:
    """The hash as first defined: each part's type name, then its repr."""
    h = hashlib.sha256()
    for p in parts:
        h.update(type(p).__name__.encode())
        h.update(b"\x00")
        h.update(repr(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()


PART = st.one_of(
    st.builds(TextPart, text=TEXT),
    st.builds(ToolResultPart, call_id=st.text(max_size=5), content=TEXT),
    st.builds(ToolCallPart, id=st.text(max_size=5), name=st.text(max_size=5)),
    st.just(ImagePart(media_type="image/png", data="aGVsbG8=")),
)


@given(st.lists(PART, max_size=4).map(tuple))
def test_the_hash_is_the_type_and_repr_of_each_part(parts: tuple[object, ...]) -> None:
    assert content_hash(parts) == reference(parts)  # type: ignore[arg-type]


def test_a_known_text_blocks_hash_is_unchanged() -> None:
    block = Block.text("b", "session", "hello, world")
    assert block.hash == "f2b3977999e34fe3599ecb97ff77a15549856c2da1e45ac2384ddcdd7e120e6f"


@given(st.lists(PART, max_size=4).map(tuple))
def test_a_blocks_body_is_its_text_parts_joined(parts: tuple[object, ...]) -> None:
    block = Block(id="b", layer="session", content=parts)  # type: ignore[arg-type]
    texts = [
        p.text if isinstance(p, TextPart) else p.content
        for p in parts
        if isinstance(p, TextPart | ToolResultPart)
    ]
    assert block.body == "\n\n".join(texts)


@given(st.binary(max_size=3 * SHORT), st.binary(max_size=SHORT))
def test_short_and_long_inputs_hash_as_hashlib_does(data: bytes, more: bytes) -> None:
    """Short inputs go to the interpreter's sha256, long ones to OpenSSL's: the same digests."""
    h = sha256(data, len(data) + len(more))
    h.update(more)
    assert h.hexdigest() == hashlib.sha256(data + more).hexdigest()
    assert sha256(data).digest() == hashlib.sha256(data).digest()


def test_a_long_text_blocks_hash_is_the_reference() -> None:
    parts = (TextPart(text="é" * SHORT),)
    assert content_hash(parts) == reference(parts)
