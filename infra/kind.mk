# Kubernetes on kind: the cluster, the six images, the chart. Included by the Makefile
# (`include infra/kind.mk`); `make help` lists these targets. Needs docker, kind, kubectl, helm.
# Without Docker or any container registry: `make cluster-images` builds the same images with
# podman from a debootstrapped Debian base (infra/images), `make cluster-load` imports them
# into the containerd of `lk cluster up`.

KIND ?= kind
KUBECTL ?= kubectl
HELM ?= helm
DOCKER ?= docker
KIND_CLUSTER ?= lambda-kappa
NAMESPACE ?= lambda-kappa
RELEASE ?= lk
ARCH ?= lambda
CHART := charts/lambda-kappa
# The project's six images, as the chart names them (images.<name>.repository: lambda-kappa/<name>;
# tests/charts/test_image_registry.py checks the two lists against each other).
IMAGES := app airflow kafka minio postgres statsd
IMAGE_REFS = $(foreach image,$(IMAGES),lambda-kappa/$(image):$(IMAGE_TAG))
APP_IMAGE ?= lambda-kappa/app
AIRFLOW_IMAGE ?= lambda-kappa/airflow
KAFKA_IMAGE ?= lambda-kappa/kafka
MINIO_IMAGE ?= lambda-kappa/minio
POSTGRES_IMAGE ?= lambda-kappa/postgres
STATSD_IMAGE ?= lambda-kappa/statsd
# The MinIO module version the local stack builds (core/settings.py), for the MinIO image.
MINIO_VERSION ?= $(shell sed -n 's/^ *minio_version: str = "\(.*\)"/\1/p' core/settings.py)
# A unique tag per commit, and per content of uncommitted changes: kind ignores `kind load` for
# `latest` (pulled with Always), and a reused tag would leave running pods on the old image.
IMAGE_TAG ?= $(shell t=$$(git describe --tags --always 2>/dev/null || echo dev); \
  if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then \
    t="$$t-dirty-$$( (git diff HEAD; git ls-files --others --exclude-standard) | sha256sum | cut -c1-8)"; \
  fi; echo "$$t")
IMAGE_TAG := $(IMAGE_TAG)

##@ Kubernetes (kind)

.PHONY: kind-up
kind-up: ## Create the one-node kind cluster (infra/kind/cluster.yaml: UI on :8080, API on :8000)
	$(KIND) create cluster --name $(KIND_CLUSTER) --config infra/kind/cluster.yaml --wait 120s

.PHONY: images
images: ## Build the six images with Docker from public bases, tagged $(IMAGE_TAG) (never latest)
	$(DOCKER) build -f infra/docker/app.Dockerfile -t $(APP_IMAGE):$(IMAGE_TAG) .
	$(DOCKER) build -f infra/docker/airflow.Dockerfile \
	  --build-arg APP_IMAGE=$(APP_IMAGE):$(IMAGE_TAG) -t $(AIRFLOW_IMAGE):$(IMAGE_TAG) .
	$(DOCKER) build -f infra/docker/kafka.Dockerfile -t $(KAFKA_IMAGE):$(IMAGE_TAG) .
	$(DOCKER) build -f infra/docker/minio.Dockerfile \
	  --build-arg MINIO_VERSION=$(MINIO_VERSION) -t $(MINIO_IMAGE):$(IMAGE_TAG) .
	$(DOCKER) build -f infra/docker/postgres.Dockerfile -t $(POSTGRES_IMAGE):$(IMAGE_TAG) .
	$(DOCKER) build -f infra/docker/statsd.Dockerfile -t $(STATSD_IMAGE):$(IMAGE_TAG) .

.PHONY: cluster-images
cluster-images: ## Build the images with podman, no registry: debootstrapped base (cached), $(IMAGE_TAG)
	$(UV) run python -m infra.images build --tag $(IMAGE_TAG)

.PHONY: cluster-load
cluster-load: ## Import the images of $(IMAGE_TAG) into the containerd of `lk cluster up` (SOCKET=path)
	$(UV) run python -m infra.images load --tag $(IMAGE_TAG) $(if $(SOCKET),--socket $(SOCKET))

