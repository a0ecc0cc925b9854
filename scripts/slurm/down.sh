#!/usr/bin/env bash
# Stop the cluster scripts/slurm/up.sh DIR started: its daemons (by the pid files in DIR), and the
# /etc/netns/<node>/hosts files it wrote. Leaves DIR itself to the caller. Safe to run twice.
set -uo pipefail

DIR="${1:?usage: scripts/slurm/down.sh DIR}"
[ -f "$DIR/slurm.conf" ] || exit 0

# Jobs first: slurmstepd and the tasks outlive a killed slurmd. Clients of a cluster in network
# namespaces must talk to it from inside the first one.
export SLURM_CONF="$DIR/slurm.conf"
client=()
first_ns="$(sed -n 's/^NodeName=\([^ ]*\) NodeAddr=\([^ ]*\).*/\1 \2/p' "$DIR/slurm.conf" | head -n 1)"
case "$first_ns" in
  *" 127.0.0.1") ;;
  *) [ -e "/run/netns/${first_ns%% *}" ] && client=(ip netns exec "${first_ns%% *}") ;;
esac
if "${client[@]}" scancel --full --signal=KILL --user=root 2>/dev/null; then
  for _ in $(seq 50); do
    [ -z "$("${client[@]}" squeue -h -o %i 2>/dev/null)" ] && break
    sleep 0.1
  done
fi

pids=()
for f in "$DIR"/slurmd-*.pid "$DIR"/slurmctld.pid; do
  [ -f "$f" ] || continue
  pid="$(cat "$f")"
  # Only our daemons: the pid must still be a slurm daemon reading this config.
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$DIR/slurm.conf"; then
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  fi
done
for _ in $(seq 100); do
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 0.1
done
for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done

for node in $(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' "$DIR/slurm.conf"); do
  [ -f "/etc/netns/$node/hosts" ] && rm -f "/etc/netns/$node/hosts" && rmdir "/etc/netns/$node" 2>/dev/null
done
rmdir /etc/netns 2>/dev/null
exit 0
