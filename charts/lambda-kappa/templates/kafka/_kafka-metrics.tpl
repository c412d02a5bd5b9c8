{{- define "lk.kafka.jmxExporterConfig" -}}
lowercaseOutputName: true
lowercaseOutputLabelNames: true
includeObjectNames:
  - kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,*
  - kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,*
  - kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,*
  - kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec,*
  - kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec,*
  - kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
  - kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount
  - kafka.server:type=ReplicaManager,name=OfflineReplicaCount
  - kafka.server:type=ReplicaManager,name=PartitionCount
  - kafka.server:type=ReplicaManager,name=LeaderCount
  - kafka.controller:type=KafkaController,name=ActiveControllerCount
  - kafka.controller:type=KafkaController,name=OfflinePartitionsCount
  - kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce
  - kafka.network:type=RequestMetrics,name=TotalTimeMs,request=FetchConsumer
  - kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Metadata
  - kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,*
  - kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer,*
  - kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent
  - kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent
  - kafka.log:type=Log,name=LogEndOffset,*
  - kafka.log:type=Log,name=LogStartOffset,*
  - kafka.log:type=Log,name=Size,*
excludeObjectNames:
  - kafka.server:type=BrokerTopicMetrics,topic=__consumer_offsets,*
  - kafka.log:type=Log,topic=__consumer_offsets,*
rules:
  # Records and bytes in and out, per topic and over all topics (meters: their Count).
  - pattern: kafka.server<type=BrokerTopicMetrics, name=(.+)PerSec, topic=(.+)><>Count
    name: kafka_server_brokertopicmetrics_$1_total
    type: COUNTER
    labels:
      topic: "$2"
  - pattern: kafka.server<type=BrokerTopicMetrics, name=(.+)PerSec><>Count
    name: kafka_server_brokertopicmetrics_$1_total
    type: COUNTER
  # Partition health (gauges).
  - pattern: kafka.(server|controller)<type=(ReplicaManager|KafkaController), name=(.+)><>Value
    name: kafka_$1_$2_$3
    type: GAUGE
  # Request latency: the broker's own percentiles of a request's total time (ms), and the
  # requests per type and version.
  - pattern: kafka.network<type=RequestMetrics, name=TotalTimeMs, request=(.+)><>(\d+)thPercentile
    name: kafka_network_requestmetrics_totaltimems
    type: GAUGE
    labels:
      request: "$1"
      quantile: "0.$2"
  - pattern: kafka.network<type=RequestMetrics, name=RequestsPerSec, request=(.+), version=(.+)><>Count
    name: kafka_network_requestmetrics_requests_total
    type: COUNTER
    labels:
      request: "$1"
      version: "$2"
  # How busy the broker's threads are (1: idle).
  - pattern: kafka.server<type=KafkaRequestHandlerPool, name=RequestHandlerAvgIdlePercent><>OneMinuteRate
    name: kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent
    type: GAUGE
  - pattern: kafka.network<type=SocketServer, name=NetworkProcessorAvgIdlePercent><>Value
    name: kafka_network_socketserver_networkprocessoravgidlepercent
    type: GAUGE
  # Per partition: the log's end and start offsets and its size on disk.
  - pattern: kafka.log<type=Log, name=(.+), topic=(.+), partition=(.+)><>Value
    name: kafka_log_log_$1
    type: GAUGE
    labels:
      topic: "$2"
      partition: "$3"
{{- end }}
