"""Fake torchao for the CPU tests: the float8 training entry points with torchao's signatures (torchao is absent on
CI). Float8Linear computes in fp32 and records the recipe it was made with."""
__version__ = "0.18.0+fake"
