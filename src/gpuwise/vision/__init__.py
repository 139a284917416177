"""Vision and diffusion architectures as geometry: layer lists from architecture descriptions.

``architectures`` (data → typed descriptions → ``Network`` at an image size) and the builders
(``cnn``, ``transformer``, ``unet`` on ``layers.Builder``). Only geometry lives here (parameters, MACs,
saved activations per layer), so the catalog can use it; the memory terms built on it are
``gpuwise.memory.vision`` and the speed model ``gpuwise.perf.vision``. Torch-free.
"""

__all__: list[str] = []
