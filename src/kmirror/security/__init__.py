"""Transport security: TLS contexts, SASL authentication, Kafka's security configs.

Sans-IO cores: `jaas` (JAAS config parsing), `plain` (the PLAIN mechanism), `sasl_server`
(the broker's per-connection SASL state machine), `client_config` and `listener_config`
(Kafka's client and listener security configs, validated). `tls` is the edge that reads
PEM files and builds `ssl.SSLContext`s.
"""
