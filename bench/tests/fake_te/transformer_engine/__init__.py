"""A stand-in for NVIDIA Transformer Engine (tests only): the API surface the benchmark uses, on plain torch."""
__version__ = "2.10.0"
