#!/usr/bin/env bash
# A real Slurm cluster on this one machine: munge, MariaDB + slurmdbd (accounting, so `sacct` and nemo-run's job
# status work), slurmctld and two slurmd "nodes", all under one folder, run as root without cgroups or systemd.
# The test suite's slurm tier runs the sbatch scripts and nemo-run's Slurm executor on it; a user can try the
# launch path on a workstation the same way (docs/launch.md, "Try it on one machine").
#
#   tools/local_slurm.sh start [DIR]    install the Debian packages if missing, start what is not running
#   tools/local_slurm.sh env [DIR]      print the `export SLURM_CONF=...` line the Slurm commands need
#   tools/local_slurm.sh status [DIR]   the daemons' pids and `sinfo`
#   tools/local_slurm.sh stop [DIR]     stop the daemons this script started (by their pid files), keep DIR
#
# DIR defaults to $LOCAL_SLURM_DIR or /tmp/nemo-cascade-slurm. Ports: LOCAL_SLURM_PORT_BASE (default 16800) + 17
# slurmctld, + 19 slurmdbd, + 6 MariaDB, + 101 / + 102 the two slurmd. Nodes: `hostname -s` and `localhost`
# (both resolve to this machine; Slurm needs node names that resolve, and the first node must not be called
# localhost), each with LOCAL_SLURM_CPUS CPUs (default 4; more than the machine has is allowed, so that jobs of
# one CPU rank each can share it) and LOCAL_SLURM_GPUS fake GPUs (default 8: gres entries backed by /dev/null,
# which only gives steps CUDA_VISIBLE_DEVICES; enough for scripts that ask for --gpus-per-node).
# Only root can run it (the daemons switch users and munge needs its key owned by the caller).
set -euo pipefail

cmd=${1:-}
DIR=${2:-${LOCAL_SLURM_DIR:-/tmp/nemo-cascade-slurm}}
BASE=${LOCAL_SLURM_PORT_BASE:-16800}
CPUS=${LOCAL_SLURM_CPUS:-4}
GPUS=${LOCAL_SLURM_GPUS:-8}
HOST=$(hostname -s)
NODES=("$HOST" localhost)
CLUSTER=nemocascade

die() { echo "local_slurm: $*" >&2; exit 2; }

