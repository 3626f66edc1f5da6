"""One local SparkSession for every Spark test (start-up costs ~12 s), plus topic helpers."""

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark():
    from weir.spark import local_session
    session = local_session("weir-tests", cores=2, **{"spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()
