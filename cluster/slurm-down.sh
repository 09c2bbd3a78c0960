#!/usr/bin/env bash
# Stop the daemons started by cluster/slurm-up.sh (idempotent). Each daemon is
# stopped through its own pid file; state, accounting DB and logs are kept, so
# slurm-up.sh brings the same cluster (job ids, sacct history) back.
set -euo pipefail

D=${ZOO_SLURM_DIR:-/var/lib/zoo-slurm}

stop() {  # stop <name> <pidfile>: SIGTERM, wait up to 30 s, then SIGKILL
  local name=$1 pidfile=$2 pid
  [[ -f $pidfile ]] && pid=$(cat "$pidfile") && kill -0 "$pid" 2>/dev/null || { echo "$name: not running"; return 0; }
  kill "$pid"
  for ((i = 0; i < 60; i++)); do kill -0 "$pid" 2>/dev/null || { echo "$name: stopped"; return 0; }; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  echo "$name: killed (did not stop within 30 s)"
}

# reverse start order; jobs still running under slurmstepd are left alone
stop slurmd "$D/run/slurmd.pid"
stop slurmctld "$D/run/slurmctld.pid"
stop slurmdbd "$D/run/slurmdbd.pid"
stop mariadbd "$D/run/mysqld/mariadb.pid"
stop munged /run/munge/munged.pid
