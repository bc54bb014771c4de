"""Lamina adapter for Ollama's native chat API (``POST /api/chat``): a system message first,
tool calls and ``tool`` messages, base64 images, and ``num_ctx`` set to the planned window."""
