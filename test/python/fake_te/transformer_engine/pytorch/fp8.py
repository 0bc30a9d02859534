"""transformer_engine.pytorch.fp8 of TE before 2.9: check_fp8_support() -> (bool, reason)."""


def check_fp8_support():
    return True, ""
