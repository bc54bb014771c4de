"""Lamina Nexus plugin: the condensed Nexus environment in the system prompt."""
