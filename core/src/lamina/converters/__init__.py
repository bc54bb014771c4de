"""Converters from the message lists hosts already keep to Lamina's messages, for
``AssemblyRequest.history``: OpenAI chat messages, Anthropic messages, LangChain messages.

Each returns a tuple of ``Message`` s (system messages included: the kernel puts them in the
system prompt) and raises ``lamina.SerdeError`` naming the index and field of anything it
cannot read. None of them imports the provider's SDK.
"""

from lamina.converters.anthropic import from_anthropic_messages
from lamina.converters.langchain import from_langchain_messages
from lamina.converters.openai import from_openai_chat

__all__ = ["from_anthropic_messages", "from_langchain_messages", "from_openai_chat"]
