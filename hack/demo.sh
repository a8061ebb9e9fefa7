#!/usr/bin/env bash
# make demo: the seed workflow end to end on a local cluster of real
# components in the production shape: etcd and kube-apiserver, three nodes
# that kubeadm joins, each under its own systemd with containerd.service and
# kubelet.service, and dkc from deploy/ (the agent's DaemonSet, the
# controller's Deployment), its images pulled from a local registry. Prints
# every command and its output, then tears the cluster down.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The pinned kubectl (built with the components) first: a machine without
# kubectl runs the demo, and every kubectl here is the version tested.
components=${DKC_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/v1.37.2}
export PATH=$components:$root/_output/bin:$PATH
echo "kubectl is $components/kubectl; to run these commands yourself: export PATH=$components:$root/_output/bin:\$PATH"
export DKC_CLUSTER_DIR=${DKC_CLUSTER_DIR:-/tmp/kubectl-dkc-demo}
work=$(mktemp -d)
node=dkc-node-1

bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }
run() { # prints the command and its output; keeps going on a non-zero exit
  printf '\n$ %s\n' "$*"
  set +e
  "$@"
  local rc=$?
  set -e
  [[ $rc -eq 0 ]] || printf '(exit %d)\n' "$rc"
  return 0
}
cleanup() {
  bold "Tearing the cluster down"
  "$root/hack/local-cluster.sh" down || true
  rm -rf "$work"
}
trap cleanup EXIT

bold "Starting a local control plane and three nodes that kubeadm joins, each under its own systemd"
# dkc is installed as an operator installs it: deploy/ (the agent as a
# DaemonSet, the controller as a Deployment), the images pulled from a local
# registry. The kustomization adds two agent flags: a short trial, so the
# demo sees a config become last-known-good, and a short health timeout, so
# a rollback comes within 30s.
NODE_KIND=kubeadm DKC_AGENT_ARGS="--trial-duration=5s --health-timeout=30s" "$root/hack/local-cluster.sh" up 3
export KUBECONFIG=$DKC_CLUSTER_DIR/kubeconfig
run kubectl get nodes -o wide
run kubectl -n kube-system get pods -o wide

bold "1. Snapshot the live config of $node (configz through the apiserver proxy)"
run kubectl dkc snapshot "$node" -o yaml --output-dir "$work"
run head -12 "$work/kubelet_configz_$node"

bold "2. Edit it: maxPods 110 -> 42"
sed -i 's/^maxPods: .*/maxPods: 42/' "$work/kubelet_configz_$node"
run grep maxPods "$work/kubelet_configz_$node"
run kubectl dkc diff "node/$node" "$work/kubelet_configz_$node"
cp "$work/kubelet_configz_$node" "$work/good.yaml"

bold "3. Push it as a hash-named ConfigMap (the same name kubectl create configmap --append-hash gives)"
run kubectl dkc push "$work/kubelet_configz_$node" --name demo-config
name=$(kubectl dkc push "$work/kubelet_configz_$node" --name demo-config -o name)
name=${name#configmap/}
run kubectl create configmap demo-config --from-file=kubelet="$work/kubelet_configz_$node" --append-hash --dry-run=client -o name

bold "4. Assign it to $node and wait until the agent reports it active"
run kubectl dkc assign "$node" --config "$name" --wait --timeout 2m

bold "5. Status: active = assigned; the kubelet runs maxPods 42"
run kubectl dkc status
run kubectl get node "$node" -o jsonpath='{.status.capacity.pods}{"\n"}'

bold "After its trial (5s here, 10m in deploy/) the config becomes last-known-good"
for _ in $(seq 1 60); do
  lkg=$(kubectl dkc status "$node" -o jsonpath='{.items[0].status.lastKnownGood.configMap.name}')
  [[ $lkg == "$name" ]] && break
  sleep 0.5
done
run kubectl dkc status

bold "A config that points the kubelet at another container runtime: a dry run names, per node, the field, its class and the opt-in it needs"
sed -i 's#^containerRuntimeEndpoint: .*#containerRuntimeEndpoint: unix:///nonexistent/containerd.sock#' "$work/kubelet_configz_$node"
bad=$(kubectl dkc push "$work/kubelet_configz_$node" --name demo-bad -o name)
run kubectl dkc assign "$node" --config "${bad#configmap/}" --dry-run=server
bold "The agent refuses it before touching the kubelet: only the assigner can allow its class (redirect)"
run kubectl dkc assign "$node" --config "${bad#configmap/}" --wait --timeout 2m
run kubectl dkc status -o wide

bold "Allowed by the assigner, it reaches the kubelet, which cannot start on it: the agent rolls back to the last-known-good"
run kubectl dkc assign "$node" --config "${bad#configmap/}" --allow-unsafe=redirect --wait --timeout 2m
run kubectl dkc status -o wide
run kubectl get events --field-selector involvedObject.name="$node" --sort-by=.lastTimestamp

bold "A payload without kind is refused before it reaches a node"
sed -i '/^kind:/d' "$work/kubelet_configz_$node"
run kubectl dkc push "$work/kubelet_configz_$node" --name demo-nokind

bold "6. Reset $node to its local config"
run kubectl dkc reset "$node" --wait --timeout 2m
run kubectl dkc status
run kubectl get node "$node" -o jsonpath='{.status.capacity.pods}{"\n"}'

bold "7. Roll a config out over every node: a canary first, then one node at a time, driven by the controller"
# kubeadm gave every node the same config, so $node's snapshot fits them all.
sed 's/^maxPods: .*/maxPods: 55/' "$work/good.yaml" >"$work/fleet.yaml"
fleet=$(kubectl dkc push "$work/fleet.yaml" --name demo-fleet -o name)
fleet=${fleet#configmap/}
run kubectl dkc rollout start --config "$fleet" --all --dry-run=client
run kubectl dkc rollout start --config "$fleet" --all --name demo --max-unavailable 1 --canary 1 --wait --timeout 5m
run kubectl dkc rollout status demo
run kubectl dkc status
run kubectl dkc rollout history "$node"
run kubectl get nodeconfigrollouts -n kube-system

bold "8. Undo the rollout: every node back to what it ran before, under the same budget"
run kubectl dkc rollout undo demo --wait --timeout 5m
run kubectl dkc status
