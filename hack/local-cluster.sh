#!/usr/bin/env bash
# Brings a local cluster of real components up or down for people:
#   hack/local-cluster.sh up [NODES]   start etcd, kube-apiserver and NODES kubelets
#   hack/local-cluster.sh env          print the export line for its kubeconfig
#   hack/local-cluster.sh down         stop every process it started and remove
#                                      its namespaces, links and mounts
# up waits for the cluster to be ready ($DKC_CLUSTER_READY_TIMEOUT seconds,
# default 300); if it fails, is interrupted or times out, it stops the
# cluster it started.
# State lives in $DKC_CLUSTER_DIR (default /tmp/kubectl-dkc-cluster). Every node
# runs a dkc agent; $DKC_AGENT_TRIAL sets its --trial-duration (default 1m),
# $DKC_AGENT_APPLY_MODE its --apply-mode (replace, the default, or dropin).
# dkc's CRDs are installed, and a dkc controller drives rollouts: a process
# on the host, with AGENT=process. With NODE_KIND=kubeadm (or
# AGENT=daemonset, which implies it) the nodes are what an operator runs:
# each boots its own systemd, which runs containerd.service and the
# kubelet.service that `kubeadm join` set up; the agents and the controller
# run in pods, as deploy/'s DaemonSet and Deployment, applied unmodified but
# for the images: those `make image` wrote to _output/image, pushed to the
# cluster's registry on 127.0.0.1 and pulled from there by each node's
# containerd. With AGENT=daemonset, $DKC_AGENT_ARGS are flags added to the DaemonSet's
# agent args, as an operator's kustomization would add them (for example
# --trial-duration=5s; the last of a repeated flag wins).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${DKC_CLUSTER_DIR:-/tmp/kubectl-dkc-cluster}
pidfile=$dir/cluster.pid
# The pinned kubectl comes with the components: first on PATH here, and in
# the export line printed for the person at the terminal.
components=${DKC_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/v1.37.2}
export PATH=$components:$root/_output/bin:$PATH
path_line="export PATH=$components:$root/_output/bin:\$PATH"
bin=$root/_output/bin/dkc-cluster

# The cluster is the process up started; $pidfile records its PID and its
# start time (so a reused PID is not taken for it), written before up waits.
# up waits on that process itself, not on its command line: until the forked
# shell has exec'd dkc-cluster, its command line names the script instead.

# proc_start PID: the process's start time (field 22 of /proc/PID/stat);
# fails if it is gone or a zombie.
proc_start() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -ra fields <<<"${stat##*) }"
  [[ ${fields[0]} != Z ]] || return 1
  echo "${fields[19]}"
}

# running: the recorded process is alive (and not a reused PID); prints its PID.
running() {
  [[ -f $pidfile ]] || return 1
  local pid start
  read -r pid start <"$pidfile" || true
  [[ -n $pid && -n $start ]] || return 1
  [[ $(proc_start "$pid") == "$start" ]] || return 1
  echo "$pid"
}

# orphans: PIDs of this cluster directory's dkc-cluster whose pid file is
# gone: the processes whose command line is $bin --dir $dir.
orphans() {
  local f pid args i named
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    mapfile -d '' -t args 2>/dev/null <"$f" || continue
    named=
    for ((i = 0; i < ${#args[@]}; i++)); do
      [[ ${args[i]} == "$bin" ]] && named=1
      if [[ -n $named && ${args[i]} == --dir && ${args[i + 1]:-} == "$dir" ]]; then
        proc_start "$pid" >/dev/null && echo "$pid"
        break
      fi
    done
  done
  return 0
}

# stop PID...: SIGTERM, then wait up to 60s for each to end.
stop() {
  local pid
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for _ in $(seq 1 600); do proc_start "$pid" >/dev/null || break; sleep 0.1; done
    if proc_start "$pid" >/dev/null; then
      echo "error: dkc-cluster (pid $pid) did not stop within 60s" >&2
      return 1
    fi
  done
}

node_kind=${NODE_KIND:-process}
[[ ${AGENT:-process} == daemonset ]] && node_kind=kubeadm
case $node_kind in
process) ;;
kubeadm) AGENT=daemonset ;;
*)
  echo "error: NODE_KIND must be process or kubeadm, got $node_kind" >&2
  exit 2
  ;;
esac

