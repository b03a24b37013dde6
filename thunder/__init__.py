"""thunder: a just-in-time compiler for PyTorch programs."""
