#!/usr/bin/env bash
# A private single-node SLURM on this machine, to try `interp sweep --executor slurm` (SCALE.md).
#
#   bash scripts/slurm-local.sh install   # as root with apt: slurm-wlm + munge (~1 min); quiet no-op otherwise
#   bash scripts/slurm-local.sh up        # munged, slurmctld, slurmd; prints the SLURM_CONF line to export
#   bash scripts/slurm-local.sh status    # daemons alive? sinfo
#   bash scripts/slurm-local.sh down      # stops the three daemons by their PIDs
#
# Everything lives in $SLURM_LOCAL_DIR (default /tmp/interp-slurm): its own munge key and socket
# (the system's /etc/munge is not touched), slurm.conf, state, spool, logs, PID files. Daemons talk
# over 127.0.0.1 only (SlurmctldHost=...(127.0.0.1), NodeAddr=127.0.0.1, CommunicationParameters=
# NoInAddrAny,NoCtldInAddrAny). Ports: $SLURM_LOCAL_CTLD_PORT / $SLURM_LOCAL_SLURMD_PORT (default 6817 / 6818).
# Memory requests are enforced by polling (JobAcctGatherType=jobacct_gather/linux, every second,
# JobAcctGatherParams=OverMemoryKill): TaskPlugin=task/none has no cgroup, and a job whose
# processes' RSS exceeds --mem ends OUT_OF_MEMORY. Jobs run as the submitting user (SlurmUser=root:
# `up` needs root).
set -euo pipefail

DIR="${SLURM_LOCAL_DIR:-/tmp/interp-slurm}"
CTLD_PORT="${SLURM_LOCAL_CTLD_PORT:-6817}"
SLURMD_PORT="${SLURM_LOCAL_SLURMD_PORT:-6818}"
PARTITION="${SLURM_LOCAL_PARTITION:-debug}"
CONF="$DIR/slurm.conf"

have_slurm() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; }

install() {
    if have_slurm; then
        echo "slurm-local: slurm-wlm and munge already installed"
        return 0
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        echo "slurm-local: not root or no apt-get: SLURM not installed (the SLURM tests will skip)"
        return 0
    fi
    echo "slurm-local: installing slurm-wlm and munge with apt-get"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } >"${TMPDIR:-/tmp}/slurm-local-apt.log" 2>&1; then
        echo "slurm-local: apt-get failed (see ${TMPDIR:-/tmp}/slurm-local-apt.log): the SLURM tests will skip"
    fi
    return 0
}

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS CMD...: poll until CMD succeeds
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= end)); then return 1; fi
        sleep 0.2
    done
}

write_conf() {
    local host cpus mem_mb
    host="$(hostname -s)"
    cpus="$(nproc)"
    # half the machine's memory (MiB) for jobs: the node must not claim more than it has
    mem_mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 2048))
    cat >"$CONF" <<EOF
# written by scripts/slurm-local.sh: one node, loopback only, everything under $DIR
ClusterName=interp-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# memory requests enforced without cgroups: RSS polled every second, over --mem -> OUT_OF_MEMORY
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# scancel: SIGTERM, then SIGKILL 5 s later; finished jobs stay visible to scontrol for 10 min
KillWait=5
MinJobAge=600
SlurmdTimeout=60
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

up() {
    if ! have_slurm; then
        echo "slurm-local: slurmctld/slurmd/munged/sbatch not found (run: bash scripts/slurm-local.sh install as root)" >&2
        return 1
    fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "slurm-local: up needs root (SlurmUser=root)" >&2
        return 1
    fi
    if alive "$DIR/slurmctld.pid" || alive "$DIR/slurmd.pid" || alive "$DIR/munge/munged.pid"; then
        echo "slurm-local: already running in $DIR (bash scripts/slurm-local.sh down first)" >&2
        return 1
    fi
    mkdir -p "$DIR"/{state,spool,log,munge}
    chmod 755 "$DIR" "$DIR/munge"  # munged wants its socket's directories searchable by all
    if [[ ! -f "$DIR/munge/munge.key" ]]; then
        (umask 077 && head -c 1024 /dev/urandom >"$DIR/munge/munge.key")
        chmod 400 "$DIR/munge/munge.key"
    fi
    write_conf
    munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.sock" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    wait_for 10 test -S "$DIR/munge/munge.sock" || { echo "slurm-local: munged did not start ($DIR/log/munged.log)" >&2; return 1; }
    export SLURM_CONF="$CONF"
    slurmctld -f "$CONF"
    wait_for 20 scontrol ping || { echo "slurm-local: slurmctld did not answer ($DIR/log/slurmctld.log)" >&2; return 1; }
    slurmd -f "$CONF"
    if ! wait_for 30 node_idle; then
        echo "slurm-local: node not idle after 30 s ($DIR/log/slurmd.log): $(sinfo -h -o '%T %E' 2>&1)" >&2
        return 1
    fi
    echo "slurm-local: up in $DIR; to use it: export SLURM_CONF=$CONF"
}

node_idle() { [[ "$(sinfo -h -o %T 2>/dev/null)" == idle* ]]; }

no_jobs() { [[ -z "$(squeue -h 2>/dev/null)" ]]; }

down() {
    local name pidfile pid
    if alive "$DIR/slurmctld.pid"; then  # no job outlives the cluster (its processes belong to slurmstepd)
        export SLURM_CONF="$CONF"
        scancel --user "$(id -un)" 2>/dev/null || true
        wait_for 20 no_jobs || echo "slurm-local: jobs still listed after 20 s: $(squeue -h 2>&1 | head -3)" >&2
    fi
    for name in slurmd slurmctld munge/munged; do  # reverse start order
        pidfile="$DIR/$name.pid"
        [[ -f "$pidfile" ]] || continue
        pid="$(cat "$pidfile")"
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            wait_for 15 bash -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile"
    done
    echo "slurm-local: down ($DIR kept: logs under $DIR/log)"
}

status() {
    local name rc=0
    for name in munge/munged slurmctld slurmd; do
        if alive "$DIR/$name.pid"; then
            echo "${name#munge/}: running (pid $(cat "$DIR/$name.pid"))"
        else
            echo "${name#munge/}: not running"
            rc=1
        fi
    done
    if [[ $rc -eq 0 ]]; then SLURM_CONF="$CONF" sinfo; fi
    return $rc
}

case "${1:-}" in
install) install ;;
up) up ;;
down) down ;;
status) status ;;
*)
    echo "usage: $0 install|up|down|status   (state in \$SLURM_LOCAL_DIR, default /tmp/interp-slurm)" >&2
    exit 2
    ;;
esac
