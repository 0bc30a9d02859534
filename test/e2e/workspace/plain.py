"""No torch here: Precision Lens must stay silent on this file."""


class Linear:
    def __init__(self, a, b):
        self.shape = (a, b)


def build():
    return Linear(100, 30)
