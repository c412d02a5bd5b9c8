{{/*
Airflow's configuration, shared by its api-server, scheduler, dag-processor, triggerer and
db-migrate Job. The database URL is assembled by the kubelet from the Secret's password
($(AIRFLOW_DB_PASSWORD)), so no manifest holds it. `tasks`: the scheduler's container, whose
LocalExecutor runs the DAGs' steps (or starts their pods): only it gets the serving store's
and MinIO's credentials (MinIO user `airflow`); the other components parse DAGs, serve the UI
or run triggers and get neither.
Call: (dict "root" $ "tasks" true)
*/}}
{{- define "lk.airflow.env" -}}
{{- $root := .root -}}
{{- $secret := include "lk.credentialsSecret" $root -}}
{{- $db := printf "%s:%v/%s" (include "lk.postgresHost" $root) $root.Values.postgres.port $root.Values.postgres.airflow.database -}}
- name: AIRFLOW_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: airflow-db-password
# psycopg 3 is the project's Postgres driver (locked in uv.lock); the async URL is set too, or
# Airflow would derive one for asyncpg, which the image does not carry.
- name: AIRFLOW__DATABASE__SQL_ALCHEMY_CONN
  value: postgresql+psycopg://{{ $root.Values.postgres.airflow.user }}:$(AIRFLOW_DB_PASSWORD)@{{ $db }}
- name: AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC
  value: postgresql+psycopg://{{ $root.Values.postgres.airflow.user }}:$(AIRFLOW_DB_PASSWORD)@{{ $db }}
# All configuration is in this environment; the file is the chart's near-empty airflow.cfg
# (a ConfigMap): without one, Airflow writes its defaults into AIRFLOW_HOME, which is read-only.
- name: AIRFLOW_CONFIG
  value: /opt/airflow/config/airflow.cfg
- name: AIRFLOW__CORE__EXECUTOR
  value: LocalExecutor
- name: AIRFLOW__CORE__PARALLELISM
  value: {{ $root.Values.airflow.parallelism | int64 | quote }}
- name: AIRFLOW__CORE__LOAD_EXAMPLES
  value: "False"
- name: AIRFLOW__CORE__DAGS_FOLDER
  value: /opt/airflow/dags
- name: AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION
  value: {{ $root.Values.airflow.dagsArePausedAtCreation | ternary "True" "False" | quote }}
- name: AIRFLOW__CORE__FERNET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: airflow-fernet-key
# Tasks run by the LocalExecutor in the scheduler pod report through the API server.
- name: AIRFLOW__CORE__EXECUTION_API_SERVER_URL
  value: http://{{ include "lk.componentName" (dict "root" $root "component" "airflow-api-server") }}:{{ $root.Values.airflow.apiServer.service.port }}/execution/
# Every component signs and checks task tokens with the same key.
- name: AIRFLOW__API_AUTH__JWT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: airflow-jwt-secret
- name: AIRFLOW__API__SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: airflow-api-secret-key
- name: AIRFLOW__CORE__AUTH_MANAGER
  value: airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
- name: AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS
  value: {{ printf "%s:admin" $root.Values.airflow.adminUser | quote }}
- name: AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE
  value: /opt/airflow/auth/passwords.json
# Task logs are served by the scheduler pod; its IP, unlike its hostname, is reachable from
# the API server without a per-pod DNS record.
- name: AIRFLOW__CORE__HOSTNAME_CALLABLE
  value: airflow.utils.net.get_host_ip_address
- name: AIRFLOW__API__WORKERS
  value: "1"
- name: AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES
  value: "1"
- name: AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL
  value: {{ $root.Values.airflow.dagProcessor.minFileProcessInterval | quote }}
- name: AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK
  value: "True"
{{- if include "lk.metrics.statsd" $root }}
# Metrics: StatsD over UDP to the chart's statsd exporter, tags InfluxDB-style (dag_id,
# task_id, state... become labels there); only the tagged names, not also the legacy ones
# with the ids inside the name (the same metric twice). job_id and run_id stay out
# (statsd_disabled_tags' default): one series per run would grow without end.
- name: AIRFLOW__METRICS__STATSD_ON
  value: "True"
- name: AIRFLOW__METRICS__STATSD_HOST
  value: {{ include "lk.componentName" (dict "root" $root "component" "statsd-exporter") }}
- name: AIRFLOW__METRICS__STATSD_PORT
  value: {{ include "lk.metrics.statsdUdpPort" $root | quote }}
- name: AIRFLOW__METRICS__STATSD_PREFIX
  value: airflow
- name: AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED
  value: "True"
