# kubectl dkc. `make demo` runs the workflow on a local cluster of real
# components; `make test` runs every check CI runs. Both need root on Linux.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# The version (docs/release.md): the file VERSION names the release, vX.Y.Z.
# `make release` builds it; every other build is a development build of it,
# VERSION-dev-COMMIT (-dirty when the tree differs from that commit), so no
# dev binary or image carries the release's name. COMMIT is the last commit
# that changed anything but the release files (hack/version.sh).
RELEASE_VERSION := $(shell hack/version.sh release)
VERSION    ?= $(shell hack/version.sh dev 2>/dev/null || echo $(RELEASE_VERSION)-dev-unknown)
GIT_COMMIT ?= $(shell hack/version.sh commit 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X github.com/kubectl-dkc/dkc/pkg/version.version=$(VERSION) \
           -X github.com/kubectl-dkc/dkc/pkg/version.gitCommit=$(GIT_COMMIT) \
           -X github.com/kubectl-dkc/dkc/pkg/version.buildDate=$(BUILD_DATE)
BIN := _output/bin
# Every Go command here (vet, the unit and e2e tests, the binaries and the
# images) compiles with the flags of a release build, static and with
# trimmed paths, so that they share one set of compiled packages in the Go
# cache instead of compiling every dependency twice. The compiler writes no
# DWARF, which release builds strip anyway (-ldflags -s -w): that makes a
# cold compile about a tenth cheaper, and the flags match those of the
# component builds (hack/build-components-lib.sh), which compile the same
# client-go and apimachinery. Only `make race` sets CGO_ENABLED=1, for the
# race detector, which needs cgo; it compiles its own instrumented copy.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -gcflags=all=-dwarf=false)
# Debian packages the real-component tests need: the isolated systemd
# (framework.StartSystemd) needs systemd and dbus; kubeadm join's preflight
# needs losetup and mount (mount).
# The race detector (make race) needs cgo, so a C compiler and the C
# library's headers: gcc and libc6-dev.
TEST_PKGS := containerd runc containernetworking-plugins iptables iproute2 util-linux systemd dbus mount gcc libc6-dev
E2E_TIMEOUT ?= 80m
# How many of the e2e tests that call t.Parallel run at once, each on a
# cluster of its own (docs/development.md, "Tests in parallel").
E2E_PARALLEL ?= 2
# The older components make e2e builds first; make test builds them beside
# the e2e tests instead.
E2E_OLD_COMPONENTS ?= components-v1.23 components-v1.34
# The e2e tests that need the v1.23.17 components, the last that make test
# builds in the background. When make e2e does not build the older
# components first (make test), these run after all the others, so that
# the background build has the whole rest of the run to finish before a
# test waits for it. The tests that run kubelet v1.34.12, built first, wait
# for it where they are, if they must.
E2E_LAST_TESTS := ^TestLegacyNativeDKC$$
# Whether make e2e runs E2E_LAST_TESTS apart, after the others: when it did
# not build the older components first, and E2E_ARGS picks no tests of its
# own with -run (then that one go test runs just those, once).
E2E_SPLIT = $(if $(or $(E2E_OLD_COMPONENTS),$(findstring -run,$(E2E_ARGS))),,yes)
# Where hack/build-components.sh puts the v1.37.2 components and the pinned
# kubectl: first on PATH for `make demo` and `make cluster-up`, so a machine
# without kubectl runs them.
COMPONENTS_DIR ?= $(or $(DKC_BIN_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubectl-dkc/bin/v1.37.2)
# How many kubelets `make cluster-up` starts.
NODES ?= 2
# The images (make image, make push): the registry and path they are named
# under, HOST/PATH, the tag of dkc's images and the platforms. The agent is
# IMAGE_REPO/kubectl-dkc-agent:IMAGE_TAG, the controller
# IMAGE_REPO/kubectl-dkc-controller:IMAGE_TAG; the pause and probe images of
# the tests are IMAGE_REPO/kubectl-dkc-pause:v1 and IMAGE_REPO/kubectl-dkc-probe:v1.
# Timestamps in them are the commit's, so the same commit gives the same digest.
IMAGE_REPO      ?= registry.example
IMAGE_TAG       ?= $(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR       := _output/image
IMAGES          := kubectl-dkc-agent:$(IMAGE_TAG) kubectl-dkc-controller:$(IMAGE_TAG) kubectl-dkc-pause:v1 kubectl-dkc-probe:v1
SOURCE_DATE_EPOCH ?= $(shell hack/version.sh epoch 2>/dev/null || echo 0)
# Where `make release` puts one version's archives, image archives and sums.
RELEASE_DIR     := _output/release
# Which agent `make cluster-up` runs: process (one per node, started by the
# script) or daemonset (deploy/ unmodified but for the images, from `make
# image`, on kubeadm nodes: implies NODE_KIND=kubeadm).
AGENT ?= process
# Which nodes `make cluster-up` starts: process (kubelets as processes of
# the harness) or kubeadm (kubeadm-joined nodes, each under its own systemd,
# with deploy/ applied unmodified but for the images; implies daemonset).
NODE_KIND ?= process
# Which benchmarks `make bench` runs: a go test -bench regexp.
BENCH ?= .
# BENCH_COUNT: how many times each benchmark runs (docs/performance.md reports the median of 3).
BENCH_COUNT ?= 1
# How long `make fuzz` runs each fuzz target (their seed corpora in
# testdata/fuzz run in `make unit` anyway), and the targets, as PACKAGE:NAME.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./pkg/kubeletconfig:FuzzDecode ./pkg/source:FuzzAssignedAnnotation \
	./pkg/source:FuzzStatusAnnotation ./pkg/checkpoint:FuzzMetaSource ./pkg/configz:FuzzTransform \
	./pkg/kubeletconfig:FuzzClassify

.PHONY: build
build: ## Build _output/bin/kubectl-dkc
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-dkc .

.PHONY: agent
agent: ## Build _output/bin/kubectl-dkc-agent, the slim node agent (DaemonSet image, systemd unit)
	go build -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/kubectl-dkc-agent ./cmd/kubectl-dkc-agent

.PHONY: install
install: build ## Install kubectl-dkc and its completion helper kubectl_complete-dkc into /usr/local/bin, where kubectl finds them
	install -m 0755 $(BIN)/kubectl-dkc /usr/local/bin/kubectl-dkc
	install -m 0755 kubectl_complete-dkc /usr/local/bin/kubectl_complete-dkc

.PHONY: components
components: ## Build kube-apiserver, kubelet and etcd from Go modules (cached)
	hack/build-components.sh

.PHONY: components-registry
components-registry: ## Build distribution's OCI registry, which the e2e tests serve on loopback and pull images from (cached)
	hack/build-components-registry.sh

.PHONY: components-v1.23
components-v1.23: ## Build kube-apiserver and kubelet v1.23.17, the original DKC (cached)
	hack/build-components-v1.23.sh

.PHONY: components-krew
components-krew: ## Build krew and its manifest validator, which test/krew runs (cached)
	hack/build-components-krew.sh

.PHONY: components-v1.34
components-v1.34: ## Build kubelet v1.34.12, the oldest the skew policy allows under apiserver 1.37 (cached)
	hack/build-components-v1.34.sh

.PHONY: test-deps
test-deps: ## Install the Debian packages the e2e tests need, when missing
	@missing=$$(for p in $(TEST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

.PHONY: fmt-check
fmt-check: ## Fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	go vet ./...
	cd hack/tools && go vet ./etcd
	cd hack/image && go vet ./...

.PHONY: unit
unit: ## Unit tests (no cluster)
	go test ./cmd/... ./pkg/... ./deploy/... ./hack/cluster/...
	cd hack/image && go test ./...

.PHONY: race
race: ## Unit tests of cmd/ and pkg/ under the race detector (needs gcc: make test-deps)
	CGO_ENABLED=1 go test -race ./cmd/... ./pkg/...

.PHONY: docs
docs: ## Regenerate the docs made from the code: docs/reference.md, and docs/security.md's table of field classes (unit fails when they are stale)
	go test ./cmd -run '^TestReferenceDocs$$' -count=1 -update
	go test ./pkg/kubeletconfig -run '^TestFieldClassDocs$$' -count=1 -update

.PHONY: generate
generate: ## Regenerate what is made from the API types of pkg/apis: zz_generated.deepcopy.go and deploy/crds.yaml (unit fails when they are stale)
	go run ./hack/generate

.PHONY: e2e
# What the e2e tests run: the binaries and images make builds.
E2E_ENV = DKC_BINARY=$(CURDIR)/$(BIN)/kubectl-dkc DKC_AGENT_BINARY=$(CURDIR)/$(BIN)/kubectl-dkc-agent \
	DKC_AGENT_IMAGE=$(CURDIR)/$(IMAGE_DIR)/kubectl-dkc-agent.oci.tar DKC_CONTROLLER_IMAGE=$(CURDIR)/$(IMAGE_DIR)/kubectl-dkc-controller.oci.tar \
	DKC_PAUSE_IMAGE=$(CURDIR)/$(IMAGE_DIR)/kubectl-dkc-pause.oci.tar DKC_PROBE_IMAGE=$(CURDIR)/$(IMAGE_DIR)/kubectl-dkc-probe.oci.tar
# The tests run the images on this machine only: build them for its platform.
e2e: IMAGE_PLATFORMS = linux/$(shell go env GOARCH)
e2e: test-deps components components-registry $(E2E_OLD_COMPONENTS) build agent image ## Tests on real etcd, kube-apiserver and kubelets
	@rc=0; \
	$(E2E_ENV) go test -p 1 -parallel $(E2E_PARALLEL) -count=1 -timeout $(E2E_TIMEOUT) $(if $(E2E_SPLIT),-skip '$(E2E_LAST_TESTS)') ./test/... $(E2E_ARGS) || rc=$$?; \
	$(if $(E2E_SPLIT),$(E2E_ENV) go test -p 1 -count=1 -timeout $(E2E_TIMEOUT) -run '$(E2E_LAST_TESTS)' ./test/e2e/ $(E2E_ARGS) || rc=$$?;) \
	exit $$rc

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s), one after another (docs/reliability.md)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

.PHONY: bench
bench: test-deps components components-v1.23 build agent ## Benchmarks on real components, or only those matching BENCH=regexp (docs/performance.md)
	DKC_BINARY=$(CURDIR)/$(BIN)/kubectl-dkc DKC_AGENT_BINARY=$(CURDIR)/$(BIN)/kubectl-dkc-agent go test -v -run '^$$' -bench '$(BENCH)' -benchtime=1x -count=$(BENCH_COUNT) -timeout 180m ./test/bench/

.PHONY: test
# First the components build, three at a time, largest first: each
# component set is one go build in a module of its own, and side by side
# they keep both cores busy through downloads and links. Then the checks and
# unit tests: dkc compiles the same client-go and apimachinery as the
# v1.37.2 set, and a second go build running beside the first compiles each
# shared package again instead of taking it from the cache. The checks and
# then the e2e tests (run even when a check failed, so that one run shows
# every failure) run while the older components, which only a few e2e tests
# use, build in the background at the lowest CPU priority, on the cores the
# tests leave idle; the tests that use them run last and wait for them
# (framework.RequireBinaries, through the file named by
# DKC_COMPONENTS_PENDING).
test: ## Everything CI runs
	$(MAKE) --no-print-directory -j3 test-deps components components-registry components-krew
	@pending=$(CURDIR)/_output/components-pending; mkdir -p _output; touch $$pending; \
	echo "make components-v1.34 components-v1.23 in the background while the checks and e2e tests run (log: $$pending.log)"; \
	( nice -n 19 $(MAKE) --no-print-directory components-v1.34 components-v1.23 >$$pending.log 2>&1; \
	  echo "make components-v1.34 components-v1.23 exited $$?" >>$$pending.log; rm -f $$pending ) & \
	bg=$$!; rc=0; \
	$(MAKE) --no-print-directory checks || rc=$$?; \
	DKC_COMPONENTS_PENDING=$$pending $(MAKE) --no-print-directory e2e E2E_OLD_COMPONENTS= || rc=$$?; \
	wait $$bg; tail -n 1 $$pending.log; \
	if ! grep -q 'exited 0$$' $$pending.log; then cat $$pending.log; rc=1; fi; \
	exit $$rc

.PHONY: checks
checks: ## gofmt, go vet, the unit tests and the unit tests under the race detector, one after another
	@$(MAKE) --no-print-directory fmt-check
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory race

.PHONY: cluster-up
cluster-up: export PATH := $(COMPONENTS_DIR):$(CURDIR)/$(BIN):$(PATH)
cluster-up: test-deps components build $(if $(filter daemonset,$(AGENT))$(filter kubeadm,$(NODE_KIND)),components-registry image) ## Start a local cluster of real components (NODES=N kubelets, default 2; NODE_KIND=kubeadm, or AGENT=daemonset: kubeadm-joined nodes under systemd, the agents and controller in pods from deploy/ unmodified)
	AGENT=$(AGENT) NODE_KIND=$(NODE_KIND) hack/local-cluster.sh up $(NODES)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove everything it made
	hack/local-cluster.sh down

.PHONY: demo
demo: export PATH := $(COMPONENTS_DIR):$(CURDIR)/$(BIN):$(PATH)
demo: IMAGE_PLATFORMS = linux/$(shell go env GOARCH)
demo: test-deps components components-registry build image ## The seed workflow, end to end, on a local cluster of kubeadm nodes running deploy/
	hack/demo.sh

.PHONY: image
image: ## Build the agent, controller, pause and readiness-probe images as OCI archives in _output/image (no Docker, nothing pulled)
	@set -e; for kind in agent controller; do \
		(cd hack/image && go run . $$kind -root $(CURDIR) -o $(abspath $(IMAGE_DIR))/kubectl-dkc-$$kind.oci.tar \
		-name $(IMAGE_REPO)/kubectl-dkc-$$kind:$(IMAGE_TAG) -version $(VERSION) -commit $(GIT_COMMIT) \
		-epoch $(SOURCE_DATE_EPOCH) -platforms $(IMAGE_PLATFORMS)); \
	done
	cd hack/image && go run . pause -o $(abspath $(IMAGE_DIR))/kubectl-dkc-pause.oci.tar \
		-name $(IMAGE_REPO)/kubectl-dkc-pause:v1 -epoch $(SOURCE_DATE_EPOCH) -platforms $(IMAGE_PLATFORMS)
	cd hack/image && go run . probe -o $(abspath $(IMAGE_DIR))/kubectl-dkc-probe.oci.tar \
		-name $(IMAGE_REPO)/kubectl-dkc-probe:v1 -epoch $(SOURCE_DATE_EPOCH) -platforms $(IMAGE_PLATFORMS)

.PHONY: push
push: ## Push the image archives of IMAGE_DIR as OCI image indexes to IMAGE_REPO=HOST/PATH: `make image push IMAGE_REPO=...` (HTTP only to loopback)
	@case "$(IMAGE_REPO)" in registry.example|registry.example/*) \
		echo "error: IMAGE_REPO=$(IMAGE_REPO) is the placeholder: set IMAGE_REPO=HOST/PATH, the registry to push to" >&2; exit 1;; esac
	hack/version.sh check $(IMAGE_TAG)
	@set -e; for image in $(IMAGES); do \
		(cd hack/image && go run . push -image $(abspath $(IMAGE_DIR))/$${image%%:*}.oci.tar -ref $(IMAGE_REPO)/$$image); \
	done

.PHONY: release
release: ## Build the release the file VERSION names, from a clean tree, into _output/release, and render plugins/dkc.yaml (docs/release.md)
	hack/release.sh $(if $(filter command line,$(origin VERSION)),$(VERSION),$(RELEASE_VERSION))

.PHONY: version
version: ## Print the version a build of this tree gets (VERSION) and the release the file VERSION names
	@echo "VERSION=$(VERSION)"
	@echo "RELEASE_VERSION=$(RELEASE_VERSION)"

.PHONY: clean
clean:
	rm -rf _output

.PHONY: help
help:
	@grep -E '^[a-z0-9.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'
