"""Lamina adapters for OpenAI's Chat Completions (``openai``) and Responses
(``openai-responses``) APIs, OpenAI model limits, and exact prompt token counting.

The package also holds the provider-neutral helpers (``conversation``, ``catalog``, ``wire``)
the other first-party adapters build on.
"""
