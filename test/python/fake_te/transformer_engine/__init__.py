"""A fake Transformer Engine for CPU tests of generated code (test/python/test_fallback_project.py)."""
