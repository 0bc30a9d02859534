import enum


class Format(enum.Enum):
    E4M3 = "E4M3"
    E5M2 = "E5M2"
    HYBRID = "HYBRID"


class DelayedScaling(object):
    def __init__(self, margin=0, fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max",
                 reduce_amax=True, fp8_dpa=False, fp8_mha=False):
        self.fp8_format = fp8_format
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha
        self.amax_history_len = amax_history_len
        self.amax_compute_algo = amax_compute_algo


class Float8CurrentScaling(object):
    def __init__(self, fp8_format=Format.HYBRID, fp8_dpa=False, fp8_mha=False):
        self.fp8_format = fp8_format
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha


class MXFP8BlockScaling(object):
    def __init__(self, fp8_format=Format.E4M3):
        self.fp8_format = fp8_format


class Float8BlockScaling(object):
    def __init__(self, fp8_format=Format.E4M3):
        self.fp8_format = fp8_format