- name: AIRFLOW__METRICS__LEGACY_NAMES_ON
  value: "False"
{{- end }}
{{- if include "lk.lambdaEnabled" $root }}
# The Lambda batch DAG's wiring; absent in kappa, where the DAG files define no Lambda DAG.
- name: LK_BATCH_SCHEDULE
  value: {{ $root.Values.batchLayer.schedule | quote }}
{{- end }}
# Data quality runs in every architecture (the real-time suites of what is deployed).
- name: LK_DQ_SCHEDULE
  value: {{ $root.Values.dataQuality.schedule | quote }}
{{ include "lk.airflow.backendEnv" $root }}
{{- if include "lk.airflow.remoteLogging" $root }}
{{ include "lk.airflow.remoteLoggingEnv" $root }}
{{- end }}
{{- if .tasks }}
{{ include "lk.airflow.taskEnv" $root }}
{{- else }}
{{ include "lk.env" (dict "root" $root "sparkDriverMemory" $root.Values.airflow.scheduler.sparkDriverMemory) }}
{{- end }}
{{- end }}

{{/*
The project's settings of the DAGs' tasks, wherever they run: in the scheduler's task
processes (the local backend) or in a step pod (lk.airflow.stepPod): MinIO user `airflow`, the
serving store's owner, a task's Spark driver memory and Spark's event log.
*/}}
{{- define "lk.airflow.taskEnv" -}}
{{ include "lk.env" (dict "root" . "sparkDriverMemory" .Values.airflow.scheduler.sparkDriverMemory "minioUser" "airflow" "postgres" "writer") }}
{{- include "lk.sparkEventLogEnv" . }}
{{- end }}

{{/* Airflow components wait for `airflow db migrate` (run by the db-migrate Job). */}}
{{- define "lk.airflow.waitForMigrations" -}}
- name: wait-for-migrations
  image: {{ include "lk.image" (dict "root" . "image" .Values.images.airflow) }}
  imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" .Values.images.airflow) }}
  args: ["db", "check-migrations", "--migration-wait-timeout=600"]
  env:
    {{- include "lk.airflow.env" (dict "root" .) | nindent 4 }}
  resources:
    {{- toYaml .Values.airflow.dbMigrate.resources | nindent 4 }}
  securityContext:
    {{- include "lk.containerSecurityContext" (dict "root" . "image" .Values.images.airflow) | nindent 4 }}
  volumeMounts:
    {{- include "lk.airflow.volumeMounts" . | nindent 4 }}
{{- end }}

{{/* What every Airflow container mounts: the airflow.cfg ConfigMap and a writable /tmp. */}}
{{- define "lk.airflow.volumeMounts" -}}
- name: config
  mountPath: /opt/airflow/config
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end }}

{{- define "lk.airflow.volumes" -}}
- name: config
  configMap:
    name: {{ include "lk.componentName" (dict "root" . "component" "airflow-config") }}
- name: tmp
  emptyDir: {}
{{- end }}

{{/*
The probes of an Airflow job that serves no port (the DAG processor, the triggerer). Their
check is the official chart's, `airflow jobs check` (the job heartbeats), which starts Python
and imports Airflow: about 4 CPU-s each time on a busy 2-CPU node, so that four checks a
minute across the two pods took a tenth of the node while it idled. The check runs every 15 s
only until it first passes (the startup probe), then every 2 minutes (liveness: 3 failures
restart the container); each pass touches a file in /tmp, whose age is all the readiness
probe reads (Ready within 10 s of the first pass, not Ready once none passed for 5 minutes).
Call: the job type.
*/}}
{{- define "lk.airflow.jobProbes" -}}
{{- $passed := "/tmp/lk-airflow-job-check-passed" -}}
{{- $check := printf "AIRFLOW__LOGGING__LOGGING_LEVEL=ERROR airflow jobs check --job-type %s --local && touch %s" . $passed -}}
startupProbe:
  exec:
    command: [sh, -c, {{ $check | quote }}]
  initialDelaySeconds: 20
  periodSeconds: 15
  timeoutSeconds: 45
  failureThreshold: 40
livenessProbe:
  exec:
    command: [sh, -c, {{ $check | quote }}]
  periodSeconds: 120
  timeoutSeconds: 45
  failureThreshold: 3
readinessProbe:
  exec:
    command: [sh, -c, {{ printf "test -n \"$(find %s -mmin -5 2>/dev/null)\"" $passed | quote }}]
  periodSeconds: 10
  timeoutSeconds: 5
{{- end }}

{{/* Call: (dict "root" $ "values" .Values.airflow.scheduler), the component's values. */}}
{{- define "lk.airflow.podSpecCommon" -}}
enableServiceLinks: false
securityContext:
  {{- include "lk.podSecurityContext" (dict "root" .root "values" .values "image" .root.Values.images.airflow) | nindent 2 }}
{{- end }}

