"""Lamina memory layer: stores, retrieval within a budget and injection, after the memory
framework design and the Cortex draft (see docs/glossary.md)."""
