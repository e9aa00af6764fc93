"""A seeded simulation of two clusters mirroring each other (KIP-1279): mirror, failover and
failback over the real log, replication, mirror fetcher, MirrorManager and MirrorCoordinator;
only the ports are simulated (virtual clock, in-memory disks that lose unflushed bytes, a
lossy and slow network between the clusters, a controller model per cluster).
See docs/design/mirroring.md "Simulation"."""
