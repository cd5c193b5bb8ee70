#!/usr/bin/env bash
# Runs the real LBNL NHC (tests/nhc/: its driver `nhc`, `common.nhc` and the Slurm helpers
# node-mark-offline/node-mark-online, unchanged from upstream; see tests/nhc/README.md) the way a
# node runs it, with deploy/nhc/gpudiag.nhc installed beside common.nhc. So a check meets NHC's own
# environment: the PATH it resets to /sbin:/usr/sbin:/bin:/usr/bin, its `die`, the `eval` of the
# offline helper's message, and the real scontrol and sinfo its helpers call.
#
# Usage: nhc_harness.sh CONFDIR NODE [nhc options, e.g. -e 'check_gpudiag']
#   CONFDIR holds nhc.conf (its scripts/ is made here); NODE is the name Slurm knows the node by.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
confdir=$1
node=$2
shift 2
mkdir -p "$confdir/scripts"
cp "$here/nhc/scripts/common.nhc" "$here/../deploy/nhc/gpudiag.nhc" "$confdir/scripts/"
# -l -: log to stdout; the variables after the options are NHC's settings (as /etc/default/nhc sets them).
exec "$here/nhc/nhc" -D "$confdir" -l - "$@" HOSTNAME="$node" HELPERDIR="$here/nhc/helpers" TIMEOUT=60
