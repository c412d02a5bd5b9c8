{{/*
Metrics (metrics.enabled): every long-running component serves Prometheus's text format on a
named port of its pod, and says where with the `prometheus.io/*` pod annotations (the
convention of Prometheus's kubernetes_sd examples); with metrics.serviceMonitor.enabled the
same targets become PodMonitors and ServiceMonitors for the Prometheus Operator.

lk.metrics.targets is the one list of scrape targets; the workloads' annotations, the
monitors and the tests all read it:
  archiver, speed-layer, kappa-stream: `lk archive` / `lk stream` (LK_METRICS_PORT), `metrics`
  serving:          the API's own /metrics, on `http` (its Service carries it: a ServiceMonitor)
  kafka:            the JMX exporter javaagent in the broker's JVM, `metrics`
  connect:          the same javaagent in Kafka Connect's worker, `metrics`
  minio:            MinIO's own endpoint on the S3 port, `s3`, /minio/v2/metrics/cluster
  postgres:         prometheus-postgres-exporter, a sidecar of the Postgres pod, `metrics`
  statsd-exporter:  Airflow's StatsD metrics translated (its Service: a ServiceMonitor)
A store deployed elsewhere (`<store>.enabled: false`) is not a target of the chart's.
*/}}

{{/* The fixed ports (the dashboard's and the cluster tests' contract). */}}
{{- define "lk.metrics.streamPort" -}}9108{{- end }}
{{- define "lk.metrics.kafkaPort" -}}9404{{- end }}
{{- define "lk.metrics.postgresPort" -}}9187{{- end }}
{{- define "lk.metrics.statsdWebPort" -}}9102{{- end }}
{{- define "lk.metrics.statsdUdpPort" -}}9125{{- end }}

{{/* True (non-empty) when Airflow sends StatsD to the chart's statsd exporter. */}}
{{- define "lk.metrics.statsd" -}}
{{- if and .Values.metrics.enabled .Values.airflow.enabled }}true{{ end }}
{{- end }}

{{/*
The scrape targets, a YAML list: component, port (the container port's name), number, path,
and `via`: pod (a PodMonitor) or service (a ServiceMonitor on the component's Service, whose
port of the same name reaches it). Empty when metrics.enabled is false.
*/}}
{{- define "lk.metrics.targets" -}}
{{- $targets := list }}
{{- if .Values.metrics.enabled }}
{{- $stream := include "lk.metrics.streamPort" . | int }}
{{- if include "lk.lambdaEnabled" . }}
{{- $targets = append $targets (dict "component" "archiver" "port" "metrics" "number" $stream "path" "/metrics" "via" "pod") }}
{{- $targets = append $targets (dict "component" "speed-layer" "port" "metrics" "number" $stream "path" "/metrics" "via" "pod") }}
{{- end }}
{{- if include "lk.kappaEnabled" . }}
{{- $targets = append $targets (dict "component" "kappa-stream" "port" "metrics" "number" $stream "path" "/metrics" "via" "pod") }}
{{- end }}
{{- $targets = append $targets (dict "component" "serving" "port" "http" "number" (.Values.serving.port | int) "path" "/metrics" "via" "service") }}
{{- if .Values.kafka.enabled }}
{{- $targets = append $targets (dict "component" "kafka" "port" "metrics" "number" (include "lk.metrics.kafkaPort" . | int) "path" "/metrics" "via" "pod") }}
{{- end }}
{{- if .Values.connect.enabled }}
{{- $targets = append $targets (dict "component" "connect" "port" "metrics" "number" (include "lk.metrics.kafkaPort" . | int) "path" "/metrics" "via" "pod") }}
{{- end }}
{{- if .Values.minio.enabled }}
{{- $targets = append $targets (dict "component" "minio" "port" "s3" "number" (.Values.minio.port | int) "path" "/minio/v2/metrics/cluster" "via" "pod") }}
{{- end }}
{{- if .Values.postgres.enabled }}
{{- $targets = append $targets (dict "component" "postgres" "port" "metrics" "number" (include "lk.metrics.postgresPort" . | int) "path" "/metrics" "via" "pod") }}
{{- end }}
{{- if include "lk.metrics.statsd" . }}
{{- $targets = append $targets (dict "component" "statsd-exporter" "port" "metrics" "number" (include "lk.metrics.statsdWebPort" . | int) "path" "/metrics" "via" "service") }}
{{- end }}
{{- end }}
{{- toYaml $targets }}
{{- end }}

{{/*
The `prometheus.io/*` annotations of a component's pods (nothing when it is no target).
Call: (dict "root" $ "component" "kafka")
*/}}
{{- define "lk.metrics.podAnnotations" -}}
{{- range include "lk.metrics.targets" .root | fromYamlArray }}
{{- if eq .component $.component }}
{{- dict "prometheus.io/scrape" "true" "prometheus.io/port" (.number | int64 | toString) "prometheus.io/path" .path | toYaml }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The ingress rule that admits the scrapers (metrics.scrapeFrom) to a component's metrics port,
as a list of one rule for lk.networkPolicy; empty when metrics are off or scrapeFrom is [] (no
rule: an empty `from` would admit everyone). Call: (dict "root" $ "component" "kafka")
*/}}
{{- define "lk.metrics.scrapeRules" -}}
{{- $rules := list }}
{{- if .root.Values.metrics.scrapeFrom }}
{{- range include "lk.metrics.targets" .root | fromYamlArray }}
{{- if eq .component $.component }}
{{- $rules = append $rules (dict "ports" (list .port) "from" (toYaml $.root.Values.metrics.scrapeFrom)) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $rules }}
{{- end }}

{{/* The labels of a monitor: the component's and metrics.serviceMonitor.labels. */}}
{{- define "lk.metrics.monitorLabels" -}}
{{ include "lk.labels" . }}
{{- with .root.Values.metrics.serviceMonitor.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* An endpoint of a PodMonitor or ServiceMonitor: port, path, interval, timeout. */}}
{{- define "lk.metrics.endpoint" -}}
{{- $monitor := .root.Values.metrics.serviceMonitor -}}
- port: {{ .target.port }}
  path: {{ .target.path }}
  interval: {{ $monitor.interval }}
  scrapeTimeout: {{ $monitor.scrapeTimeout }}
{{- end }}
