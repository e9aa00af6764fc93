"""Sans-IO controller logic: `(image, request values, server config) -> ControllerResult(records,
response)`. State changes only when the records are replayed into the image (Kafka's
QuorumController managers: ReplicationControlManager, ConfigurationControlManager,
AclControlManager, FeatureControlManager, ProducerIdControlManager, ClusterControlManager)."""
