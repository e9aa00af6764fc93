"""One module per Kafka API. Every module here is imported by `kmirror.broker.api.load_handlers`."""
