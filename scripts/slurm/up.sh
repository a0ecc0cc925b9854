#!/usr/bin/env bash
# Start a throw-away SLURM cluster whose whole state lives in DIR (config, spool, logs, pids).
#
#   scripts/slurm/up.sh DIR                          one node: this machine, on 127.0.0.1
#   scripts/slurm/up.sh DIR h1=10.77.0.1 h2=10.77.0.2
#       one node per existing network namespace (h1, h2 ...), named after it, at that address;
#       the controller runs in the first namespace. Clients must run there too:
#       `ip netns exec h1 srun ...`.
#
# Then `. DIR/env` (it sets SLURM_CONF) and use srun / sbatch / sinfo. Stop it with
# scripts/slurm/down.sh DIR. Installs slurm-wlm with apt-get when it is missing (needs root).
# Nothing is written outside DIR; no daemon reads /etc/slurm.
#
# Why this configuration (each line was a trap on this kind of machine):
# - auth/none + cred/none: munged refuses to run as root, and a one-machine, few-minutes cluster
#   gains nothing from signed credentials. The ports are free ports chosen now.
# - SlurmctldHost is `hostname -s`: the controller refuses to start under any other name;
#   slurmd gets its node name with -N, so the nodes need not match the host name.
# - proctrack/linuxproc + task/none: no cgroup plugins (none here, and they leave directories).
# - In namespaces, daemons start with `nsenter --net` plus a private mount namespace whose
#   /etc/hosts names every node (`ip netns exec` would remount /sys, and slurmd dies without
#   cgroupfs); tasks inherit that /etc/hosts, so the node names SLURM hands them resolve.
set -euo pipefail

DIR="${1:?usage: scripts/slurm/up.sh DIR [NAMESPACE=ADDRESS ...]}"
shift
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/slurm/up.sh: slurm-wlm is not installed and this is not root" >&2
    exit 3
  fi
  # The packages ship init scripts: a policy-rc.d that says "no" keeps the install from
  # starting daemons with the system's config.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends slurm-wlm >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm >/dev/null; }
  [ "$made_policy" = 1 ] && rm -f "$policy"
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

HOST="$(hostname -s)"
# --all: not the OMP_NUM_THREADS or affinity limits of whoever runs this; slurmd counts them all.
CPUS="$(nproc --all)"
# A little under the machine's memory, or slurmd marks the node invalid.
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
CTLD_PORT="$(free_port)"
SLURMD_PORT="$(free_port)"

declare -a NODES=() ADDRS=()
if [ "$#" = 0 ]; then
  NODES=("$HOST")
  ADDRS=(127.0.0.1)
else
  for spec in "$@"; do
    NODES+=("${spec%%=*}")
    ADDRS+=("${spec#*=}")
    [ -e "/run/netns/${spec%%=*}" ] || { echo "no network namespace ${spec%%=*}" >&2; exit 2; }
  done
fi
mkdir -p "$DIR/state"

{
  echo "ClusterName=ddpkit"
  # Job ids seed the port SLURMEnvironment derives (15000 + id % 10000): two clusters on one
  # machine (parallel test runs) must not both start at job 1.
  echo "FirstJobId=$(( (RANDOM % 900 + 100) * 10 ))"
  echo "SlurmctldHost=$HOST(${ADDRS[0]})"
  echo "SlurmctldPort=$CTLD_PORT"
  echo "SlurmdPort=$SLURMD_PORT"
  echo "AuthType=auth/none"
  echo "CredType=cred/none"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "StateSaveLocation=$DIR/state"
  echo "SlurmdSpoolDir=$DIR/spool-%n"
  echo "SlurmctldPidFile=$DIR/slurmctld.pid"
  echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
  echo "SlurmctldLogFile=$DIR/slurmctld.log"
  echo "SlurmdLogFile=$DIR/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "MpiDefault=none"
  echo "MailProg=/bin/true"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "ReturnToService=2"
  echo "KillWait=5"
  echo "InactiveLimit=0"
  echo "SlurmdTimeout=30"
  for i in "${!NODES[@]}"; do
    echo "NodeName=${NODES[$i]} NodeAddr=${ADDRS[$i]} CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$DIR/slurm.conf"
export SLURM_CONF="$DIR/slurm.conf"
echo "export SLURM_CONF=$SLURM_CONF" >"$DIR/env"

if [ "$#" = 0 ]; then
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF" -N "$HOST"
else
  # Every node name, and the host name, resolve inside each namespace: the host name to the
  # namespace's own address (gloo binds to it), the node names to their addresses.
  for i in "${!NODES[@]}"; do
    ns="${NODES[$i]}"
    mkdir -p "/etc/netns/$ns"
    {
      echo "127.0.0.1 localhost"
      echo "${ADDRS[$i]} $HOST"
      for j in "${!NODES[@]}"; do echo "${ADDRS[$j]} ${NODES[$j]}"; done
    } >"/etc/netns/$ns/hosts"
  done
  in_ns() {  # run a daemon in namespace $1 with its /etc/hosts, keeping /sys
    local ns="$1"; shift
    nsenter --net="/run/netns/$ns" unshare --mount --propagation private \
      sh -c 'mount --bind "/etc/netns/$0/hosts" /etc/hosts && exec "$@"' "$ns" "$@"
  }
  in_ns "${NODES[0]}" slurmctld -f "$SLURM_CONF"
  for ns in "${NODES[@]}"; do
    in_ns "$ns" slurmd -f "$SLURM_CONF" -N "$ns"
  done
fi

run_client() {
  if [ "$#" -gt 0 ] && [ "${NODES[0]}" != "$HOST" ]; then :; fi
  if [ "${ADDRS[0]}" = 127.0.0.1 ]; then sinfo -h -o '%T' 2>/dev/null; else
    ip netns exec "${NODES[0]}" sinfo -h -o '%T' 2>/dev/null; fi
}
for _ in $(seq 300); do
  states="$(run_client | sort -u | tr '\n' ' ')"
  [ "$states" = "idle " ] && { echo "slurm up: ${NODES[*]} (SLURM_CONF=$SLURM_CONF)"; exit 0; }
  sleep 0.1
done
echo "scripts/slurm/up.sh: nodes not idle after 30 s (states: ${states:-none}); logs in $DIR" >&2
tail -n 20 "$DIR"/*.log >&2 || true
exit 1
