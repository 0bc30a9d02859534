raise ImportError("No module named 'torch' (fake: the test simulates an interpreter without PyTorch)")
