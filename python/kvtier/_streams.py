# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""The CUDA stream a tensor's producer queued its work on, so kvtier's copies start after it.

kvtier copies on streams of its own. A tensor handed to ``save`` may still be being written by a
kernel its framework queued a moment ago (a prefill, ``torch.randn``), and a restore's destination
may have a zero-fill pending: kvtier must order after that work, and only the framework knows the
stream it used.
"""


def stream_handle(stream):
    """An explicit ``stream=`` argument as a cudaStream_t integer: an int, a ``torch.cuda.Stream``
    (``.cuda_stream``) or a ``cupy.cuda.Stream`` (``.ptr``)."""
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if isinstance(stream, int) and not isinstance(stream, bool) and stream >= 0:
        return stream
    raise TypeError(f"stream must be a CUDA stream handle (int), a torch.cuda.Stream or a cupy.cuda.Stream, "
                    f"not {type(stream).__name__}")


def current_stream(tensor):
    """The framework's current stream on the tensor's device (0, the legacy default stream, for
    frameworks kvtier does not know: that orders after every blocking stream)."""
    framework = type(tensor).__module__.split(".")[0]
    if framework == "torch":
        import torch

        return int(torch.cuda.current_stream(tensor.device).cuda_stream)
    if framework == "cupy":
        import cupy

        with tensor.device:
            return int(cupy.cuda.get_current_stream().ptr)
    return 0
