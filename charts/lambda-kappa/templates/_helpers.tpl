{{/*
Names, labels, images, security contexts and the LK_ environment shared by every component.
A component template calls these with a dict: (dict "root" $ "component" "serving").
*/}}

{{- define "lk.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: the release name, as the official Airflow chart does. */}}
{{- define "lk.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* <fullname>-<component>; 40 + 1 + 22 characters stays within a DNS label. */}}
{{- define "lk.componentName" -}}
{{- printf "%s-%s" (include "lk.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lk.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lk.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lk.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "lk.labels" -}}
{{ include "lk.selectorLabels" . }}
app.kubernetes.io/part-of: lambda-kappa
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ include "lk.chart" .root }}
{{- end }}

{{/* True (non-empty) when the Lambda path (archiver, batch, speed layer) is deployed. */}}
{{- define "lk.lambdaEnabled" -}}
{{- if has .Values.architecture (list "lambda" "both") }}true{{ end }}
{{- end }}

{{/* True (non-empty) when the Kappa stream job is deployed. */}}
{{- define "lk.kappaEnabled" -}}
{{- if has .Values.architecture (list "kappa" "both") }}true{{ end }}
{{- end }}

{{/* True (non-empty) when the comparison's CronJob (`lk compare`) is rendered. */}}
{{- define "lk.comparisonEnabled" -}}
{{- if and (eq .Values.architecture "both") .Values.comparison.enabled }}true{{ end }}
{{- end }}

{{/* True (non-empty) when Spark drivers start executors as pods (client mode). */}}
{{- define "lk.sparkOnKubernetes" -}}
{{- if hasPrefix "k8s://" .Values.spark.master }}true{{ end }}
{{- end }}

{{/*
An image reference: image.registry (if any) before the repository; the image's own tag, else
image.tag, else the chart's appVersion. `latest` is refused by the schema: kind would pull it
with Always and ignore `kind load`.
Call: (dict "root" $ "image" .Values.images.app)
*/}}
{{- define "lk.image" -}}
{{- $repository := .image.repository -}}
{{- with .root.Values.image.registry }}{{ $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}{{ end -}}
{{- printf "%s:%s" $repository (.image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion | toString) }}
{{- end }}

{{/* The imagePullSecrets' names, comma-separated (Spark's own setting for its executors). */}}
{{- define "lk.imagePullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets }}{{ $names = append $names .name }}{{ end -}}
{{- join "," $names -}}
{{- end }}

{{- define "lk.imagePullPolicy" -}}
{{- .image.pullPolicy | default "IfNotPresent" }}
{{- end }}

{{/*
Pod-level security context for an image: its own non-root user; fsGroup makes the volumes
writable for it. The top-level podSecurityContext is set over it, then the component's own
(`values`), key by key. Call: (dict "root" $ "values" .Values.serving "image" .Values.images.app);
without "values", the top-level one alone (what the chart adds to every pod: its init
containers' waits, the XCom sidecar).
*/}}
{{- define "lk.podSecurityContext" -}}
{{- $defaults := dict "runAsNonRoot" true "runAsUser" .image.runAsUser "runAsGroup" .image.runAsGroup "fsGroup" .image.runAsGroup "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- include "lk.securityContext.merged" (dict "defaults" $defaults "root" .root "values" .values "key" "podSecurityContext") }}
{{- end }}

{{/*
Container-level security context: repeated per container so each one is non-root alone. The
root filesystem is read-only: every container writes only to its volumes (an emptyDir /tmp,
the data volumes, Airflow's logs and auth folders). The top-level securityContext is set over
it, then the component's own. Call: as lk.podSecurityContext.
*/}}
{{- define "lk.containerSecurityContext" -}}
{{- $defaults := dict "runAsNonRoot" true "runAsUser" .image.runAsUser "runAsGroup" .image.runAsGroup "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- include "lk.securityContext.merged" (dict "defaults" $defaults "root" .root "values" .values "key" "securityContext") }}
{{- end }}

{{/* The chart's security context with the user's set over it: the top-level `key`, then the
component's. */}}
{{- define "lk.securityContext.merged" -}}
{{- $context := .defaults -}}
{{- with .root }}{{ $context = mergeOverwrite $context (deepCopy (get .Values $.key | default dict)) }}{{ end -}}
{{- with .values }}{{ $context = mergeOverwrite $context (deepCopy (get . $.key | default dict)) }}{{ end -}}
{{- toYaml $context }}
{{- end }}

{{/* The Secret holding every credential: generated by the chart, or the user's own. */}}
{{- define "lk.credentialsSecret" -}}
{{- if .Values.credentials.existingSecret }}
{{- .Values.credentials.existingSecret }}
{{- else }}
{{- include "lk.componentName" (dict "root" . "component" "credentials") }}
{{- end }}
{{- end }}

{{/* Service hosts: the chart's own Service, or an external host when the component is off. */}}
{{- define "lk.kafkaHost" -}}
{{- if .Values.kafka.enabled }}{{ include "lk.componentName" (dict "root" . "component" "kafka") }}{{ else }}{{ .Values.kafka.externalHost }}{{ end }}
{{- end }}

{{- define "lk.minioHost" -}}
{{- if .Values.minio.enabled }}{{ include "lk.componentName" (dict "root" . "component" "minio") }}{{ else }}{{ .Values.minio.externalHost }}{{ end }}
{{- end }}

{{- define "lk.connectHost" -}}
{{- include "lk.componentName" (dict "root" . "component" "connect") }}
{{- end }}

{{- define "lk.postgresHost" -}}
{{- if .Values.postgres.enabled }}{{ include "lk.componentName" (dict "root" . "component" "postgres") }}{{ else }}{{ .Values.postgres.externalHost }}{{ end }}
{{- end }}

{{/*
The serving API's read-only role in the serving store: `lk init` (as the owner) creates it and
grants it SELECT only; `lk serve` connects as it. Also given to the init Job, which creates it.
*/}}
{{- define "lk.servingPostgresEnv" -}}
- name: LK_SERVING_POSTGRES_USER
  value: {{ .Values.serving.postgresUser | quote }}
- name: LK_SERVING_POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "lk.credentialsSecret" . }}
      key: serving-postgres-password
{{- end }}

{{/*
MinIO: the buckets (core/settings.py's defaults; `lk init` creates them) and one user per
component that uses MinIO, each with a policy on its buckets only (minio-users Job). Access
per bucket, from what the code reads and writes:
  init:         creates the six buckets (`lk init`)
  archiver:     the master dataset and the checkpoints (its Spark queries)
  speed-layer:  the checkpoints and the views bucket (its accepted log, for hand-offs)
  kappa-stream: the checkpoints
  airflow:      the scheduler's tasks (and their step pods): the master dataset (close_archive,
                batch, data quality), the checkpoints (close_archive, Kappa reprocessing), the
                Data Docs bucket, whose docs/ prefix it makes public (publish_docs), and
                Spark's event logs (sparkHistory.enabled: the only drivers that write one,
                core.spark.event_log_conf)
  spark-history: (sparkHistory.enabled) reads the event logs, and deletes those older than
                sparkHistory.maxAge (its cleaner); writes nothing
  airflow-logs: (airflow.remoteLogging.enabled) Airflow's task logs (the logs bucket): every
                Airflow component gets this user's keys alone, in the logs connection
                (lk.airflow.remoteLoggingEnv), so none but the scheduler holds `airflow`'s
  comparison:   (both, comparison.enabled) its runs' own buckets, `<bucket>-cmp-*` for the
                master dataset, views and checkpoints (`Settings.namespaced` with
                comparison.live.RUN_PREFIX), created by the run; and the Data Docs bucket,
                whose comparison/ prefix it makes public (comparison.publish)
The serving API reads Postgres only: no MinIO user. Every user may list bucket names (what
`lk init --check` asks), never another bucket's objects, never the admin API.
*/}}
{{- define "lk.minio.buckets" -}}
master: lk-master
views: lk-views
checkpoints: lk-checkpoints
dq: lk-dq
events: lk-spark-events
logs: lk-logs
{{- end }}

{{- /* airflow: its steps archive (close_archive), publish (the speed layer's hand-off reads and trims
 its accepted log in views), replay Kappa versions (checkpoints) and publish Data Docs (dq). */}}
{{- define "lk.minio.access" -}}
init: {create: [master, views, checkpoints, dq, events, logs]}
archiver: {readWrite: [master, checkpoints]}
speed-layer: {readWrite: [checkpoints, views]}
kappa-stream: {readWrite: [checkpoints]}
{{- if .Values.sparkHistory.enabled }}
airflow: {readWrite: [master, views, checkpoints, dq, events], publish: [dq]}
spark-history: {readDelete: [events]}
{{- else }}
airflow: {readWrite: [master, views, checkpoints, dq], publish: [dq]}
{{- end }}
{{- if include "lk.airflow.remoteLogging" . }}
airflow-logs: {readWrite: [logs]}
{{- end }}
{{- if include "lk.comparisonEnabled" . }}
comparison: {runs: [master, views, checkpoints], readWrite: [dq], publish: [dq]}
{{- end }}
{{- end }}

{{/* The MinIO users' short names, as a YAML list (fromYamlArray). */}}
{{- define "lk.minio.users" -}}
{{- keys (include "lk.minio.access" . | fromYaml) | sortAlpha | toYaml }}
{{- end }}

{{/* A MinIO user's IAM policy, as JSON. Call: (dict "root" $ "user" "archiver") */}}
{{- define "lk.minio.policy" -}}
{{- $buckets := include "lk.minio.buckets" .root | fromYaml -}}
{{- $access := get (include "lk.minio.access" .root | fromYaml) .user -}}
{{- $arn := "arn:aws:s3:::" -}}
{{- $statements := list (dict "Sid" "ListBucketNames" "Effect" "Allow" "Action" (list "s3:ListAllMyBuckets") "Resource" (list (printf "%s*" $arn))) -}}
{{- with $access.create }}
{{- $resources := list }}
{{- range . }}{{ $resources = append $resources (printf "%s%s" $arn (get $buckets .)) }}{{ end }}
{{- $statements = append $statements (dict "Sid" "CreateBuckets" "Effect" "Allow" "Action" (list "s3:CreateBucket" "s3:ListBucket" "s3:GetBucketLocation") "Resource" $resources) }}
{{- end }}
{{- /* runs: the buckets of a comparison run's namespace, `<bucket>-cmp-<time>`, made by the run. */}}
{{- $runBuckets := list }}
{{- range $access.runs }}{{ $runBuckets = append $runBuckets (printf "%s-cmp-*" (get $buckets .)) }}{{ end }}
{{- with $runBuckets }}
{{- $resources := list }}
{{- range . }}{{ $resources = append $resources (printf "%s%s" $arn .) }}{{ end }}
{{- $statements = append $statements (dict "Sid" "CreateRunBuckets" "Effect" "Allow" "Action" (list "s3:CreateBucket") "Resource" $resources) }}
{{- end }}
{{- $rw := list }}
{{- range $access.readWrite }}{{ $rw = append $rw (get $buckets .) }}{{ end }}
{{- with concat $rw $runBuckets }}
{{- $bucketArns := list }}
{{- $objectArns := list }}
{{- range . }}
{{- $bucketArns = append $bucketArns (printf "%s%s" $arn .) }}
{{- $objectArns = append $objectArns (printf "%s%s/*" $arn .) }}
{{- end }}
{{- $statements = append $statements (dict "Sid" "ListBuckets" "Effect" "Allow" "Action" (list "s3:ListBucket" "s3:GetBucketLocation" "s3:ListBucketMultipartUploads") "Resource" $bucketArns) }}
{{- $statements = append $statements (dict "Sid" "ReadWriteObjects" "Effect" "Allow" "Action" (list "s3:GetObject" "s3:PutObject" "s3:DeleteObject" "s3:AbortMultipartUpload" "s3:ListMultipartUploadParts") "Resource" $objectArns) }}
{{- end }}
{{- /* readDelete: list and read objects, delete old ones; never write (the History Server). */}}
{{- with $access.readDelete }}
{{- $bucketArns := list }}
{{- $objectArns := list }}
{{- range . }}
{{- $bucketArns = append $bucketArns (printf "%s%s" $arn (get $buckets .)) }}
{{- $objectArns = append $objectArns (printf "%s%s/*" $arn (get $buckets .)) }}
{{- end }}
{{- $statements = append $statements (dict "Sid" "ListReadBuckets" "Effect" "Allow" "Action" (list "s3:ListBucket" "s3:GetBucketLocation") "Resource" $bucketArns) }}
{{- $statements = append $statements (dict "Sid" "ReadDeleteObjects" "Effect" "Allow" "Action" (list "s3:GetObject" "s3:DeleteObject") "Resource" $objectArns) }}
{{- end }}
{{- with $access.publish }}
{{- $resources := list }}
{{- range . }}{{ $resources = append $resources (printf "%s%s" $arn (get $buckets .)) }}{{ end }}
{{- $statements = append $statements (dict "Sid" "PublishDocs" "Effect" "Allow" "Action" (list "s3:CreateBucket" "s3:GetBucketPolicy" "s3:PutBucketPolicy") "Resource" $resources) }}
{{- end }}
{{- dict "Version" "2012-10-17" "Statement" $statements | toJson }}
{{- end }}

{{/*
The project's settings (core/settings.py, prefix LK_) for the app and Airflow containers: the
only way configuration reaches the code. Credentials come from the Secret, never inline, and
each pod gets only its own:
  minioUser: whose MinIO keys (LK_MINIO_ACCESS_KEY, LK_MINIO_SECRET_KEY): one of
             lk.minio.users ("archiver", ...); "" for none (the pod does not use MinIO).
  postgres:  "writer": the serving store's owner (LK_POSTGRES_USER, LK_POSTGRES_PASSWORD);
             "reader": the read-only role only (LK_SERVING_POSTGRES_USER and _PASSWORD);
             "": no serving-store credential.
  sparkMaster: overrides spark.master (the comparison's drivers run Spark in local mode).
Call: (dict "root" $ "sparkDriverMemory" "768m" "minioUser" "archiver" "postgres" "writer")
*/}}
{{- define "lk.env" -}}
{{- $root := .root -}}
{{- $secret := include "lk.credentialsSecret" $root -}}
{{- if and .minioUser (not (has .minioUser (include "lk.minio.users" $root | fromYamlArray))) -}}
{{- fail (printf "lk.env: unknown MinIO user %q" .minioUser) -}}
{{- end -}}
{{- $pg := .postgres | default "" -}}
{{- if not (has $pg (list "writer" "reader" "")) -}}
{{- fail (printf "lk.env: postgres must be writer, reader or empty, not %q" $pg) -}}
{{- end -}}
- name: LK_ARCHITECTURE
  value: {{ $root.Values.architecture | quote }}
- name: LK_HOME
  value: /tmp/lk
- name: LK_SPARK_JARS_DIR
  value: /opt/lk/jars
- name: LK_KAFKA_HOST
  value: {{ include "lk.kafkaHost" $root | quote }}
- name: LK_KAFKA_PORT
  value: {{ $root.Values.kafka.port | int64 | quote }}
- name: LK_EVENTS_PARTITIONS
  value: {{ $root.Values.kafka.eventsPartitions | int64 | quote }}
- name: LK_PROFILES_PARTITIONS
  value: {{ $root.Values.kafka.profilesPartitions | int64 | quote }}
- name: LK_MINIO_HOST
  value: {{ include "lk.minioHost" $root | quote }}
- name: LK_MINIO_PORT
  value: {{ $root.Values.minio.port | int64 | quote }}
{{- with .minioUser }}
- name: LK_MINIO_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ printf "minio-%s-user" . }}
- name: LK_MINIO_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ printf "minio-%s-password" . }}
{{- end }}
- name: LK_POSTGRES_HOST
  value: {{ include "lk.postgresHost" $root | quote }}
- name: LK_POSTGRES_PORT
  value: {{ $root.Values.postgres.port | int64 | quote }}
- name: LK_POSTGRES_DB
  value: {{ $root.Values.postgres.serving.database | quote }}
{{- if eq $pg "writer" }}
- name: LK_POSTGRES_USER
  value: {{ $root.Values.postgres.serving.user | quote }}
- name: LK_POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: postgres-password
{{- else if eq $pg "reader" }}
{{ include "lk.servingPostgresEnv" $root }}
{{- end }}
- name: LK_SPARK_MASTER
  value: {{ .sparkMaster | default $root.Values.spark.master | quote }}
- name: LK_SPARK_SHUFFLE_PARTITIONS
  value: {{ $root.Values.spark.shufflePartitions | int64 | quote }}
- name: LK_SPARK_DRIVER_MEMORY
  value: {{ .sparkDriverMemory | default "1g" | quote }}
- name: LK_SPARK_UI_ENABLED
  value: {{ $root.Values.spark.ui.enabled | toString | quote }}
- name: LK_SPARK_UI_PORT
  value: {{ $root.Values.spark.ui.port | int64 | quote }}
- name: LK_WATERMARK_DELAY_MINUTES
  value: {{ $root.Values.stream.watermarkDelayMinutes | int64 | quote }}
- name: LK_STREAM_MAX_OFFSETS_PER_TRIGGER
  value: {{ $root.Values.stream.maxOffsetsPerTrigger | int64 | quote }}
- name: LK_STREAM_STATE_PARTITIONS
  value: {{ $root.Values.stream.statePartitions | int64 | quote }}
- name: LK_STARTUP_TIMEOUT_S
  value: {{ $root.Values.startupTimeoutSeconds | int64 | quote }}
{{ include "lk.cdcEnv" (dict "root" $root "postgres" $pg) }}
{{- end }}

{{/*
Change data capture's variables (connect.enabled): the application's database and the logins
of the application and the connector. "postgres" as lk.env's, or "connector": both passwords
go to the writer only (`lk init` and the comparison create the roles with them), the
connector's alone to "connector" (the Connect pod's register sidecar, which reaches Connect
at "connectHost"). Off: the comparison produces its profiles straight into the topic
(core/cdc/publish.py). Call: (dict "root" $ "postgres" "writer" ["connectHost" "127.0.0.1"])
*/}}
{{- define "lk.cdcEnv" -}}
{{- $root := .root -}}
{{- $secret := include "lk.credentialsSecret" $root -}}
- name: LK_CDC_ENABLED
  value: {{ $root.Values.connect.enabled | toString | quote }}
{{- if $root.Values.connect.enabled }}
- name: LK_CONNECT_HOST
  value: {{ .connectHost | default (include "lk.connectHost" $root) | quote }}
- name: LK_CONNECT_PORT
  value: {{ $root.Values.connect.port | int64 | quote }}
- name: LK_APP_DB
  value: {{ $root.Values.postgres.app.database | quote }}
- name: LK_APP_POSTGRES_USER
  value: {{ $root.Values.postgres.app.user | quote }}
- name: LK_CDC_POSTGRES_USER
  value: {{ $root.Values.postgres.cdcUser | quote }}
{{- if eq .postgres "writer" }}
- name: LK_APP_POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: app-postgres-password
{{- end }}
{{- if has .postgres (list "writer" "connector") }}
- name: LK_CDC_POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: cdc-postgres-password
{{- end }}
{{- end }}
{{- end }}

{{/*
Whether a driver runs its executors as pods: by the master it is given ("master"), else by
spark.master. Call: (dict "root" $ ["master" "local[2]"]).
*/}}
{{- define "lk.driverOnKubernetes" -}}
{{- if hasKey . "master" }}{{ if hasPrefix "k8s://" .master }}true{{ end }}{{ else }}{{ include "lk.sparkOnKubernetes" .root }}{{ end }}
{{- end }}

{{/*
What a Spark driver pod needs in client mode on Kubernetes: its own IP as the address executors
call back (SPARK_LOCAL_IP), its pod name so executors are owned by it and deleted with it, and
the spark-defaults.conf that names the executor image, namespace and pod template.
*/}}
{{- define "lk.sparkDriverEnv" -}}
{{- if include "lk.driverOnKubernetes" . }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: SPARK_LOCAL_IP
  value: $(POD_IP)
- name: SPARK_CONF_DIR
  value: /opt/lk/spark-conf
# Executors call the driver back at spark.driver.host: its pod IP, as a pod's hostname has no
# DNS record (SPARK_LOCAL_IP only sets the address the driver binds).
- name: PYSPARK_SUBMIT_ARGS
  value: --conf spark.kubernetes.driver.pod.name=$(POD_NAME) --conf spark.driver.host=$(POD_IP) pyspark-shell
{{- end }}
{{- end }}

{{/*
Spark's event log (sparkHistory.enabled), for the drivers whose MinIO user may write it (the
Airflow scheduler's tasks; their step pods inherit it, dags/lk_dags/pods.py). Which of those
drivers write one is core.spark.event_log_conf's rule: the ones that end.
*/}}
{{- define "lk.sparkEventLogEnv" -}}
{{- if .Values.sparkHistory.enabled }}
- name: LK_SPARK_EVENT_LOG_DIR
  value: {{ include "lk.sparkEventLogDir" . | quote }}
{{- end }}
{{- end }}

{{- define "lk.sparkEventLogDir" -}}
{{- printf "s3a://%s/" (get (include "lk.minio.buckets" . | fromYaml) "events") }}
{{- end }}

{{/* A JVM memory size (768m, 2g, 524288k; values.schema.json's `memory`) in MiB. */}}
{{- define "lk.memoryMiB" -}}
{{- $size := lower . -}}
{{- $number := trimSuffix "k" (trimSuffix "m" (trimSuffix "g" $size)) | atoi -}}
{{- if hasSuffix "g" $size }}{{ mul $number 1024 }}{{ else if hasSuffix "k" $size }}{{ div $number 1024 }}{{ else }}{{ $number }}{{ end }}
{{- end }}

{{- define "lk.sparkDriverPorts" -}}
{{- if .root.Values.spark.ui.enabled }}
- name: spark-ui
  containerPort: {{ .root.Values.spark.ui.port }}
{{- end }}
{{- if include "lk.driverOnKubernetes" . }}
- name: spark-driver
  containerPort: 7078
- name: spark-blockmgr
  containerPort: 7079
{{- end }}
{{- end }}

{{- define "lk.sparkDriverVolumeMounts" -}}
{{- if include "lk.driverOnKubernetes" . }}
- name: spark-conf
  mountPath: /opt/lk/spark-conf
  readOnly: true
{{- end }}
{{- end }}

{{- define "lk.sparkDriverVolumes" -}}
{{- if include "lk.driverOnKubernetes" . }}
- name: spark-conf
  configMap:
    name: {{ include "lk.componentName" (dict "root" .root "component" "spark-conf") }}
{{- end }}
{{- end }}

{{/*
An init container that holds an app pod until `lk init` has created the topics, buckets and
serving schema. It waits in `Init:0/1` (visible in `kubectl get pods`) instead of letting the
app crash-loop; `lk init --check` exits 0 once everything exists. It checks with the pod's own
credentials (the same minioUser and postgres as its main container), so it also waits for
them to exist; `check` adds options (serving: `--serving`, the store as the read-only role).
Call: (dict "root" $ "minioUser" "archiver" "postgres" "writer" "check" "")
*/}}
{{- define "lk.waitForInit" -}}
- name: wait-for-init
  image: {{ include "lk.image" (dict "root" .root "image" .root.Values.images.app) }}
  imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" .root.Values.images.app) }}
  command:
    - sh
    - -c
    - until lk init --check{{ with .check }} {{ . }}{{ end }}; do echo "waiting for the init job (lk init)"; sleep 5; done
  env:
    {{- include "lk.env" (dict "root" .root "sparkDriverMemory" "512m" "minioUser" .minioUser "postgres" .postgres) | nindent 4 }}
  resources:
    {{- toYaml .root.Values.init.waitResources | nindent 4 }}
  securityContext:
    {{- include "lk.containerSecurityContext" (dict "root" .root "image" .root.Values.images.app) | nindent 4 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
{{- end }}

{{/*
Where a pod runs and what users add to it, in the official Airflow chart's habit: the top-level
nodeSelector, tolerations, affinity, podAnnotations, podLabels and extraEnv are every
workload's defaults; a component's own non-empty nodeSelector, tolerations, affinity,
priorityClassName or topologySpreadConstraints replaces the default, its podAnnotations and podLabels are merged over the defaults (the component's
win on a shared key), and its extraEnv follows the defaults' entries of other names. What the
chart sets itself wins over both: its labels (selectors and NetworkPolicies match on them), its
annotations (checksums, prometheus.io/*) and its own variables, which come first. A
component's extraVolumes and extraVolumeMounts follow the defaults' (the main container mounts
them), beside the chart's own volumes.
Resolved here once, as YAML, for every pod the chart defines: its Deployments, StatefulSets,
Jobs, the comparison's CronJob, the test pod, and the pod templates of the DAGs' step pods
(airflow.stepPods) and of Spark's executors (spark.kubernetes).
Call: (dict "root" $ "values" .Values.serving)
*/}}
{{- define "lk.pod.settings" -}}
{{- $defaults := .root.Values -}}
{{- $own := .values -}}
{{- $names := list -}}
{{- range $own.extraEnv }}{{ $names = append $names .name }}{{ end -}}
{{- $env := list -}}
{{- range $defaults.extraEnv }}{{ if not (has .name $names) }}{{ $env = append $env . }}{{ end }}{{ end -}}
nodeSelector: {{ $own.nodeSelector | default $defaults.nodeSelector | default dict | toJson }}
tolerations: {{ $own.tolerations | default $defaults.tolerations | default list | toJson }}
affinity: {{ $own.affinity | default $defaults.affinity | default dict | toJson }}
priorityClassName: {{ $own.priorityClassName | default $defaults.priorityClassName | default "" | toJson }}
topologySpreadConstraints: {{ $own.topologySpreadConstraints | default $defaults.topologySpreadConstraints | default list | toJson }}
podAnnotations: {{ merge dict ($own.podAnnotations | default dict) ($defaults.podAnnotations | default dict) | toJson }}
podLabels: {{ merge dict ($own.podLabels | default dict) ($defaults.podLabels | default dict) | toJson }}
extraEnv: {{ concat $env ($own.extraEnv | default list) | toJson }}
extraVolumes: {{ concat ($defaults.extraVolumes | default list) ($own.extraVolumes | default list) | toJson }}
extraVolumeMounts: {{ concat ($defaults.extraVolumeMounts | default list) ($own.extraVolumeMounts | default list) | toJson }}
{{- end }}

{{/*
A pod's metadata: the chart's labels of the component plus podLabels (none may replace one of
the chart's), and the chart's own annotations (a YAML map, may be empty) plus podAnnotations.
Call: (dict "root" $ "component" "serving" "values" .Values.serving ["annotations" "k: v"]
["labels" "k: v"]): "labels" replaces the component's lk.labels (the step pods carry fewer).
*/}}
{{- define "lk.pod.metadata" -}}
{{- $pod := include "lk.pod.settings" . | fromYaml -}}
{{- $labels := .labels | default (include "lk.labels" .) | fromYaml -}}
{{- $annotations := merge dict (.annotations | default "" | fromYaml) $pod.podAnnotations -}}
labels:
  {{- merge $labels $pod.podLabels | toYaml | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A pod spec's nodeSelector, affinity, tolerations, priorityClassName and
topologySpreadConstraints, and the release's imagePullSecrets. Call: as lk.pod.settings. */}}
{{- define "lk.pod.scheduling" -}}
{{- $pod := include "lk.pod.settings" . | fromYaml -}}
{{- with $pod.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $pod.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $pod.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $pod.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $pod.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A pod's extraVolumes (every pod's, then the component's own) beside the chart's volumes,
and its main container's extraVolumeMounts likewise. Call: as lk.pod.settings. */}}
{{- define "lk.pod.extraVolumes" -}}
{{- with (include "lk.pod.settings" . | fromYaml).extraVolumes }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{- define "lk.pod.extraVolumeMounts" -}}
{{- with (include "lk.pod.settings" . | fromYaml).extraVolumeMounts }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The extraEnv entries of a component's main container, after the chart's own variables.
Call: as lk.pod.settings. */}}
{{- define "lk.pod.extraEnv" -}}
{{- with (include "lk.pod.settings" . | fromYaml).extraEnv }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
A store's data volume: a claim per pod from the StatefulSet's volumeClaimTemplates, or a claim
the user made (persistence.existingClaim), mounted as the same volume `data`. The first is the
pod's volumes entry (nothing without an existing claim), the second the StatefulSet's
volumeClaimTemplates (nothing with one). A StatefulSet's claim templates cannot change in an
upgrade: set existingClaim at install.
Call: (dict "root" $ "component" "kafka" "persistence" .Values.kafka.persistence)
*/}}
{{- define "lk.persistence.volume" -}}
{{- with .persistence.existingClaim }}
- name: data
  persistentVolumeClaim:
    claimName: {{ . }}
{{- end }}
{{- end }}

{{- define "lk.persistence.claimTemplates" -}}
{{- if not .persistence.existingClaim }}
volumeClaimTemplates:
  - metadata:
      name: data
      labels:
        {{- include "lk.selectorLabels" (dict "root" .root "component" .component) | nindent 8 }}
    spec:
      accessModes: ["ReadWriteOnce"]
      {{- with .persistence.storageClass }}
      storageClassName: {{ . }}
      {{- end }}
      resources:
        requests:
          storage: {{ .persistence.size }}
{{- end }}
{{- end }}

{{/*
A store's PodDisruptionBudget (<store>.pdb.create): voluntary disruptions (a node drain, the
cluster autoscaler) wait while it would leave fewer than minAvailable of its pods, or more than
maxUnavailable away. With one replica, minAvailable 1 (or maxUnavailable 0) blocks a drain
until the pod is deleted by hand: off by default.
Call: (dict "root" $ "component" "kafka" "values" .Values.kafka)
*/}}
{{- define "lk.pdb" -}}
{{- $pdb := .values.pdb -}}
{{- if and .values.enabled $pdb.create }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "lk.componentName" (dict "root" .root "component" .component) }}
  labels:
    {{- include "lk.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  {{- if ne (toString $pdb.minAvailable) "" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "lk.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
{{- end }}
{{- end }}

{{/*
An Ingress to one of the release's UIs (ingress.<ui>, in the official Airflow chart's shape):
every host gets the path to the component's Service; a host with tls.enabled is served over
TLS with its secret. The component's NetworkPolicy admits its port from anywhere, so the
ingress controller's pods reach it.
Call: (dict "root" $ "component" "serving" "port" "http" "values" .Values.ingress.serving)
*/}}
{{- define "lk.ingress" -}}
{{- $v := .values -}}
{{- $service := include "lk.componentName" (dict "root" .root "component" .component) -}}
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ $service }}
  labels:
    {{- include "lk.labels" (dict "root" .root "component" .component) | nindent 4 }}
  {{- with $v.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with $v.ingressClassName }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- $tls := list }}
  {{- range $v.hosts }}{{ if and .tls .tls.enabled }}{{ $tls = append $tls . }}{{ end }}{{ end }}
  {{- with $tls }}
  tls:
    {{- range . }}
    - hosts: [{{ .name | quote }}]
      secretName: {{ .tls.secretName }}
    {{- end }}
  {{- end }}
  rules:
    {{- range $v.hosts | default (list (dict "name" "")) }}
    - {{- with .name }}
      host: {{ . | quote }}
      {{- end }}
      http:
        paths:
          - path: {{ $v.path }}
            pathType: {{ $v.pathType }}
            backend:
              service:
                name: {{ $service }}
                port:
                  name: {{ $.port }}
    {{- end }}
{{- end }}

{{/*
The ServiceAccount of the pods that call no Kubernetes API (every pod but the Spark drivers and
the scheduler that starts pods, which have Roles of their own): serviceAccount.name, else the
release's own when serviceAccount.create; empty, none is named and the namespace's `default`
runs them. Their token is never mounted either way.
*/}}
{{- define "lk.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "lk.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}
