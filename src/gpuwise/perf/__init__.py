"""Performance model: step time, tokens/s, MFU and the bounding resource on any catalog GPU.

Pure and torch-free. ``predict(workload, gpu)`` is the entry point; ``step_time_from_flops``
is the roofline that FLOP counts from elsewhere (e.g. a traced simulation) go through.
Efficiency constants, each with its public source, live in ``perf/data/efficiency.toml``.
Cost on top of a prediction: ``gpuwise.perf.cost``.
"""

from gpuwise.perf.comm import (
    Link,
    allgather_s,
    allreduce_s,
    link_for,
    pipeline_bubble_fraction,
    reduce_scatter_s,
)
from gpuwise.perf.flops import (
    TrainingFlops,
    attention_flops_per_token,
    lora_params,
    matmul_params,
    palm_flops_per_token,
    training_flops,
)
from gpuwise.perf.numerics import Numerics, resolve
from gpuwise.perf.predict import predict
from gpuwise.perf.prediction import BOUNDS, InferencePerf, PerfPrediction, TrainingPerf
from gpuwise.perf.roofline import RooflineTime, matmul_efficiency, peak_flops, step_time_from_flops

__all__ = [
    "BOUNDS",
    "InferencePerf",
    "Link",
    "Numerics",
    "PerfPrediction",
    "RooflineTime",
    "TrainingFlops",
    "TrainingPerf",
    "allgather_s",
    "allreduce_s",
    "attention_flops_per_token",
    "link_for",
    "lora_params",
    "matmul_efficiency",
    "matmul_params",
    "palm_flops_per_token",
    "peak_flops",
    "pipeline_bubble_fraction",
    "predict",
    "reduce_scatter_s",
    "resolve",
    "step_time_from_flops",
    "training_flops",
]
