"""`nvidia-smi -q`'s media engines: encoder, decoder, JPEG and optical-flow use, encoder and frame-buffer-
capture sessions. Each reading is its field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import Spec
from gpudiag.values import Reading, not_recorded


class Codecs(msgspec.Struct, frozen=True):
    encoder_percent: Reading[int]
    decoder_percent: Reading[int]
    jpeg_percent: Reading[int]
    ofa_percent: Reading[int]
    encoder_sessions: Reading[int]
    encoder_average_fps: Reading[int]
    encoder_average_latency_us: Reading[int]
    fbc_sessions: Reading[int] = msgspec.field(default_factory=not_recorded)  # frame buffer capture
    fbc_average_fps: Reading[int] = msgspec.field(default_factory=not_recorded)
    fbc_average_latency_us: Reading[int] = msgspec.field(default_factory=not_recorded)


ROWS: tuple[Spec, ...] = (
    *(
        detail(
            f"codecs.encoder_{name}",
            call="nvmlDeviceGetEncoderStats",
            pick=index,
        )
        for index, name in ((0, "sessions"), (1, "average_fps"), (2, "average_latency_us"))
    ),
    *(
        detail(
            f"codecs.{name}_percent",
            call=call,
            pick=0,  # (percent, sampling period in µs)
            unit="%",
        )
        for name, call in (
            ("encoder", "nvmlDeviceGetEncoderUtilization"),
            ("decoder", "nvmlDeviceGetDecoderUtilization"),
            ("jpeg", "nvmlDeviceGetJpgUtilization"),
            ("ofa", "nvmlDeviceGetOfaUtilization"),
        )
    ),
    *(
        detail(f"codecs.fbc_{name}", call="nvmlDeviceGetFBCStats", pick=member)
        for name, member in (
            ("sessions", "sessionsCount"),
            ("average_fps", "averageFPS"),
            ("average_latency_us", "averageLatency"),
        )
    ),
)
