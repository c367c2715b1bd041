"""The Spark engine: schemas, pure transforms, and the job that reads, runs
and writes (the only module that creates a SparkSession)."""
