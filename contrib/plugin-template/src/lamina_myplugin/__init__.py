"""Lamina plugin ``myplugin``: pinned files become memory blocks."""
