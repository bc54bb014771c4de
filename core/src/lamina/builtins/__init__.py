"""Built-in plugins: the kernel's defaults, registered like any other plugin."""
