# syntax=docker/dockerfile:1.7
# The Airflow image: the app image (whose venv already holds apache-airflow and its providers at
# the versions uv.lock pins, beside the project, pyspark, the JRE and the connector jars for the
# batch layer's Spark driver: LocalExecutor tasks run in the scheduler pod) plus the DAGs, in
# AIRFLOW_HOME=/opt/airflow owned by the app's user (10001). Build from the repository root
# after the app image:
#   make images   (or: docker build -f infra/docker/airflow.Dockerfile \
#                        --build-arg APP_IMAGE=lambda-kappa/app:TAG -t lambda-kappa/airflow:TAG .)

ARG APP_IMAGE=lambda-kappa/app:0.1.0

FROM ${APP_IMAGE}
USER 0
# logs/ and auth/ are volumes in the chart; created here so that the image runs without them too.
RUN mkdir -p /opt/airflow/logs /opt/airflow/auth \
 && chown -R 10001:10001 /opt/airflow
COPY --chown=10001:10001 dags/ /opt/airflow/dags/
ENV AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/airflow/dags \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
USER 10001:10001
WORKDIR /opt/airflow
# As apache/airflow's images: the arguments are an `airflow` command (`scheduler`,
# `db migrate`...); a pod's `command:` replaces it (`sh -c ...`).
ENTRYPOINT ["tini", "--", "airflow"]
CMD ["version"]
