"""`gpuwise loadtest`: measure an OpenAI-compatible endpoint (TTFT, TPOT, ITL, goodput, max rate)."""