alive() {  # PIDFILE: the process named in it runs
  [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

wait_for() {  # SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
  local limit=$1 what=$2 t=0
  shift 2
  until "$@" >/dev/null 2>&1; do
    (( t++ < limit * 10 )) || die "$what did not come up in ${limit}s (logs in $DIR/log)"
    sleep 0.1
  done
}

install_packages() {
  local missing=()
  command -v munged >/dev/null || missing+=(munge)
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  command -v slurmdbd >/dev/null || missing+=(slurmdbd)
  command -v mariadbd >/dev/null || command -v mysqld >/dev/null || missing+=(mariadb-server)
  (( ${#missing[@]} )) || return 0
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null || die "missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})"
  echo "local_slurm: installing ${missing[*]}" >&2
  # policy-rc.d-free images would start the packages' own services: this script runs its own instead
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
           --no-install-recommends "${missing[@]}" >/dev/null; } \
    || die "apt-get install ${missing[*]} failed"
}

write_configs() {
  mkdir -p "$DIR"/{log,state,run,munge,mysql,gres}
  local n
  for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
  chmod 755 "$DIR/munge"  # munged refuses a socket folder that others cannot enter (700 fails)
  if [[ ! -s $DIR/munge/munge.key ]]; then
    head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
    chmod 400 "$DIR/munge/munge.key"
  fi
  local i
  for (( i = 0; i < GPUS; i++ )); do ln -sf /dev/null "$DIR/gres/gpu$i"; done
  local sock=$DIR/munge/munge.socket
  cat > "$DIR/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$((BASE + 17))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
# no cgroups here: processes are tracked through /proc, tasks are not bound
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=2,bf_interval=2
MinJobAge=600
KillWait=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((BASE + 19))
# slurmdbd connections do not read AuthInfo: they are told the munge socket here
AccountingStoragePass=$sock
NodeName=DEFAULT CPUs=$CPUS RealMemory=$((CPUS * 2000)) Gres=gpu:$GPUS State=UNKNOWN
NodeName=${NODES[0]} Port=$((BASE + 101))
NodeName=${NODES[1]} Port=$((BASE + 102))
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  : > "$DIR/gres.conf"
  for n in "${NODES[@]}"; do
    echo "NodeName=$n Name=gpu File=$DIR/gres/gpu[0-$((GPUS - 1))]" >> "$DIR/gres.conf"
  done
  cat > "$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$((BASE + 19))
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((BASE + 6))
StorageUser=root
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DIR/slurmdbd.conf"  # slurmdbd refuses a config others can read
}

start_munge() {
  alive "$DIR/run/munged.pid" && return 0
  munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed"
  wait_for 10 munged test -S "$DIR/munge/munge.socket"
}

start_mariadb() {
  alive "$DIR/run/mysqld.pid" && return 0
  local bin
  bin=$(command -v mariadbd || command -v mysqld)
  if [[ ! -d $DIR/mysql/mysql ]]; then
    mariadb-install-db --user=root --datadir="$DIR/mysql" --auth-root-authentication-method=normal \
      > "$DIR/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed ($DIR/log/mariadb-install.log)"
  fi
  "$bin" --no-defaults --user=root --datadir="$DIR/mysql" --socket="$DIR/run/mysqld.sock" \
    --pid-file="$DIR/run/mysqld.pid" --port=$((BASE + 6)) --bind-address=127.0.0.1 --skip-name-resolve \
    --log-error="$DIR/log/mysqld.log" --innodb-buffer-pool-size=32M > /dev/null 2>&1 &
  wait_for 60 MariaDB mariadb --no-defaults -uroot --socket="$DIR/run/mysqld.sock" -e "select 1"
}

start_slurmdbd() {
  alive "$DIR/run/slurmdbd.pid" && return 0
  slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
  wait_for 30 slurmdbd sacctmgr -n list cluster
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

start_slurm() {
  alive "$DIR/run/slurmctld.pid" || slurmctld -f "$DIR/slurm.conf"
  wait_for 30 slurmctld scontrol ping
  local n
  for n in "${NODES[@]}"; do
    alive "$DIR/run/slurmd-$n.pid" || slurmd -f "$DIR/slurm.conf" -N "$n"
  done
  wait_for 60 "the slurmd nodes" nodes_idle
}

nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%T' | sort -u)
  [[ $states =~ ^(idle|mixed|allocated)([[:space:]]|$) ]] || return 1
  ! grep -qE 'down|drain|inval|unknown|not_responding' <<< "$states"
}

start() {
  [[ $(id -u) == 0 ]] || die "run it as root (the daemons run as the caller and switch to job users)"
  install_packages
  # a changed config leaves nodes INVAL/DRAIN in the saved state: start from a clean state when it changed
  local before=""
  [[ -f $DIR/slurm.conf ]] && before=$(cat "$DIR/slurm.conf" "$DIR/gres.conf")
  write_configs
  if [[ $before != "$(cat "$DIR/slurm.conf" "$DIR/gres.conf")" ]] && ! alive "$DIR/run/slurmctld.pid"; then
    rm -rf "$DIR/state"/* "$DIR"/spool/*/*
  fi
  export SLURM_CONF=$DIR/slurm.conf
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurm
  echo "local_slurm: up in $DIR (nodes ${NODES[*]}); in your shell: export SLURM_CONF=$SLURM_CONF" >&2
}

stop() {
  local f pid t
  for f in "$DIR"/run/slurmd-*.pid "$DIR/run/slurmctld.pid" "$DIR/run/slurmdbd.pid" "$DIR/run/mysqld.pid" \
           "$DIR/run/munged.pid"; do
    alive "$f" || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for (( t = 0; t < 100; t++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

case $cmd in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$DIR/slurm.conf" ;;
  status)
    for f in "$DIR"/run/*.pid; do
      [[ -e $f ]] || continue
      if alive "$f"; then echo "$(basename "$f" .pid): running ($(cat "$f"))"; else echo "$(basename "$f" .pid): stopped"; fi
    done
    if alive "$DIR/run/slurmctld.pid"; then SLURM_CONF=$DIR/slurm.conf sinfo -N; fi ;;
  *) die "usage: tools/local_slurm.sh start|stop|env|status [DIR]" ;;
esac
