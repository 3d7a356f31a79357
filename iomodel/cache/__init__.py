"""The L2 model: cache simulators (lru, set_assoc), constants with their sources (params), one launch
through the cache (simulate), the L2-aware DRAM prediction and its causes (predict, causes), and the
worksheet's estimate (estimate). The fits behind the constants: docs/l2-calibration.md."""
