"""The README's pipeline, short: exactly once end to end with a leader killed midway — the Parquet
counts and the last counts in url-counts equal the committed events, no count update written twice."""

from weir.spark.demo import run_pipeline


def test_pipeline_survives_a_killed_leader(spark, tmp_path, zookeeper_connect):
    result = run_pipeline(tmp_path, events=3000, rate=400, minutes=3, spark=spark,
                          zookeeper_connect=zookeeper_connect)
    assert result.killed_broker is not None
    assert result.failed == 0, result.notes
    assert result.acked == 3000
    assert result.counted == result.truth
    assert result.topic_counted == result.truth
    assert result.counts_written_twice == 0
