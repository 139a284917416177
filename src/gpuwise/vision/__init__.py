"""Vision and diffusion workloads, analytically: layer lists from architecture descriptions.

``architectures`` (data → typed descriptions → ``Network`` at an image size), the builders
(``cnn``, ``transformer``, ``unet`` on ``layers.Builder``), ``memory`` (per-GPU bytes in
``gpuwise.memory``'s terms) and ``perf`` (FLOPs × sourced efficiency). Torch-free.
"""
