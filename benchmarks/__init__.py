"""Benchmarks: tilecraft vs eager PyTorch and torch.compile, measured on the same GPU in one run."""
