"""Data pipelines on Spark over kmirror: the clickstream DR pipeline (`clickstream`) and the
failover report (`failover`). They use the Spark connector and the client only."""
