"""Look-alike XLA GPU and TPU profiles (no accelerator here): the planes, lines, op names and stats XLA's
profiler writes, made into a real XSpace by jaxlib's own text-proto converter (no protobuf by hand) and
into the Perfetto/Chrome JSON JAX writes beside it.

Plane names (``/device:GPU:N``, ``/device:TPU:N``, ``/host:CPU``, ``/host:CUPTI``), line names
(``Stream #N(...)``, ``XLA Ops``), the stats (``correlation_id``, ``hlo_op``, ``memcpy_details``,
``hlo_category``, ``step_num``, ``devcap_*``) and op names follow XLA's xplane_schema and CUPTI collector;
the numbers are chosen. Test support: look-alikes, not recordings.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Profile", "gpu_profile", "tpu_profile"]


@dataclass
class Profile:
    """planes: name -> (plane stats, lines: name -> [(name, start_ns, dur_ns, stats)])."""

    planes: dict[str, tuple[dict[str, Any], dict[str, list[tuple[str, int, int, dict[str, Any]]]]]] = field(
        default_factory=dict
    )

    def event(self, plane: str, line: str, name: str, start_ns: int, dur_ns: int, **stats: Any) -> None:
        self.planes.setdefault(plane, ({}, {}))[1].setdefault(line, []).append(
            (name, start_ns, dur_ns, stats)
        )

    def stat(self, plane: str, **stats: Any) -> None:
        self.planes.setdefault(plane, ({}, {}))[0].update(stats)

    def text_proto(self) -> str:
        """The XSpace as text proto (each plane with its own event and stat metadata)."""
        out = []
        for pid, (plane, (pstats, lines)) in enumerate(self.planes.items(), 1):
            events: dict[str, int] = {}
            stat_ids: dict[str, int] = {}
            body = [f"id: {pid} name: {json.dumps(plane)}"]
            for lid, (line, evs) in enumerate(lines.items(), 1):
                items = " ".join(
                    f"events {{ metadata_id: {events.setdefault(n, len(events) + 1)} offset_ps: {s * 1000} "
                    f"duration_ps: {d * 1000} {_stats(st, stat_ids)} }}"
                    for n, s, d, st in evs
                )
                body.append(
                    f"lines {{ id: {lid} display_id: {lid} name: {json.dumps(line)} "
                    f"timestamp_ns: 0 {items} }}"
                )
            body.append(_stats(pstats, stat_ids))
            body += [
                f"event_metadata {{ key: {i} value {{ id: {i} name: {json.dumps(n)} }} }}"
                for n, i in events.items()
            ]
            body += [
                f"stat_metadata {{ key: {i} value {{ id: {i} name: {json.dumps(n)} }} }}"
                for n, i in stat_ids.items()
            ]
            out.append("planes { " + " ".join(body) + " }")
        return "\n".join(out)

    def write_xplane(self, path: Path) -> Path:
        from jaxlib._profile_data import ProfileData

        path.write_bytes(ProfileData.text_proto_to_serialized_xspace(self.text_proto()))
        return path

    def write_json(self, path: Path) -> Path:
        """The same profile as JAX's Perfetto/Chrome JSON: a process per plane, a thread per line, µs."""
        events: list[dict[str, Any]] = []
        for pid, (plane, (_, lines)) in enumerate(self.planes.items(), 1):
            events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": plane}})
            for tid, (line, evs) in enumerate(lines.items(), 1):
                events.append(
                    {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": line}}
                )
                events += [
                    {
                        "ph": "X",
                        "pid": pid,
                        "tid": tid,
                        "ts": s / 1000,
                        "dur": d / 1000,
                        "name": n,
                        "args": {k: str(v) for k, v in st.items()},
                    }
                    for n, s, d, st in evs
                ]
        path.write_bytes(gzip.compress(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}).encode()))
        return path


def _stats(stats: dict[str, Any], ids: dict[str, int]) -> str:
    parts = []
    for name, value in stats.items():
        sid = ids.setdefault(name, len(ids) + 1)
        kind = (
            "str_value"
            if isinstance(value, str)
            else ("double_value" if isinstance(value, float) else "int64_value")
        )
        parts.append(f"stats {{ metadata_id: {sid} {kind}: {json.dumps(value)} }}")
    return " ".join(parts)


def gpu_profile(devices: int = 2, steps: int = 3) -> Profile:
    """A data-parallel JAX step on GPUs: H2D copy, cuBLAS GEMM, loop fusion, NCCL all-reduce per device."""
    p = Profile()
    p.stat("/host:metadata", jax_version="0.10.2", jaxlib_version="0.10.2")
    corr = 1
    for step in range(steps):
        t = 1_000_000 + step * 2_000_000  # ns
        p.event("/host:CPU", "python", "train", t, 2_000_000, step_num=step, _r=1)
        for d in range(devices):
            plane = f"/device:GPU:{d}"
            p.stat(
                plane,
                devcap_memory_size=85_899_345_920,
                devcap_compute_cap_major=9,
                devcap_compute_cap_minor=0,
            )
            p.event(
                "/host:CUPTI", f"thread {d}", "cuMemcpyHtoDAsync_v2", t + 10_000, 5_000, correlation_id=corr
            )
            kind = "pageable" if step == 0 else "pinned"
            details = f"kind_src:{kind} kind_dst:device size:8388608 dest:{d} async:1"
            p.event(
                plane,
                "Stream #14(MemcpyH2D)",
                "MemcpyH2D",
                t + 20_000,
                200_000,
                correlation_id=corr,
                memcpy_details=details,
            )
            kernels = [
                ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "dot.4", 700_000, 13),
                ("loop_multiply_fusion", "multiply_fusion.2", 300_000, 13),
                ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "all-reduce-start.1", 400_000, 15),
            ]
            at = t + 250_000
            for name, hlo_op, dur, stream in kernels:
                corr += 1
                p.event(
                    "/host:CUPTI", f"thread {d}", "cuLaunchKernel", at - 100_000, 8_000, correlation_id=corr
                )
                p.event(
                    plane,
                    f"Stream #{stream}(compute)",
                    name,
                    at,
                    dur,
                    correlation_id=corr,
                    hlo_op=hlo_op,
                    hlo_module="jit_train_step",
                )
                at += dur + 50_000
            corr += 1
    return p


def tpu_profile(steps: int = 3) -> Profile:
    """A TPU step as XLA's TPU planes show it: an XLA Ops line with hlo_category stats, a Steps line."""
    p = Profile()
    p.stat("/host:metadata", jax_version="0.10.2", jaxlib_version="0.10.2")
    for step in range(steps):
        t = step * 1_000_000
        p.event("/device:TPU:0", "Steps", str(step), t, 1_000_000)
        ops = [
            ("infeed.1", 50_000, "data formatting"),
            ("fusion.7", 300_000, "convolution fusion"),
            ("dot.3", 250_000, "matmul"),
            ("all-reduce.2", 150_000, "all-reduce"),
            ("fusion.9", 100_000, "loop fusion"),
        ]
        at = t + 20_000
        for name, dur, category in ops:
            p.event("/device:TPU:0", "XLA Ops", name, at, dur, hlo_category=category, hlo_op=name)
            at += dur + 10_000
    return p
