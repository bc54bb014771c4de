"""The assembly pipeline, one module per phase: plan → gather → place → measure → fit →
format (and verify) → report. ``Assembler`` is the public entry point."""
