"""What the DAG files share: the Spark backend, the step tasks, defaults and templates.

Not a DAG file (`.airflowignore` keeps the DAG processor out of it); the DAG files import it,
since Airflow puts the DAGs folder on `sys.path`. Nothing here connects to a service or starts
Spark at import time: the DAG processor imports it on every parse.
"""
