"""The directory ``gpuwise profile`` puts first on the child's PYTHONPATH, so Python imports its
``sitecustomize``.
"""
