"""``gpuwise doctor``: profile a built-in training workload, apply the safe fixes its findings name,
and measure again: the whole loop of gpuwise (measure → diagnose → fix → verify) in one command."""
