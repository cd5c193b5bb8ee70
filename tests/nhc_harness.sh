#!/usr/bin/env bash
# A stand-in for the parts of LBNL NHC that an NHC check relies on, to run deploy/nhc/gpudiag.nhc
# the way NHC runs it. NOT NHC's code (NHC is not installable here: not in Debian 12, not on
# PyPI): a reconstruction of its documented behaviour (NHC's README, "Writing checks" and the
# Slurm part of its node-mark-offline / node-mark-online helpers):
#   - a check is a shell function called with the arguments from nhc.conf; it returns 0 on success;
#   - on failure it calls `die RC MESSAGE` (and returns): NHC logs the message and marks the node
#     offline in Slurm with Reason="NHC: MESSAGE" (keeping a reason that another tool set, so an
#     admin's note survives), then exits with RC;
#   - when every check passed, a node that NHC marked offline (its reason starts with "NHC:") is
#     resumed; any other reason is left alone.
# The drain and resume are done by the real scontrol, as NHC's helpers do.
#
# Usage: nhc_harness.sh FILE.nhc NODE CHECK [ARGS...]
set -u
source "$1"
HOSTNAME=$2
shift 2
LEADER="NHC:"

# `sinfo -o '%t %E'`'s state and reason, as node-mark-offline reads them.
node_status() {
    sinfo -h -N -o '%t %E' -n "$HOSTNAME"
}

mark_offline() {
    local note="$1" line status old
    line=$(node_status)
    status=${line%% *}
    old=${line#* }
    case $status in
        alloc* | comp* | drain* | drng* | idle* | mix* | resv*)
            if [ "$old" != "none" ] && [ "${old%% *}" != "$LEADER" ]; then
                note=$old  # another tool's reason: keep it, drain anyway
                echo "nhc: keeping the reason set by someone else: $old" >&2
                scontrol update State=DRAIN NodeName="$HOSTNAME" Reason="$note"
            else
                scontrol update State=DRAIN NodeName="$HOSTNAME" Reason="$LEADER $note"
            fi
            ;;
        *) echo "nhc: not changing the state of $status node $HOSTNAME" >&2 ;;
    esac
}

mark_online() {
    local line status old
    line=$(node_status)
    status=${line%% *}
    old=${line#* }
    case $status in
        drain* | drng*)
            if [ "${old%% *}" = "$LEADER" ]; then
                scontrol update State=RESUME NodeName="$HOSTNAME"
            else
                echo "nhc: not onlining $HOSTNAME: down for a non-NHC reason ($old)" >&2
            fi
            ;;
    esac
}

die() {
    local rc=$1
    shift
    echo "nhc: ERROR: Health check failed: $*" >&2
    mark_offline "$*"
    exit "$rc"
}

"$@"
rc=$?
[ "$rc" = 0 ] && mark_online
exit "$rc"
