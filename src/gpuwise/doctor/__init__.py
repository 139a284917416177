"""``gpuwise doctor``: profile a built-in training workload, apply the safe fixes its findings name,
and measure again: the whole loop of gpuwise (measure → diagnose → fix → verify) in one command.

It sits on top of ``gpuwise.tune`` (the doctor is the tuner run on ``script``, sized to the machine by
``sizing``): ``workload`` the reference training pipeline, ``run`` the command's core.
"""

__all__: list[str] = []
