"""The numeric traffic contract shared by the kernel's heuristics and the model: tiles, splits, grid order, waves."""
