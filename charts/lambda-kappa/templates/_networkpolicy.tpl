{{/*
NetworkPolicies (networkPolicies.enabled): ingress only; egress stays open (DNS, the API
server, external services). Pods are named by app.kubernetes.io/component within the release
(app.kubernetes.io/instance); the KubernetesPodOperator's step pods carry no instance label
(dags/lk_dags/pods.py), so they are matched by part-of and component.

Who reaches the three stores, from what the code connects to. Every app pod's wait-for-init
runs `lk init --check` with the pod's own credentials, so a component is a client of what its
check reads too (serving checks the store only: `--serving`).
  kafka:    init (topics), the stream drivers, the Airflow scheduler (its tasks: close_archive,
            Kappa replays, data quality), Spark executors (the Kafka source runs on them),
            step pods
  minio:    init (buckets), minio-users (the admin API), the stream drivers, the scheduler,
            executors, step pods, the Spark History Server (the event logs), the other Airflow
            components (task logs, airflow.remoteLogging); the serving API does not read MinIO
  postgres: init, serving, the stream drivers (progress, real-time views), every Airflow
            component (its metadata database), executors (JDBC writes), step pods
  and the comparison's Job (both, comparison.enabled) reaches all three: its own drivers run
  in its pod, on topics, buckets and a database of their own
  Kafka Connect (connect.enabled) reaches Kafka (its topics, `profiles`) and Postgres (the
  replication slot); so does the application: networkPolicies.producers reach Postgres too
  (`lk profiles` writes the user table, the application's database)
*/}}
{{- define "lk.netpol.storeClients" -}}
{{- $drivers := list }}
{{- if include "lk.lambdaEnabled" . }}{{ $drivers = concat $drivers (list "archiver" "speed-layer") }}{{ end }}
{{- if include "lk.kappaEnabled" . }}{{ $drivers = append $drivers "kappa-stream" }}{{ end }}
{{- $spark := list }}
{{- if .Values.airflow.enabled }}{{ $spark = append $spark "airflow-scheduler" }}{{ end }}
{{- if include "lk.sparkOnKubernetes" . }}{{ $spark = append $spark "spark-executor" }}{{ end }}
{{- $airflow := list }}
{{- if .Values.airflow.enabled }}
{{- $airflow = list "airflow-api-server" "airflow-dag-processor" "airflow-triggerer" "airflow-db-migrate" }}
{{- end }}
{{- $comparison := list }}
{{- if include "lk.comparisonEnabled" . }}{{ $comparison = list "comparison" }}{{ end }}
{{- $history := list }}
{{- if .Values.sparkHistory.enabled }}{{ $history = list "spark-history" }}{{ end }}
{{- $connect := list }}
{{- if .Values.connect.enabled }}{{ $connect = list "connect" }}{{ end }}
kafka: {{ concat (list "init") $drivers $spark $comparison $connect | toJson }}
{{- /* Task logs on MinIO: the other Airflow components read (api-server) or write them. */}}
{{- $logs := list }}
{{- if include "lk.airflow.remoteLogging" . }}
{{- $logs = list "airflow-api-server" "airflow-dag-processor" "airflow-triggerer" }}
{{- end }}
minio: {{ concat (list "init" "minio-users") $drivers $spark $comparison $history $logs | toJson }}
postgres: {{ concat (list "init" "serving") $drivers $spark $airflow $comparison $connect | toJson }}
{{- end }}

{{/* The Spark drivers whose executors call back (client mode on Kubernetes). */}}
{{- define "lk.netpol.sparkDrivers" -}}
{{- $drivers := list }}
{{- if include "lk.lambdaEnabled" . }}{{ $drivers = concat $drivers (list "archiver" "speed-layer") }}{{ end }}
{{- if include "lk.kappaEnabled" . }}{{ $drivers = append $drivers "kappa-stream" }}{{ end }}
{{- if .Values.airflow.enabled }}{{ $drivers = append $drivers "airflow-scheduler" }}{{ end }}
{{- $drivers | toJson }}
{{- end }}

{{/*
Peers of an ingress rule: components of the release, and the step pods when asked.
Call: (dict "root" $ "components" (list ...) "stepPods" true)
*/}}
{{- define "lk.netpol.peers" -}}
{{- range .components }}
- podSelector:
    matchLabels:
      app.kubernetes.io/instance: {{ $.root.Release.Name }}
      app.kubernetes.io/component: {{ . }}
{{- end }}
{{- if and .stepPods (include "lk.airflow.podBackend" .root) }}
- podSelector:
    matchLabels:
      app.kubernetes.io/part-of: lambda-kappa
      app.kubernetes.io/component: spark-step
{{- end }}
{{- end }}

{{/*
One NetworkPolicy selecting a component's pods, with its ingress rules.
Call: (dict "root" $ "component" "kafka" "ingress" (list (dict "ports" (list "kafka") "from" "<yaml>")))
A rule without "from" admits any source on its ports, one without "ports" any port of its
sources; ports are port names or numbers, TCP unless the rule says "protocol" "UDP".
*/}}
{{- define "lk.networkPolicy" -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "lk.componentName" (dict "root" .root "component" .component) }}
  labels:
    {{- include "lk.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "lk.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
  policyTypes: ["Ingress"]
  ingress:
    {{- range .ingress }}
    {{- $rule := dict }}
    {{- $protocol := .protocol | default "TCP" }}
    {{- with .ports }}
    {{- $ports := list }}
    {{- range . }}{{ $ports = append $ports (dict "protocol" $protocol "port" .) }}{{ end }}
    {{- $_ := set $rule "ports" $ports }}
    {{- end }}
    {{- with .from }}
    {{- $_ := set $rule "from" (. | fromYamlArray) }}
    {{- end }}
    {{- list $rule | toYaml | nindent 4 }}
    {{- end }}
{{- end }}
