package io.github.lambdakappa.connect;

import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Debezium's change event of a `profiles` row, turned into the record the streams read
 * (docs/CONTRACT.md §2): key `user_id`, value {user_id, segment, updated_ts}, record timestamp
 * `updated_ts`, on the `profiles` topic. A delete becomes one tombstone stamped with the deleted
 * row's `updated_ts` (its `before`: the table has REPLICA IDENTITY FULL), so it takes effect as
 * of the time the application gave it, not the time it was captured. Any other record
 * (Debezium's heartbeats) passes unchanged.
 *
 * Why one transform of ours: Debezium's ExtractNewRecordState writes a delete as a JSON null
 * (not a tombstone) and leaves the capture time as the record timestamp.
 */
public class ProfileChange<R extends ConnectRecord<R>> implements Transformation<R> {
  public static final String TOPIC = "topic";
  static final Schema VALUE =
      SchemaBuilder.struct()
          .name("lk.Profile")
          .field("user_id", Schema.STRING_SCHEMA)
          .field("segment", Schema.STRING_SCHEMA)
          .field("updated_ts", Schema.INT64_SCHEMA)
          .build();
  private static final ConfigDef CONFIG =
      new ConfigDef()
          .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the profiles topic");

  private String topic;

  @Override
  public void configure(Map<String, ?> configs) {
    topic = (String) CONFIG.parse(configs).get(TOPIC);
  }

  @Override
  public R apply(R record) {
    if (!(record.value() instanceof Struct envelope) || envelope.schema().field("op") == null) {
      return record;
    }
    boolean deleted = "d".equals(envelope.getString("op"));
    Struct row = envelope.getStruct(deleted ? "before" : "after");
    String userId = row.getString("user_id");
    Long updatedTs = row.getInt64("updated_ts");
    if (deleted) {
      return record.newRecord(
          topic, null, Schema.STRING_SCHEMA, userId, null, null, updatedTs);
    }
    Struct value =
        new Struct(VALUE)
            .put("user_id", userId)
            .put("segment", row.getString("segment"))
            .put("updated_ts", updatedTs);
    return record.newRecord(topic, null, Schema.STRING_SCHEMA, userId, VALUE, value, updatedTs);
  }

  @Override
  public ConfigDef config() {
    return CONFIG;
  }

  @Override
  public void close() {}
}
