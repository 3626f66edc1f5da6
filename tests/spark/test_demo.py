"""The README's pipeline, short: the Parquet counts equal the acknowledged events, a leader killed midway."""

from weir.spark.demo import run_pipeline


def test_pipeline_survives_a_killed_leader(spark, tmp_path, zookeeper_connect):
    result = run_pipeline(tmp_path, events=3000, rate=400, minutes=3, spark=spark,
                          zookeeper_connect=zookeeper_connect)
    assert result.killed_broker is not None
    assert result.failed == 0, result.notes
    assert result.acked == 3000
    assert result.counted == result.truth
    assert result.counts_topic_records >= len(result.truth)