{{/* True (non-empty) when each DAG step runs in a pod of its own (KubernetesPodOperator). */}}
{{- define "lk.airflow.podBackend" -}}
{{- if eq .Values.airflow.sparkBackend "kubernetes" }}true{{ end }}
{{- end }}

{{/* True (non-empty) when the scheduler pod talks to the Kubernetes API: it starts the step
pods, or its tasks' Spark drivers start executor pods. */}}
{{- define "lk.airflow.needsApi" -}}
{{- if or (include "lk.airflow.podBackend" .) (include "lk.sparkOnKubernetes" .) }}true{{ end }}
{{- end }}

{{/* The identity of the DAGs' Spark drivers and of the scheduler that runs or starts them:
the batch layer's where there is one; in Kappa, the reprocessing's, only when the API is
needed; else none (empty). */}}
{{- define "lk.airflow.serviceAccount" -}}
{{- if include "lk.lambdaEnabled" . }}
{{- include "lk.componentName" (dict "root" . "component" "spark-batch") }}
{{- else if include "lk.airflow.needsApi" . }}
{{- include "lk.componentName" (dict "root" . "component" "spark-reprocess") }}
{{- end }}
{{- end }}

{{/* The backend's settings (core.settings: spark_backend, k8s_pod_template_file): with
`kubernetes`, the step pods' template (lk.airflow.stepPod), which the scheduler mounts. */}}
{{- define "lk.airflow.backendEnv" -}}
- name: LK_SPARK_BACKEND
  value: {{ .Values.airflow.sparkBackend | quote }}
{{- if include "lk.airflow.podBackend" . }}
- name: LK_K8S_POD_TEMPLATE_FILE
  value: {{ include "lk.airflow.stepPodTemplateFile" . | quote }}
# The operator's connection: the scheduler's own ServiceAccount, and the XCom sidecar it adds
# to each step pod: the app image (`sh`, and procps's `pgrep`, with which the operator stops
# it), a restricted container like every other; the provider's default sidecar is alpine from
# Docker Hub, which a cluster without a registry cannot pull. The provider reads the sidecar's
# security context as a JSON string.
- name: AIRFLOW_CONN_KUBERNETES_DEFAULT
  value: {{ dict "conn_type" "kubernetes" "extra" (dict "in_cluster" true "namespace" .Release.Namespace "xcom_sidecar_container_image" (include "lk.image" (dict "root" . "image" .Values.images.app)) "xcom_sidecar_container_security_context" (include "lk.containerSecurityContext" (dict "root" . "image" .Values.images.app) | fromYaml | toJson)) | toJson | quote }}
{{- end }}
{{- end }}

{{- define "lk.airflow.stepPodTemplateDir" -}}/opt/airflow/pod-templates{{- end }}

{{- define "lk.airflow.stepPodTemplateFile" -}}
{{- printf "%s/step-pod.yaml" (include "lk.airflow.stepPodTemplateDir" .) }}
{{- end }}

{{/*
The DAGs' step pod (airflow.sparkBackend: kubernetes), defined once here and handed to the
KubernetesPodOperator as its pod_template_file (dags/lk_dags/pods.py adds only the pod's name,
the step's arguments and a label naming the step; the operator adds its own labels, the run
id's among them, and the XCom sidecar). The pod is a step's Spark driver: the app image, the
tasks' settings and the Secret's keys (lk.airflow.taskEnv, as in the scheduler), a restricted
security context, and with a `k8s://` master the driver's pod IP, ports and spark-defaults.conf
(lk.sparkDriverEnv), the identity that may start executors (lk.airflow.serviceAccount), and
memory for the driver's heap plus 768 MiB for Python and the JVM's off-heap.
It carries no instance label: the NetworkPolicies match it by part-of and component.
*/}}
{{- define "lk.airflow.stepPod" -}}
{{- $app := .Values.images.app -}}
{{- $values := .Values.airflow.stepPods -}}
{{- $memory := printf "%dMi" (add (include "lk.memoryMiB" .Values.airflow.scheduler.sparkDriverMemory | atoi) 768) -}}
{{- $labels := dict "app.kubernetes.io/part-of" "lambda-kappa" "app.kubernetes.io/component" "spark-step" | toYaml -}}
apiVersion: v1
kind: Pod
metadata:
  namespace: {{ .Release.Namespace }}
  {{- include "lk.pod.metadata" (dict "root" . "values" $values "labels" $labels) | nindent 2 }}
