# A real one-node Kubernetes without Docker (infra/cluster): included by the Makefile
# (`include infra/cluster.mk`); `make help` lists these targets. Needs root, Go, gcc, and
# Debian's containerd, runc, containernetworking-plugins, iptables, nftables, conntrack
# (`infra/bootstrap.sh --cluster` installs them; etcd is built from the Go proxy).

##@ Kubernetes (local cluster, no Docker)

.PHONY: cluster-build
cluster-build: ## Build what the cluster needs (Kubernetes, etcd, the NetworkPolicy agent, CoreDNS, helm, pause), start nothing
	$(LK) cluster build

.PHONY: cluster-up
cluster-up: ## Start the one-node cluster (builds Kubernetes, CoreDNS, helm the first time)
	$(LK) cluster up

.PHONY: cluster-down
cluster-down: ## Stop the cluster and undo its mounts, cgroups, netns (data and images stay)
	$(LK) cluster down

.PHONY: cluster-status
cluster-status: ## Report each component of the cluster, the node and the pods
	$(LK) cluster status

.PHONY: cluster-reset
cluster-reset: ## Stop the cluster and delete its data (build cache and imported images stay)
	$(LK) cluster reset

.PHONY: cluster-smoke
cluster-smoke: ## Smoke-test the running cluster (PVC, Service DNS, port-forward, exec)
	$(LK) cluster smoke

.PHONY: cluster-install
cluster-install: ## Build and import the images, then install the chart: make cluster-install ARCH=both
	@case '$(ARCH)' in lambda|kappa|both) ;; *) echo "ARCH must be lambda, kappa or both (got '$(ARCH)')"; exit 1;; esac
	$(UV) run python -m infra.images build --tag $(IMAGE_TAG) --load
	$(UV) run python -m infra.cluster.install $(ARCH) --tag $(IMAGE_TAG)

.PHONY: cluster-prometheus
cluster-prometheus: ## A Prometheus (Debian's) scraping the release by its annotations, in namespace lk-monitoring
	$(UV) run python -m infra.prometheus --tag $(IMAGE_TAG)

.PHONY: cluster-compare
cluster-compare: ## The side-by-side comparison as a Job of the release (ARCH=both), followed to its report
	@# One node of this machine's 2 CPUs: the release's own streams pause while the run goes.
	$(UV) run python -m infra.cluster.compare --pause-streams
