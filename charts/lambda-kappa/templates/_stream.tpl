{{/*
A long-running Spark stream driver (archiver, speed layer, Kappa job): one replica, replaced
with Recreate because two drivers on one checkpoint would fight over it.

No liveness or readiness probe, on purpose: the process serves no port; when its query fails
it exits non-zero and the kubelet restarts it; and an exec probe would start Python or a JVM
(seconds of CPU) on a 4-CPU node, or, as a heartbeat file, kill a driver in a long first
micro-batch over a backlog. The pod says so in its `lambda-kappa.io/no-probe-reason` annotation,
which the chart tests require of any container without probes.

Call: (dict "root" $ "component" "speed-layer" "args" (list ...) "values" .Values.speedLayer)
*/}}
{{- define "lk.streamDeployment" -}}
{{- $root := .root -}}
{{- $image := $root.Values.images.app -}}
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
      labels:
        {{- include "lk.labels" (dict "root" $root "component" .component) | nindent 8 }}
      annotations:
        lambda-kappa.io/no-probe-reason: >-
          a stream driver serves no port and exits non-zero when its query fails; an exec
          probe would cost seconds of CPU per check
        {{- if include "lk.sparkOnKubernetes" $root }}
        checksum/spark-conf: {{ include (print $root.Template.BasePath "/spark/spark-configmap.yaml") $root | sha256sum }}
        {{- end }}
    spec:
      enableServiceLinks: false
      {{- if include "lk.sparkOnKubernetes" $root }}
      serviceAccountName: {{ include "lk.componentName" (dict "root" $root "component" "spark-stream") }}
      automountServiceAccountToken: true
      {{- else }}
      automountServiceAccountToken: false
      {{- end }}
      # Stop after the micro-batch in flight: SIGTERM, then time to commit.
      terminationGracePeriodSeconds: 60
      securityContext:
        {{- include "lk.podSecurityContext" (dict "image" $image) | nindent 8 }}
      initContainers:
        {{- include "lk.waitForInit" (dict "root" $root) | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ include "lk.image" (dict "root" $root "image" $image) }}
          imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" $image) }}
          args:
            {{- toYaml .args | nindent 12 }}
          env:
            {{- include "lk.env" (dict "root" $root "sparkDriverMemory" .values.sparkDriverMemory) | nindent 12 }}
            {{- include "lk.sparkDriverEnv" (dict "root" $root) | nindent 12 }}
          {{- with (include "lk.sparkDriverPorts" (dict "root" $root)) }}
          ports:
            {{- . | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- include "lk.containerSecurityContext" (dict "image" $image) | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- include "lk.sparkDriverVolumeMounts" (dict "root" $root) | nindent 12 }}
      volumes:
        # Spark's local dir, the project's LK_HOME and the JVM's scratch space.
        - name: tmp
          emptyDir: {}
        {{- include "lk.sparkDriverVolumes" (dict "root" $root) | nindent 8 }}
{{- end }}
