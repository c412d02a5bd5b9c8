{{/*
A long-running Spark stream driver (archiver, speed layer, Kappa job): one replica, replaced
with Recreate because two drivers on one checkpoint would fight over it.

Liveness: a driver whose query fails exits non-zero and is restarted, but a hung one (a
micro-batch stuck on a dead connection, a wedged JVM) would sit there forever. The Spark UI
(port 4040) is off (core/spark.py) and would keep answering while a query hangs anyway, so the
driver writes a heartbeat instead: one file per streaming query in LK_STREAM_HEARTBEAT_DIR,
touched by a StreamingQueryListener on every progress and idle event (about every 10 s while
idle; after each micro-batch otherwise), and cleared when the driver starts. The probes only
run `find` on that folder (no Python, no JVM: milliseconds of CPU):
  startup:   the same check as liveness, for up to 10 minutes (Spark starts, its queries run);
  liveness:  every query's heartbeat is younger than stream.heartbeatTimeoutMinutes, which
             must exceed the longest micro-batch (maxOffsetsPerTrigger bounds it);
  readiness: the same, so `kubectl get pods` and `helm --wait` show a driver that is running.

The driver's Spark master is stream.sparkMaster, else spark.master: on a small node the stream
drivers may run Spark in their own pod while the batch layer's steps start executor pods.

Metrics (metrics.enabled): the driver serves its stream metrics on LK_METRICS_PORT (the
container port `metrics`, 9108), announced by the prometheus.io annotations (_metrics.tpl).

Call: (dict "root" $ "component" "speed-layer" "args" (list ...) "values" .Values.speedLayer)
The component's name is also its MinIO user (lk.minio.access).
*/}}
{{- define "lk.stream.heartbeatDir" -}}/tmp/lk/heartbeat{{- end }}

{{/* Exits 0 when a heartbeat exists and none is older than `minutes`. */}}
{{- define "lk.stream.heartbeatCheck" -}}
exec:
  command:
    - sh
    - -c
    - d="$LK_STREAM_HEARTBEAT_DIR"; test -n "$(find "$d" -type f 2>/dev/null)" && test -z "$(find "$d" -type f -mmin +{{ . }})"
{{- end }}

