#!/bin/sh
# The wheels gpudiag needs on the lent GPU machine's image, which lacks them or holds other versions
# (its Python is 3.12, x86_64; nothing can be fetched there): msgspec and junit-xml are not there;
# typer and nvidia-ml-py are pinned to what the H200's capture ran (docs/hardware/h200-driver580).
# Run once from the repository root of the checkout the device tool sends; `.whl/` must be ignored
# (`echo /.whl/ >> .git/info/exclude`) and named in the run's `carry` (docs/hardware/README.md).
set -eu
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  msgspec==0.22.0 typer==0.28.0 nvidia-ml-py==13.615.71 junit-xml==1.9
ls .whl
