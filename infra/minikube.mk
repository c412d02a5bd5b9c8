# Kubernetes on minikube (with Docker): the same six images and the same chart as on kind
# (infra/kind.mk: `make images`, the install recipe), loaded with `minikube image load`.
# Included by the Makefile; the README's "Helm on minikube" shows each target's commands, and
# tests/charts/test_infra.py checks that the two are the same.

MINIKUBE ?= minikube
MINIKUBE_PROFILE ?= lambda-kappa

##@ Kubernetes (minikube)

.PHONY: minikube-up
minikube-up: ## Start a one-node minikube cluster (profile lambda-kappa: 4 CPUs, 9 GiB)
	$(MINIKUBE) start --profile $(MINIKUBE_PROFILE) --cpus 4 --memory 9g --kubernetes-version v1.33.1

.PHONY: minikube-load
minikube-load: ## Load the images of $(IMAGE_TAG) into minikube (pods use IfNotPresent)
	for image in $(IMAGE_REFS); do $(MINIKUBE) --profile $(MINIKUBE_PROFILE) image load $$image || exit 1; done

.PHONY: minikube-install
minikube-install: ## Install or upgrade the chart on minikube, then `helm test`: ARCH=lambda|kappa|both
	$(call helm_install,$(MINIKUBE_PROFILE),infra/kind/values.yaml)

.PHONY: minikube-open
minikube-open: ## The addresses of the serving API and of the Airflow UI (their NodePorts)
	$(MINIKUBE) --profile $(MINIKUBE_PROFILE) service --namespace $(NAMESPACE) --url $(RELEASE)-serving $(RELEASE)-airflow-api-server

.PHONY: minikube-reprocess
minikube-reprocess: ## Trigger Kappa's reprocessing (kappa_reprocess) as the Airflow UI's button does
	$(call reprocess,$(MINIKUBE_PROFILE))

.PHONY: minikube-down
minikube-down: ## Delete the minikube cluster and everything in it
	$(MINIKUBE) delete --profile $(MINIKUBE_PROFILE)
