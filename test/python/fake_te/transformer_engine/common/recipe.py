"""The recipe classes generated code names, as plain records."""
import enum


class Format(enum.Enum):
    E4M3 = "E4M3"
    HYBRID = "HYBRID"


class DelayedScaling:
    def __init__(self, fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max", **kwargs):
        self.fp8_format = fp8_format


class Float8CurrentScaling:
    def __init__(self, fp8_format=Format.HYBRID):
        self.fp8_format = fp8_format


class Float8BlockScaling:
    def __init__(self, fp8_format=Format.E4M3):
        self.fp8_format = fp8_format


class MXFP8BlockScaling:
    def __init__(self, fp8_format=Format.E4M3):
        self.fp8_format = fp8_format
