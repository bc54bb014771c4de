"""Lamina memory layer: stores, retrieval within a budget, injection (seeds 003/004)."""
