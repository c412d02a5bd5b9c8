{{- define "lk.statsd.mappings" -}}
defaults:
  # Timers (milliseconds in StatsD, seconds here) as histograms: buckets for batch steps
  # that take seconds to tens of minutes.
  observer_type: histogram
  histogram_options:
    buckets: [0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600]
mappings:
  # A DAG run, by how it ended (dag_id and run_type come as labels).
  - match: airflow.dagrun.duration.*
    name: airflow_dagrun_duration_seconds
    labels:
      state: "$1"
  - match: airflow.dagrun.schedule_delay
    name: airflow_dagrun_schedule_delay_seconds
  - match: airflow.dagrun.first_task_scheduling_delay
    name: airflow_dagrun_first_task_scheduling_delay_seconds
  # A task's run, queue and schedule times (dag_id, task_id).
  - match: airflow.task.duration
    name: airflow_task_duration_seconds
  - match: airflow.task.queued_duration
    name: airflow_task_queued_duration_seconds
  - match: airflow.task.scheduled_duration
    name: airflow_task_scheduled_duration_seconds
  # Task instances started and finished (dag_id, task_id; state on finish).
  - match: airflow.ti.start
    name: airflow_ti_start_total
  - match: airflow.ti.finish
    name: airflow_ti_finish_total
  - match: airflow.ti_successes
    name: airflow_ti_successes_total
  - match: airflow.ti_failures
    name: airflow_ti_failures_total
  # Liveness of the scheduler, DAG processor and triggerer: counters that grow each loop.
  - match: airflow.scheduler_heartbeat
    name: airflow_scheduler_heartbeat_total
  - match: airflow.dag_processor_heartbeat
    name: airflow_dag_processor_heartbeat_total
  - match: airflow.triggerer_heartbeat
    name: airflow_triggerer_heartbeat_total
  - match: airflow.dag_processing.import_errors
    name: airflow_dag_processing_import_errors
  # The scheduler's loop and a DAG file's parse time.
  - match: airflow.dag_processing.last_duration
    name: airflow_dag_processing_last_duration_seconds
  - match: airflow.scheduler.scheduler_loop_duration
    name: airflow_scheduler_loop_duration_seconds
{{- end }}