.PHONY: kind-load
kind-load: ## Load the images of $(IMAGE_TAG) into the kind node (pods use IfNotPresent)
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(IMAGE_REFS)

.PHONY: images-push
images-push: ## Push the images of $(IMAGE_TAG) to a registry: make images-push REGISTRY=host[:port]/path
	@[ -n '$(REGISTRY)' ] || { echo "REGISTRY is missing: make images-push REGISTRY=registry.example.com/team"; exit 1; }
	@for ref in $(IMAGE_REFS); do \
	  $(DOCKER) tag $$ref $(REGISTRY)/$$ref && $(DOCKER) push $(REGISTRY)/$$ref || exit 1; \
	done
	@echo "pushed; install with --set image.registry=$(REGISTRY) --set-string image.tag=$(IMAGE_TAG)"

# The release's install and its `helm test`, on the cluster of kube context $(1) with the values
# file $(2): the same for kind and minikube. ARCH is checked before anything runs.
check_arch = $(if $(filter $(ARCH),lambda kappa both),,$(error ARCH must be lambda, kappa or both (got '$(ARCH)')))
define helm_install
	$(call check_arch)
	$(HELM) upgrade --install $(RELEASE) $(CHART) --kube-context $(1) --namespace $(NAMESPACE) --create-namespace -f $(2) --set architecture=$(ARCH) --set-string image.tag=$(IMAGE_TAG) --wait --timeout 20m
	$(KUBECTL) --context $(1) -n $(NAMESPACE) get pods
	$(HELM) test $(RELEASE) --kube-context $(1) --namespace $(NAMESPACE)
endef
# Kappa's reprocessing triggered as the Airflow UI's Trigger button does, and the data-quality
# summary (`GET /v1/quality`) through the API's port on localhost: the same for both clusters.
define reprocess
	$(KUBECTL) --context $(1) -n $(NAMESPACE) exec deploy/$(RELEASE)-airflow-scheduler -- airflow dags trigger kappa_reprocess
endef

.PHONY: install
install: ## Install or upgrade the chart on kind, then `helm test`: make install ARCH=lambda|kappa|both
	$(call helm_install,kind-$(KIND_CLUSTER),infra/kind/values.yaml)

.PHONY: kind-reprocess
kind-reprocess: ## Trigger Kappa's reprocessing (kappa_reprocess) as the Airflow UI's button does
	$(call reprocess,kind-$(KIND_CLUSTER))

.PHONY: kind-quality
kind-quality: ## The data-quality summary of both architectures (GET /v1/quality on :8000)
	curl -s http://localhost:8000/v1/quality

.PHONY: kind-compare
kind-compare: ## The side-by-side comparison as a Job of the release (ARCH=both), followed to its report
	$(UV) run python -m infra.cluster.compare --context kind-$(KIND_CLUSTER) --namespace $(NAMESPACE) --release $(RELEASE)

.PHONY: uninstall
uninstall: ## Remove the release; PURGE=1 also deletes its volumes and credentials
	$(HELM) uninstall $(RELEASE) --kube-context kind-$(KIND_CLUSTER) --namespace $(NAMESPACE) --wait || true
	@if [ "$(PURGE)" = "1" ]; then \
	  $(KUBECTL) --context kind-$(KIND_CLUSTER) -n $(NAMESPACE) delete pvc,secret,configmap \
	    -l app.kubernetes.io/instance=$(RELEASE) --ignore-not-found; \
	else \
	  echo "kept: the data volumes, $(RELEASE)-credentials and $(RELEASE)-kafka (PURGE=1 deletes them)"; \
	fi

.PHONY: kind-down
kind-down: ## Delete the kind cluster and everything in it
	$(KIND) delete cluster --name $(KIND_CLUSTER)

.PHONY: chart-test
chart-test: ## Chart tests, offline: render with Helm, lint, validate every object, hadolint
	$(UV) run pytest tests/charts -q

.PHONY: chart-docs
chart-docs: ## Write the chart's README (its table of every value) with helm-docs, built from the Go proxy
	$(UV) run python -m infra.chart docs

.PHONY: chart-package
chart-package: ## Package the chart into out/chart/, then lint the package and check its README
	$(UV) run python -m infra.chart package --out out/chart
