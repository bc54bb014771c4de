"""Lamina workspace plugin: workspace and persona layers, roles, working-set manifests."""
