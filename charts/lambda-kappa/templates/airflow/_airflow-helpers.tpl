{{/*
Airflow's configuration, shared by its api-server, scheduler, dag-processor, triggerer and
db-migrate Job. The database URL is assembled by the kubelet from the Secret's password
($(AIRFLOW_DB_PASSWORD)), so no manifest holds it.
*/}}
{{- define "lk.airflow.env" -}}
{{- $root := . -}}
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
- name: AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK
  value: "True"
{{- if include "lk.lambdaEnabled" $root }}
# The Lambda batch DAG's wiring; absent in kappa, where the DAG files define no Lambda DAG.
- name: LK_BATCH_SCHEDULE
  value: {{ $root.Values.batchLayer.schedule | quote }}
{{- end }}
{{ include "lk.env" (dict "root" $root "sparkDriverMemory" $root.Values.airflow.scheduler.sparkDriverMemory) }}
{{- end }}

{{/* Airflow components wait for `airflow db migrate` (run by the db-migrate Job). */}}
{{- define "lk.airflow.waitForMigrations" -}}
- name: wait-for-migrations
  image: {{ include "lk.image" (dict "root" . "image" .Values.images.airflow) }}
  imagePullPolicy: {{ include "lk.imagePullPolicy" (dict "image" .Values.images.airflow) }}
  args: ["db", "check-migrations", "--migration-wait-timeout=600"]
  env:
    {{- include "lk.airflow.env" . | nindent 4 }}
  resources:
    {{- toYaml .Values.airflow.dbMigrate.resources | nindent 4 }}
  securityContext:
    {{- include "lk.containerSecurityContext" (dict "image" .Values.images.airflow) | nindent 4 }}
{{- end }}

{{/* `airflow jobs check` for a job type: the official chart's liveness check. */}}
{{- define "lk.airflow.jobsCheck" -}}
exec:
  command:
    - sh
    - -c
    - AIRFLOW__LOGGING__LOGGING_LEVEL=ERROR airflow jobs check --job-type {{ . }} --local
{{- end }}

{{- define "lk.airflow.podSpecCommon" -}}
enableServiceLinks: false
securityContext:
  {{- include "lk.podSecurityContext" (dict "image" .Values.images.airflow) | nindent 2 }}
{{- end }}
