"""The metadata log's quorum (KIP-595 KRaft, static voters): who leads `__cluster_metadata`,
elections, and what the voters have replicated (the high watermark). Sans-IO."""