case ${1:-} in
up)
  if pid=$(running); then
    echo "cluster already running (pid $pid)"
    echo "$path_line"
    echo "export KUBECONFIG=$dir/kubeconfig"
    exit 0
  fi
  if [[ -n $(orphans) ]]; then
    echo "error: a dkc-cluster of $dir runs without its pid file (pid $(orphans | tr '\n' ' ')): stop it with $0 down" >&2
    exit 1
  fi
  mkdir -p "$dir" "$root/_output/bin"
  # The first build prints what it builds and its progress; later, one line.
  "$root/hack/build-components.sh" | grep --line-buffered -v "^/" || true
  if [[ ${AGENT:-process} == daemonset ]]; then
    "$root/hack/build-components-registry.sh" | grep --line-buffered -v "^/" || true
  fi
  (cd "$root" && go build -o "$bin" ./hack/cluster)
  # One dkc agent per node, from the kubectl-dkc that make build produced.
  agent=$root/_output/bin/kubectl-dkc
  [[ -x $agent ]] || (cd "$root" && make build >/dev/null)
  rm -f "$dir/ready"
  # $! must be dkc-cluster itself: `down` ends it by this PID.
  agent_args=(--agent-binary "$agent")
  if [[ ${AGENT:-process} == daemonset ]]; then
    if [[ ! -f $root/_output/image/kubectl-dkc-agent.oci.tar || ! -f $root/_output/image/kubectl-dkc-controller.oci.tar ]]; then
      echo "error: AGENT=daemonset needs the agent and controller images: run make image" >&2
      exit 1
    fi
    agent_args=(--agent-images "$root/_output/image" --root "$root" --node-kind "$node_kind" --agent-args "${DKC_AGENT_ARGS:-}")
  fi
  nohup "$bin" --dir "$dir" --nodes "${2:-2}" "${agent_args[@]}" \
    --agent-rbac "$root/deploy/rbac.yaml" --crds "$root/deploy/crds.yaml" \
    --controller-manifest "$root/deploy/controller.yaml" --agent-trial-duration "${DKC_AGENT_TRIAL:-1m}" \
    --agent-apply-mode "${DKC_AGENT_APPLY_MODE:-replace}" \
    >"$dir/cluster.log" 2>&1 &
  pid=$!
  # Recorded before anything can fail; from here on, a failure (or an
  # interrupt) stops what up started.
  echo "$pid $(proc_start "$pid")" >"$pidfile"
  failed() {
    echo "error: $1; see $dir/cluster.log:" >&2
    tail -20 "$dir/cluster.log" >&2
    stop "$pid" || true
    rm -f "$pidfile"
    exit 1
  }
  trap 'failed "up was interrupted"' INT TERM
  timeout=${DKC_CLUSTER_READY_TIMEOUT:-300}
  deadline=$((SECONDS + timeout))
  until [[ -f $dir/ready ]]; do
    # The process up started, whatever its command line says yet.
    if ! proc_start "$pid" >/dev/null; then
      wait "$pid" && rc=0 || rc=$?
      failed "the cluster failed to start (exit status $rc)"
    fi
    ((SECONDS < deadline)) || failed "the cluster was not ready within ${timeout}s"
    sleep 0.1
  done
  trap - INT TERM
  grep -E 'Ready|ready after|agent pid|agent pod|controller pid|controller pod|kubeadm node' "$dir/cluster.log" || true
  if [[ ${AGENT:-process} == daemonset ]]; then
    echo "agents run in pods: kubectl get pods -n kube-system -o wide; kubectl dkc status"
  fi
  echo "$path_line"
  echo "export KUBECONFIG=$dir/kubeconfig"
  ;;
env)
  echo "$path_line"
  echo "export KUBECONFIG=$dir/kubeconfig"
  ;;
down)
  # The recorded process, or, if its pid file is gone, the dkc-cluster of
  # this directory that a lost or failed up left behind.
  if pid=$(running); then
    pids=("$pid")
  else
    mapfile -t pids < <(orphans)
  fi
  if ((${#pids[@]})); then
    stop "${pids[@]}"
    tail -2 "$dir/cluster.log" 2>/dev/null || true
  else
    echo "no cluster running"
  fi
  rm -f "$pidfile" "$dir/ready"
  ;;
*)
  echo "usage: $0 up [NODES] | env | down" >&2
  exit 2
  ;;
esac
