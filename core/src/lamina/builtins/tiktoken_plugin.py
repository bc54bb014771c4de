"""Built-in plugin: exact tiktoken tokenizers for OpenAI models, loaded offline."""

from __future__ import annotations

from lamina.hookspecs import hookimpl
from lamina.records import ModelInfo, Tokenizer
from lamina.tokens import TiktokenTokenizer, encoding_for_model


@hookimpl
def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
    """The encoding named by ``info``, else the one known for ``model``, else no answer.

    An explicitly named encoding that cannot be loaded raises ``ConfigError`` rather than
    silently falling back to the estimate."""
    encoding = info.encoding or encoding_for_model(model)
    return TiktokenTokenizer(encoding) if encoding else None
