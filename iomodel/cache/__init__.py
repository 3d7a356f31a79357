"""The L2 model: cache simulators and the L2-aware DRAM estimate of each schedule."""
