"""Lamina adapter for Anthropic's Messages API: native system blocks, ``cache_control``
breakpoints, Claude model limits and a calibrated token estimate."""
