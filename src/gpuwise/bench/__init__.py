"""`gpuwise bench`: what this machine really delivers, next to its datasheet.

Matmul per dtype over a shape sweep (best achievable), memory bandwidth (STREAM copy/triad),
host<->device and device<->device copies, all-reduce bus bandwidth, storage reads. Only this
package imports torch (lazily, through `torch_import.require_torch`), never the core commands.
"""