spec:
  serviceAccountName: {{ include "lk.airflow.serviceAccount" . }}
  # Only a driver that starts executor pods talks to the Kubernetes API.
  automountServiceAccountToken: {{ include "lk.sparkOnKubernetes" . | eq "true" }}
  enableServiceLinks: false
  restartPolicy: Never
  {{- with include "lk.pod.scheduling" (dict "root" . "values" $values) }}{{ . | nindent 2 }}{{ end }}
  securityContext:
    {{- include "lk.podSecurityContext" (dict "root" . "values" $values "image" $app) | nindent 4 }}
  containers:
    - name: base
      image: {{ include "lk.image" (dict "root" . "image" $app) }}
      imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" $app) }}
      env:
        {{- include "lk.airflow.taskEnv" . | trim | nindent 8 }}
        {{- with include "lk.sparkDriverEnv" (dict "root" .) | trim }}{{ . | nindent 8 }}{{ end }}
        {{- with include "lk.pod.extraEnv" (dict "root" . "values" $values) }}{{ . | nindent 8 }}{{ end }}
      {{- with include "lk.sparkDriverPorts" (dict "root" .) | trim }}
      ports:
        {{- . | nindent 8 }}
      {{- end }}
      resources:
        requests: {cpu: 500m, memory: {{ $memory }}}
        limits: {cpu: "2", memory: {{ $memory }}}
      securityContext:
        {{- include "lk.containerSecurityContext" (dict "root" . "values" $values "image" $app) | nindent 8 }}
      volumeMounts:
        {{- with include "lk.pod.extraVolumeMounts" (dict "root" . "values" $values) }}{{ . | nindent 8 }}{{ end }}
        - name: tmp
          mountPath: /tmp
        {{- with include "lk.sparkDriverVolumeMounts" (dict "root" .) | trim }}{{ . | nindent 8 }}{{ end }}
  volumes:
    {{- with include "lk.pod.extraVolumes" (dict "root" . "values" $values) }}{{ . | nindent 4 }}{{ end }}
    # Spark's local dir and the JVM's scratch space: the root filesystem is read-only.
    - name: tmp
      emptyDir: {}
    {{- with include "lk.sparkDriverVolumes" (dict "root" .) | trim }}{{ . | nindent 4 }}{{ end }}
{{- end }}

{{/* True (non-empty) when task logs go to MinIO (airflow.remoteLogging.enabled). */}}
{{- define "lk.airflow.remoteLogging" -}}
{{- if and .Values.airflow.enabled .Values.airflow.remoteLogging.enabled }}true{{ end }}
{{- end }}

{{/*
Remote logging: the Amazon provider's S3 task handler writes each task try's log to
s3://lk-logs/<airflow.remoteLogging.folder>/ when the try ends (the scheduler's task processes,
with the LocalExecutor) and the API server reads it from there, so a log (a step pod's output
included: the KubernetesPodOperator copies it into the task's log) outlives the scheduler pod.
Every component gets it: they all share one logging configuration, and the triggerer writes
the logs of deferred tasks. The connection (AIRFLOW_CONN_LK_LOGS) is assembled by the kubelet
from the Secret's keys of MinIO user `airflow-logs`, which may touch the logs bucket only; its
extra carries MinIO's endpoint and path-style addressing (the provider's `endpoint_url` and
`config_kwargs`). Values of the Secret must need no JSON escaping (generated ones never do).
*/}}
{{- define "lk.airflow.logsConnId" -}}lk_logs{{- end }}

{{- define "lk.airflow.remoteLoggingEnv" -}}
{{- $secret := include "lk.credentialsSecret" . -}}
{{- $buckets := include "lk.minio.buckets" . | fromYaml -}}
{{- $endpoint := printf "http://%s:%v" (include "lk.minioHost" .) .Values.minio.port -}}
- name: AIRFLOW__LOGGING__REMOTE_LOGGING
  value: "True"
- name: AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER
  value: {{ printf "s3://%s/%s" (get $buckets "logs") (trimSuffix "/" .Values.airflow.remoteLogging.folder) | quote }}
- name: AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID
  value: {{ include "lk.airflow.logsConnId" . | quote }}
- name: AIRFLOW_LOGS_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: minio-airflow-logs-user
- name: AIRFLOW_LOGS_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: minio-airflow-logs-password
- name: {{ printf "AIRFLOW_CONN_%s" (include "lk.airflow.logsConnId" . | upper) }}
  value: {{ dict "conn_type" "aws" "login" "$(AIRFLOW_LOGS_ACCESS_KEY)" "password" "$(AIRFLOW_LOGS_SECRET_KEY)" "extra" (dict "endpoint_url" $endpoint "region_name" "us-east-1" "config_kwargs" (dict "s3" (dict "addressing_style" "path"))) | toJson | quote }}
{{- end }}
