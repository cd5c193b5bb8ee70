"""The options the nvidia-smi views declare alike, declared once: nvidia-smi's letters, one help text."""

from pathlib import Path
from typing import Annotated

import typer

GpuIds = Annotated[
    str | None,
    typer.Option("--id", "-i", help="Only these GPUs: NVML indices, UUIDs (or unique prefixes) or PCI bus ids."),
]
SampleCount = Annotated[int | None, typer.Option("--count", "-c", help="Take this many samples, then exit.")]
LineStamp = Annotated[
    str, typer.Option("--options", "-o", help="D: the date (YYYYMMDD), T: the time (HH:MM:SS) on each line.")
]
LineFormat = Annotated[
    str | None, typer.Option("--format", help="csv, noheader, nounit (comma-separated, any of them).")
]
AppendTo = Annotated[
    Path | None,
    typer.Option("--filename", "-f", dir_okay=False, help="Append to this file (a whole sample at a time)."),
]
