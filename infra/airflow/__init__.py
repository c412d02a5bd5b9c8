"""Airflow on this machine, for development and the end-to-end test: `python -m infra.airflow`.

`config.py` says how Airflow is configured (environment only, under the stack folder);
`service.py` starts and stops its components by PID.
"""