{{- define "lk.streamDeployment" -}}
{{- $root := .root -}}
{{- $image := $root.Values.images.app -}}
{{- $driver := dict "root" $root "master" ($root.Values.stream.sparkMaster | default $root.Values.spark.master) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "lk.componentName" (dict "root" $root "component" .component) }}
  labels:
    {{- include "lk.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "lk.selectorLabels" (dict "root" $root "component" .component) | nindent 6 }}
  template:
    metadata:
      {{- $annotations := include "lk.metrics.podAnnotations" (dict "root" $root "component" .component) }}
      {{- if include "lk.driverOnKubernetes" $driver }}
      {{- $annotations = printf "%s\nchecksum/spark-conf: %s" $annotations (include (print $root.Template.BasePath "/spark/spark-configmap.yaml") $root | sha256sum) }}
      {{- end }}
      {{- include "lk.pod.metadata" (dict "root" $root "component" .component "values" .values "annotations" $annotations) | nindent 6 }}
    spec:
      {{- include "lk.pod.scheduling" (dict "root" $root "values" .values) | nindent 6 }}
      enableServiceLinks: false
      {{- if include "lk.driverOnKubernetes" $driver }}
      serviceAccountName: {{ include "lk.componentName" (dict "root" $root "component" "spark-stream") }}
      automountServiceAccountToken: true
      {{- else }}
      {{- with include "lk.serviceAccountName" $root }}
      serviceAccountName: {{ . }}
      {{- end }}
      automountServiceAccountToken: false
      {{- end }}
      # Stop after the micro-batch in flight: SIGTERM, then time to commit.
      terminationGracePeriodSeconds: 60
      securityContext:
        {{- include "lk.podSecurityContext" (dict "root" $root "values" .values "image" $image) | nindent 8 }}
      initContainers:
        {{- include "lk.waitForInit" (dict "root" $root "minioUser" .component "postgres" "writer") | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ include "lk.image" (dict "root" $root "image" $image) }}
          imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" $image) }}
          args:
            {{- toYaml .args | nindent 12 }}
          env:
            {{- include "lk.env" (dict "root" $root "sparkDriverMemory" .values.sparkDriverMemory "minioUser" .component "postgres" "writer" "sparkMaster" $driver.master) | nindent 12 }}
            - name: LK_STREAM_HEARTBEAT_DIR
              value: {{ include "lk.stream.heartbeatDir" $root }}
            {{- if $root.Values.metrics.enabled }}
            - name: LK_METRICS_PORT
              value: {{ include "lk.metrics.streamPort" $root | quote }}
            # Scraped on the pod's IP, like `lk serve --host 0.0.0.0`.
            - name: LK_METRICS_HOST
              value: "0.0.0.0"
            {{- end }}
            {{- include "lk.sparkDriverEnv" $driver | nindent 12 }}
            {{- include "lk.pod.extraEnv" (dict "root" $root "values" .values) | nindent 12 }}
          {{- $ports := include "lk.sparkDriverPorts" $driver }}
          {{- if $root.Values.metrics.enabled }}
          {{- $ports = printf "- name: metrics\n  containerPort: %s\n%s" (include "lk.metrics.streamPort" $root) (trim $ports) }}
          {{- end }}
          {{- with trim $ports }}
          ports:
            {{- . | nindent 12 }}
          {{- end }}
          startupProbe:
            {{- include "lk.stream.heartbeatCheck" $root.Values.stream.heartbeatTimeoutMinutes | nindent 12 }}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 60
          livenessProbe:
            {{- include "lk.stream.heartbeatCheck" $root.Values.stream.heartbeatTimeoutMinutes | nindent 12 }}
            periodSeconds: 60
            timeoutSeconds: 5
            failureThreshold: 2
          readinessProbe:
            {{- include "lk.stream.heartbeatCheck" $root.Values.stream.heartbeatTimeoutMinutes | nindent 12 }}
            periodSeconds: 30
            timeoutSeconds: 5
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- include "lk.containerSecurityContext" (dict "root" $root "values" .values "image" $image) | nindent 12 }}
          volumeMounts:
            {{- with include "lk.pod.extraVolumeMounts" (dict "root" $root "values" .values) }}{{ . | nindent 12 }}{{ end }}
            - name: tmp
              mountPath: /tmp
            {{- include "lk.sparkDriverVolumeMounts" $driver | nindent 12 }}
      volumes:
        {{- with include "lk.pod.extraVolumes" (dict "root" $root "values" .values) }}{{ . | nindent 8 }}{{ end }}
        # Spark's local dir, the project's LK_HOME (the heartbeats) and the JVM's scratch space:
        # the only place a driver writes (its root filesystem is read-only).
        - name: tmp
          emptyDir: {}
        {{- include "lk.sparkDriverVolumes" $driver | nindent 8 }}
{{- end }}


{{/*
A stream driver's NetworkPolicy: the scrapers on `metrics` (metrics.scrapeFrom) and, in client
mode on Kubernetes, its executors on the callback ports. None when neither applies: the
release's default deny covers the pod.
Call: (dict "root" $ "component" "speed-layer")
*/}}
{{- define "lk.stream.networkPolicy" -}}
{{- $root := .root -}}
{{- if $root.Values.networkPolicies.enabled }}
{{- $rules := include "lk.metrics.scrapeRules" . | fromJsonArray }}
{{- if include "lk.sparkOnKubernetes" $root }}
{{- $rules = append $rules (dict "ports" (list "spark-driver" "spark-blockmgr") "from" (include "lk.netpol.peers" (dict "root" $root "components" (list "spark-executor")))) }}
{{- end }}
{{- if $rules }}
# A stream driver: {{ if include "lk.sparkOnKubernetes" $root }}its executors call back on its fixed ports; {{ end }}the scrapers read its metrics.
{{ include "lk.networkPolicy" (dict "root" $root "component" .component "ingress" $rules) }}
{{- end }}
{{- end }}
{{- end }}
